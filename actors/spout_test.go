package actors

import (
	"testing"

	"github.com/acktor/acktor/tracker"
)

// TestSeqMeets: a resumed spout task's sequence start is drawn again when a
// restored root's springId lies among the ids it is about to give.
func TestSeqMeets(t *testing.T) {
	const task = uint64(5) << tracker.SpringBits
	for _, tc := range []struct {
		name string
		seq  uint64
		ids  []uint64
		want bool
	}{
		{"none restored", 1000, nil, false},
		{"the next id", 1000, []uint64{task | 1001}, true},
		{"the current id (given already)", 1000, []uint64{task | 1000}, false},
		{"2^36 ahead", 1000, []uint64{task | (1000 + 1<<36)}, true},
		{"past 2^36 ahead", 1000, []uint64{task | (1001 + 1<<36)}, false},
		{"behind", 1000, []uint64{task | 10}, false},
		{"across the wrap of the sequence", 1<<tracker.SpringBits - 2, []uint64{task | 3}, true},
		{"one of several", 1000, []uint64{task | 10, task | 5000, task | 1<<39}, true},
	} {
		s := &spoutTask{seq: tc.seq}
		if got := s.seqMeets(tc.ids); got != tc.want {
			t.Errorf("%s: seqMeets = %v, want %v", tc.name, got, tc.want)
		}
	}
}
