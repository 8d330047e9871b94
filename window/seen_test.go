package window

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// TestIDSetModel checks the open-addressing id set against a map, with
// removals (which shift later ids back).
func TestIDSetModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var s idSet
	model := map[uint64]bool{}
	for range 50_000 {
		id := 1 + rng.Uint64N(20_000) // collisions and repeats
		if rng.IntN(4) == 0 {
			if got := s.remove(id); got != model[id] {
				t.Fatalf("remove(%d) = %v, want %v", id, got, model[id])
			}
			delete(model, id)
		} else {
			if got, want := s.add(id), !model[id]; got != want {
				t.Fatalf("add(%d) = %v, want %v", id, got, want)
			}
			model[id] = true
		}
		probe := 1 + rng.Uint64N(40_000)
		if s.has(probe) != model[probe] {
			t.Fatalf("has(%d) = %v", probe, !model[probe])
		}
	}
	if s.n != len(model) {
		t.Fatalf("%d ids, model %d", s.n, len(model))
	}
}

// TestSeenModel drives Claim, Release and Expire with random ids and times
// over many panes against a map of (pane, id), with a limit.
func TestSeenModel(t *testing.T) {
	const pane, limit = 10, 3000
	rng := rand.New(rand.NewPCG(5, 6))
	s := NewSeen(time.Duration(pane), limit)
	model := map[[2]int64]bool{}
	start := int64(0)
	for i := range 100_000 {
		tm := start + rng.Int64N(8*pane) - pane // some before the window's start
		id := 1 + rng.Uint64N(500)
		key := [2]int64{floorDiv(tm, pane), int64(id)}
		switch rng.IntN(10) {
		case 0:
			s.Release(tm, id)
			delete(model, key)
		case 1:
			start += pane
			s.Expire(start)
			for k := range model {
				if k[0] < floorDiv(start, pane) {
					delete(model, k)
				}
			}
		default:
			fresh, err := s.Claim(tm, id)
			switch {
			case model[key] && (fresh || err != nil):
				t.Fatalf("step %d: claim of a known id: %v, %v", i, fresh, err)
			case !model[key] && len(model) >= limit && !errors.Is(err, ErrSeenFull):
				t.Fatalf("step %d: claim past the limit: %v, %v", i, fresh, err)
			case !model[key] && len(model) < limit && (!fresh || err != nil):
				t.Fatalf("step %d: claim of a new id: %v, %v", i, fresh, err)
			}
			if fresh {
				model[key] = true
			}
		}
		if s.Len() != len(model) {
			t.Fatalf("step %d: %d ids, model %d", i, s.Len(), len(model))
		}
	}
	if fresh, err := s.Claim(0, 0); !fresh || err != nil {
		t.Fatalf("id 0: %v, %v; want always new", fresh, err)
	}
}
