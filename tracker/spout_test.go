package tracker

import (
	"strings"
	"testing"

	"github.com/acktor/acktor/messages"
)

// newSpout is spout task 5's tracker with a sequence starting at seq.
func newSpout(seq uint64) *Spout {
	return NewSpout(SpoutConfig{Task: 5, MaxPending: 4, MaxReplays: 2, BatchSize: 2, MaxEarly: 8, Deadline: 100, Draw: func() uint64 { return seq }})
}

// TestSeqMeets: a resumed spout task's sequence start is drawn again when a
// restored root's springId lies among the ids it is about to give.
func TestSeqMeets(t *testing.T) {
	const task = uint64(5) << SpringBits
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
		{"across the wrap of the sequence", 1<<SpringBits - 2, []uint64{task | 3}, true},
		{"one of several", 1000, []uint64{task | 10, task | 5000, task | 1<<39}, true},
	} {
		if got := newSpout(tc.seq).seqMeets(tc.ids); got != tc.want {
			t.Errorf("%s: seqMeets = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSpoutRestoreDrawsAgain: a task resumed from a state whose roots'
// springIds its sequence would give again draws another start, and keeps
// the roots.
func TestSpoutRestoreDrawsAgain(t *testing.T) {
	draws := []uint64{1000, 1000, 1 << 30}
	s := NewSpout(SpoutConfig{Task: 5, MaxPending: 4, MaxReplays: 2, Deadline: 100, Draw: func() uint64 {
		d := draws[0]
		draws = draws[1:]
		return d
	}})
	restored := []uint64{SpringID(5, 1001)}
	s.Restore(restored, []PendingRoot{{ID: 7, Deadline: 50}})
	if id := s.NextSpringID(); id != SpringID(5, 1<<30+1) || s.Len() != 1 {
		t.Fatalf("next springId %x after restore, %d in flight", id, s.Len())
	}
	if r, ok := s.settle(restored[0]); !ok || r.ID != 7 {
		t.Fatalf("restored root %+v %v", r, ok)
	}
}

// TestSpoutTracks: a spout task's inits go to the acker the ring names for
// each springId, one Track per acker per flush, stamped with the acker set
// they were routed by, and with none once they were routed by two; a root
// stays in flight until it settles or its deadline passes.
//
// Reference: the tracking paper §3.2 (roots placed on ackers by the ring).
func TestSpoutTracks(t *testing.T) {
	s := newSpout(1000)
	d := NewDirectory(1, 3, 0)
	var ids []uint64
	inits := map[uint64]uint64{}
	for i := range 4 {
		id := s.NextSpringID()
		ids, inits[id] = append(ids, id), uint64(i)+1
		s.Open(id, PendingRoot{ID: uint64(i)}, uint64(i)+1, d, 10)
	}
	if !s.Full() || s.Len() != 4 {
		t.Fatalf("%d in flight, full %v; want 4, full", s.Len(), s.Full())
	}
	s.Flush()
	seen := 0
	for _, o := range s.Ready() {
		m := o.Msg.(*messages.Track)
		if o.Dest != ToAcker || m.Task != 5 || m.Routing != d.Routing || m.Version != 1 {
			t.Fatalf("out %+v: %+v", o, m)
		}
		for i, id := range m.SpringIds {
			if d.AckerOf(id) != o.Acker || m.InitXors[i] != inits[id] {
				t.Fatalf("springId %x sent to acker/%d with init %d; owned by acker/%d, init %d", id, o.Acker, m.InitXors[i], d.AckerOf(id), inits[id])
			}
			seen++
		}
	}
	if seen != 4 || len(s.Ready()) != 0 {
		t.Fatalf("%d inits sent, want 4 once", seen)
	}
	// Routed by two acker sets between flushes: the Track says none.
	d2 := NewDirectory(2, 1, 0)
	one := NewDirectory(1, 1, 7)
	s.Open(s.NextSpringID(), PendingRoot{}, 1, one, 10)
	s.Open(s.NextSpringID(), PendingRoot{}, 1, d2, 10)
	s.Flush()
	if out := s.Ready(); len(out) != 1 || out[0].Msg.(*messages.Track).Routing != 0 || out[0].Msg.(*messages.Track).Version != 0 {
		t.Fatalf("a Track routed by two sets: %+v", out)
	}
	if r, ok := s.settle(ids[1]); !ok || r.ID != 1 || r.Deadline != 110 {
		t.Fatalf("settled %+v %v", r, ok)
	}
	if _, ok := s.settle(ids[1]); ok {
		t.Fatal("settled twice")
	}
	if exp := s.expiredRoots(110, nil); len(exp) != 0 {
		t.Fatalf("expired at the deadline: %v", exp)
	}
	if exp := s.expiredRoots(111, nil); len(exp) != 5 || s.Len() != 0 {
		t.Fatalf("expired past the deadline: %d, %d left", len(exp), s.Len())
	}
}

// TestSpoutReplayable: a failed root replays until MaxReplays, then is
// dead-lettered.
func TestSpoutReplayable(t *testing.T) {
	s := newSpout(1)
	for attempt, want := range []bool{true, true, false, false} {
		if got := s.replayable(PendingRoot{Attempt: int32(attempt)}); got != want {
			t.Errorf("attempt %d: replayable %v", attempt, got)
		}
	}
}

// TestSpoutSettles: what becomes of each root a notification or a deadline
// settles, for a source that replays and for one whose broker redelivers;
// notifications before Start wait for it, and a full hold refuses more.
func TestSpoutSettles(t *testing.T) {
	type want struct {
		v        Verdict
		timedOut bool
		reason   string
	}
	for _, tc := range []struct {
		name       string
		redelivers bool
		attempt    int32
		msg        func(id uint64) any // nil: the deadline passes
		want       want
	}{
		{"completed", false, 0, func(id uint64) any { return &messages.Completed{SpringIds: []uint64{id}} }, want{Done, false, ""}},
		{"failed by a processor", false, 0, func(id uint64) any { return &messages.Failed{SpringIds: []uint64{id}} }, want{Replay, false, "failed by a processor"}},
		{"timed out at its acker", false, 1, func(id uint64) any {
			return &messages.Failed{SpringIds: []uint64{id}, Reason: messages.FailReason_FAIL_REASON_TIMEOUT}
		}, want{Replay, true, "timed out at its acker"}},
		{"out of replays", false, 2, func(id uint64) any { return &messages.Failed{SpringIds: []uint64{id}} }, want{DeadLetter, false, "failed by a processor after 2 replays"}},
		{"redelivered by its broker", true, 0, func(id uint64) any { return &messages.Failed{SpringIds: []uint64{id}} }, want{Redeliver, false, "failed by a processor"}},
		{"out of redeliveries", true, 2, func(id uint64) any { return &messages.Failed{SpringIds: []uint64{id}} }, want{DeadLetter, false, "failed by a processor after 2 replays"}},
		{"rejected", false, 0, func(id uint64) any {
			return &messages.Rejected{SpringIds: []uint64{id}, Component: "split", Reason: "bad"}
		}, want{DeadLetter, false, "rejected by split: bad"}},
		{"past the deadline", false, 0, nil, want{Replay, true, "passed the spout's deadline"}},
		{"past the deadline, redelivered", true, 0, nil, want{Redeliver, true, "passed the spout's deadline"}},
	} {
		for _, early := range []bool{false, true} {
			s := newSpout(1000)
			if !early {
				s.Start(tc.redelivers, nil)
			}
			id := s.NextSpringID()
			s.Open(id, PendingRoot{ID: 9, Attempt: tc.attempt}, 1, NewDirectory(1, 2, 0), 10)
			var got []Settled
			var err error
			if tc.msg == nil {
				if early {
					continue // a deadline passes only on a started task's tick
				}
				got = s.Expire(111, nil)
			} else if got, err = s.Step(tc.msg(id), nil); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if early {
				if len(got) != 0 || s.Len() != 1 {
					t.Fatalf("%s: settled %v before start", tc.name, got)
				}
				got = s.Start(tc.redelivers, nil)
			}
			w := want{got[0].Verdict, got[0].TimedOut, got[0].Reason}
			if len(got) != 1 || w != tc.want || got[0].Root.ID != 9 || got[0].Failed != (tc.want.v != Done) || s.Len() != 0 {
				t.Errorf("%s (early %v): settled %+v, want %+v", tc.name, early, got, tc.want)
			}
			again := s.Expire(1000, nil)
			if tc.msg != nil {
				again, _ = s.Step(tc.msg(id), again)
			}
			if len(again) != 0 {
				t.Errorf("%s: settled twice: %+v", tc.name, again)
			}
		}
	}
	s := NewSpout(SpoutConfig{Task: 5, MaxPending: 4, MaxEarly: 1, Draw: func() uint64 { return 0 }})
	if _, err := s.Step(&messages.Completed{}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Step(&messages.Completed{}, nil); err != ErrTooEarly {
		t.Fatalf("a second early notification with room for one: %v", err)
	}
	if h := s.TakeHeld(); len(h) != 1 {
		t.Fatalf("held %d, want 1", len(h))
	}
}

// TestSpoutPullsAndFinishes: a task pulls while under MaxPending and its
// source has roots, pulls again once a batch worth of room is free, and is
// finished when its source ended and nothing is in flight; a redelivery
// reopens an ended source (the root comes back through it), one to be read
// no more (it broke, or the run stops) stays ended.
func TestSpoutPullsAndFinishes(t *testing.T) {
	for _, final := range []bool{false, true} {
		s := newSpout(0)
		if s.CanPull() {
			t.Fatal("pulls before start")
		}
		s.Start(true, nil)
		d := NewDirectory(1, 1, 0)
		var ids []uint64
		for range 4 {
			ids = append(ids, s.NextSpringID())
			s.Open(ids[len(ids)-1], PendingRoot{}, 1, d, 0)
		}
		if s.CanPull() || s.WantsPull() {
			t.Fatal("pulls at MaxPending")
		}
		s.Step(&messages.Completed{SpringIds: ids[:1]}, nil)
		if !s.CanPull() || s.WantsPull() {
			t.Fatalf("one free of 4 (batch 2): can %v, wants %v", s.CanPull(), s.WantsPull())
		}
		s.Step(&messages.Completed{SpringIds: ids[1:2]}, nil)
		if !s.WantsPull() {
			t.Fatal("a batch free and no pull wanted")
		}
		s.End(final)
		s.Step(&messages.Completed{SpringIds: ids[2:3]}, nil)
		if s.CanPull() || !s.WantsPull() || s.Finished() {
			t.Fatalf("ended with a root in flight: can %v, wants %v, finished %v", s.CanPull(), s.WantsPull(), s.Finished())
		}
		got, _ := s.Step(&messages.Failed{SpringIds: ids[3:]}, nil)
		if len(got) != 1 || got[0].Verdict != Redeliver {
			t.Fatalf("settled %+v", got)
		}
		if s.Ended() == !final || s.Finished() == !final {
			t.Fatalf("final %v: after a redelivery ended %v, finished %v", final, s.Ended(), s.Finished())
		}
	}
}

// TestSpoutFailAll: when a member dies every root in flight fails at once,
// each replayed or dead-lettered as its attempts say.
func TestSpoutFailAll(t *testing.T) {
	s := newSpout(0)
	s.Start(false, nil)
	d := NewDirectory(1, 2, 0)
	for i := range 3 {
		s.Open(s.NextSpringID(), PendingRoot{ID: uint64(i), Attempt: int32(i)}, 1, d, 0)
	}
	got := s.FailAll("member x died", nil)
	verdicts := map[uint64]Verdict{}
	for _, v := range got {
		if !v.Failed || v.TimedOut || !strings.HasPrefix(v.Reason, "member x died") {
			t.Fatalf("settled %+v", v)
		}
		verdicts[v.Root.ID] = v.Verdict
	}
	if s.Len() != 0 || len(got) != 3 || verdicts[0] != Replay || verdicts[1] != Replay || verdicts[2] != DeadLetter {
		t.Fatalf("%d left in flight; verdicts %v", s.Len(), verdicts)
	}
}

// TestSpoutHasten: a root whose messages could not be delivered expires
// at the earlier deadline; others keep theirs, and a later deadline moves
// none.
func TestSpoutHasten(t *testing.T) {
	s := newSpout(0)
	s.Start(false, nil)
	d := NewDirectory(1, 1, 0)
	a, b := s.NextSpringID(), s.NextSpringID()
	s.Open(a, PendingRoot{ID: 1}, 1, d, 0) // deadline 100
	s.Open(b, PendingRoot{ID: 2}, 1, d, 0)
	s.Hasten([]uint64{a, 12345}, 20)
	s.Hasten([]uint64{b}, 500)
	if got := s.Expire(21, nil); len(got) != 1 || got[0].Root.ID != 1 || got[0].Verdict != Replay {
		t.Fatalf("expired at 21: %+v", got)
	}
	if got := s.Expire(101, nil); len(got) != 1 || got[0].Root.ID != 2 {
		t.Fatalf("expired at 101: %+v", got)
	}
}
