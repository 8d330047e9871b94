package window

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/acktor/acktor/internal/mix"
)

// TestSeenModel drives Claim, Release and Expire with random ids and times
// over many panes against a map of id → pane, with a limit: an id is known
// from whichever live pane claimed it.
func TestSeenModel(t *testing.T) {
	const pane, limit = 10, 3000
	for _, seed := range []uint64{5, 6, 7} {
		rng := rand.New(rand.NewPCG(seed, 6))
		s := NewSeen(time.Duration(pane), limit)
		model := map[uint64]int64{}
		start, from := int64(0), int64(math.MinInt64)
		for i := range 100_000 {
			tm := start + rng.Int64N(8*pane) - pane // some before the window's start
			id := 1 + rng.Uint64N(5000)
			p := floorDiv(tm, pane)
			if i%7 == 0 { // changes nothing, ids known or not, 0 too
				s.Warm([]uint64{id, 0, 1 + rng.Uint64N(5000)})
			}
			if i%1000 == 0 { // changes nothing either
				s.Reserve(rng.IntN(2 * limit))
			}
			switch rng.IntN(10) {
			case 0:
				s.Release(tm, id)
				if q, ok := model[id]; ok && q == p {
					delete(model, id)
				}
			case 1:
				start += pane
				s.Expire(start)
				from = floorDiv(start, pane)
				for id, q := range model {
					if q < from {
						delete(model, id)
					}
				}
			default:
				fresh, err := s.Claim(tm, id)
				_, known := model[id]
				switch {
				case p < from && (!fresh || err != nil):
					t.Fatalf("seed %d step %d: claim before the window: %v, %v; want new, not kept", seed, i, fresh, err)
				case p < from:
				case known && (fresh || err != nil):
					t.Fatalf("seed %d step %d: claim of a known id: %v, %v", seed, i, fresh, err)
				case !known && len(model) >= limit && !errors.Is(err, ErrSeenFull):
					t.Fatalf("seed %d step %d: claim past the limit: %v, %v", seed, i, fresh, err)
				case !known && len(model) < limit && (!fresh || err != nil):
					t.Fatalf("seed %d step %d: claim of a new id: %v, %v", seed, i, fresh, err)
				case fresh:
					model[id] = p
				}
			}
			if s.Len() != len(model) {
				t.Fatalf("seed %d step %d: %d ids, model %d", seed, i, s.Len(), len(model))
			}
		}
		if len(s.slots) > 8*max(len(model), limit/2) {
			t.Errorf("seed %d: %d slots for %d live ids", seed, len(s.slots), len(model))
		}
	}
	s := NewSeen(10, 0)
	s.Warm([]uint64{1, 0}) // no table yet
	if fresh, err := s.Claim(0, 0); !fresh || err != nil {
		t.Fatalf("id 0: %v, %v; want always new", fresh, err)
	}
}

// TestSeenReserve: claiming as many new ids as reserved rebuilds nothing,
// whatever was claimed and forgotten before, and a reserve stops at the
// limit.
func TestSeenReserve(t *testing.T) {
	for _, tc := range []struct {
		name             string
		before, reserved int
		expire           bool
	}{
		{"empty", 0, 100_000, false},
		{"some ids", 5000, 100_000, false},
		{"some forgotten", 5000, 100_000, true},
		{"nothing", 5000, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(tc.before)))
			s := NewSeen(10, 0)
			for range tc.before {
				_, _ = s.Claim(0, rng.Uint64()|1)
			}
			if tc.expire {
				s.Expire(10)
			}
			s.Reserve(tc.reserved)
			slots := len(s.slots)
			for range tc.reserved {
				if fresh, err := s.Claim(10, rng.Uint64()|1); !fresh || err != nil {
					t.Fatalf("claim: %v, %v", fresh, err)
				}
			}
			if len(s.slots) != slots {
				t.Fatalf("%d slots after Reserve(%d), %d after as many claims: a rebuild", slots, tc.reserved, len(s.slots))
			}
			if tc.reserved > 0 && len(s.slots) > 4*(s.Len()+1) {
				t.Fatalf("%d slots for %d ids", len(s.slots), s.Len())
			}
		})
	}
	s := NewSeen(10, 1000)
	s.Reserve(1 << 60)
	if len(s.slots) > 2048 {
		t.Fatalf("Reserve past the limit of 1000 ids made %d slots", len(s.slots))
	}
}

// TestSeenAnotherTime: an id read again with a new time (a spout restarted
// elsewhere stamps its roots anew) is known while its first pane is live,
// and new once that pane has left the window.
func TestSeenAnotherTime(t *testing.T) {
	s := NewSeen(10, 0)
	for _, step := range []struct {
		expire int64 // the window's start before the claim; 0: no Expire
		t      int64
		fresh  bool
	}{
		{0, 35, true},
		{0, 95, false}, // later pane, same id
		{0, 5, false},  // earlier pane
		{30, 99, false},
		{40, 99, true}, // pane 3 has left the window
		{40, 120, false},
	} {
		if step.expire != 0 {
			s.Expire(step.expire)
		}
		if fresh, err := s.Claim(step.t, 42); fresh != step.fresh || err != nil {
			t.Fatalf("Claim at %d after the window starts at %d: %v, %v; want %v", step.t, step.expire, fresh, err, step.fresh)
		}
	}
	if s.Len() != 1 {
		t.Fatalf("Len %d, want 1", s.Len())
	}
	s.Release(120, 42) // not the pane it was claimed for
	if s.Len() != 1 {
		t.Fatalf("Release at another pane forgot the id")
	}
	s.Release(95, 42)
	if fresh, _ := s.Claim(130, 42); !fresh || s.Len() != 1 {
		t.Fatalf("after Release: Claim %v, Len %d", fresh, s.Len())
	}
}

// BenchmarkSeenClaim claims distinct ids (a counter's exactly-once check):
// all in one pane (no window: the whole input's ids), and spread over a
// sliding window of 60 panes that expire as it moves, 2M ids live.
func BenchmarkSeenClaim(b *testing.B) {
	for _, tc := range []struct {
		name    string
		perPane int // ids per pane; 0: one pane for all
	}{
		{"one-pane", 0},
		{"window=60-panes/ids=2M", 2_000_000 / 60},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := NewSeen(time.Second, 0)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				t := int64(0)
				if tc.perPane > 0 {
					t = int64(i/tc.perPane) * int64(time.Second)
					s.Expire(t - 59*int64(time.Second))
				}
				if fresh, err := s.Claim(t, mix.Splitmix64(uint64(i)+1)); !fresh || err != nil {
					b.Fatalf("claim %d: %v, %v", i, fresh, err)
				}
			}
			b.ReportMetric(float64(s.Len()), "ids")
		})
	}
}

// BenchmarkSeenWarm claims batches of 512 new ids, as a counter task gets
// them, in two tables fed the same ids in the same loop: one warmed a
// batch at a time first (Warm), one not; which goes first alternates and
// each is timed on its own. It reports each one's ns a claim and
// warm/plain; the tables grow to b.N*512 ids.
func BenchmarkSeenWarm(b *testing.B) {
	ss := [2]*Seen{NewSeen(time.Second, 0), NewSeen(time.Second, 0)}
	var spent [2]time.Duration
	ids := make([]uint64, 512)
	next := uint64(0)
	for i := 0; b.Loop(); i++ {
		for k := range ids {
			next++
			ids[k] = mix.Splitmix64(next)
		}
		for k := range 2 {
			j := (i + k) % 2
			start := time.Now()
			if j == 1 {
				ss[j].Warm(ids)
			}
			for _, id := range ids {
				if fresh, err := ss[j].Claim(0, id); !fresh || err != nil {
					b.Fatalf("claim %x: %v, %v", id, fresh, err)
				}
			}
			spent[j] += time.Since(start)
		}
	}
	n := float64(b.N) * float64(len(ids))
	b.ReportMetric(float64(spent[0].Nanoseconds())/n, "plain-ns/claim")
	b.ReportMetric(float64(spent[1].Nanoseconds())/n, "warm-ns/claim")
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "x-plain")
	b.ReportMetric(float64(ss[1].Len()), "ids")
}
