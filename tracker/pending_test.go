package tracker

import (
	"cmp"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPendingSetAgainstMap: random puts (mostly counting up, as a spout's
// springIds do, with replacements and far jumps), takes (mostly of old
// roots, some unknown), expiries and walks agree with a map.
func TestPendingSetAgainstMap(t *testing.T) {
	for _, max := range []int{1, 3, 64, 1000} {
		for seed := range uint64(5) {
			rng := rand.New(rand.NewPCG(seed, uint64(max)))
			s := newPendingSet(max)
			model := map[uint64]PendingRoot{}
			next := rng.Uint64N(1 << 40)
			for step := range 20_000 {
				switch r := rng.IntN(100); {
				case r < 45: // the next root goes out
					next += 1 + uint64(rng.IntN(2))
					if rng.IntN(50) == 0 {
						next += uint64(rng.IntN(1 << 20)) // a new task, or a random restart
					}
					p := PendingRoot{ID: next, Deadline: int64(rng.IntN(1000))}
					s.put(next, p)
					model[next] = p
				case r < 50 && len(model) > 0: // a replacement of one in flight
					id := slices.Collect(maps.Keys(model))[rng.IntN(len(model))]
					p := PendingRoot{ID: id, Attempt: 1, Deadline: int64(rng.IntN(1000))}
					s.put(id, p)
					model[id] = p
				case r < 93: // a root finishes: an old one, mostly
					id := next - uint64(rng.IntN(2*max+3))
					if rng.IntN(10) == 0 {
						id = rng.Uint64()
					}
					got, ok := s.take(id)
					want, wok := model[id]
					delete(model, id)
					if ok != wok || got != want {
						t.Fatalf("max %d seed %d step %d: take(%d) = %+v %v, want %+v %v", max, seed, step, id, got, ok, want, wok)
					}
				case r < 95: // the deadline passes for some
					now := int64(rng.IntN(1000))
					var want []PendingRoot
					for id, p := range model {
						if now > p.Deadline {
							want = append(want, p)
							delete(model, id)
						}
					}
					got := s.takeExpired(now, nil)
					byID := func(a, b PendingRoot) int { return cmp.Compare(a.ID, b.ID) }
					slices.SortFunc(got, byID)
					slices.SortFunc(want, byID)
					if !slices.Equal(got, want) {
						t.Fatalf("max %d seed %d step %d: expired %v, want %v", max, seed, step, got, want)
					}
				default: // a walk sees every root once
					seen := map[uint64]PendingRoot{}
					s.each(func(id uint64, p PendingRoot) {
						if _, dup := seen[id]; dup {
							t.Fatalf("each saw %d twice", id)
						}
						seen[id] = p
					})
					if !maps.Equal(seen, model) {
						t.Fatalf("max %d seed %d step %d: each saw %d roots, want %d", max, seed, step, len(seen), len(model))
					}
				}
				if s.len() != len(model) {
					t.Fatalf("max %d seed %d step %d: len %d, want %d", max, seed, step, s.len(), len(model))
				}
			}
		}
	}
}

// BenchmarkPendingSet is a spout's round: a root goes out, an older one
// finishes, with 2048 in flight; against a Go map doing the same.
func BenchmarkPendingSet(b *testing.B) {
	const inFlight = 2048
	b.Run("set", func(b *testing.B) {
		s := newPendingSet(inFlight)
		for i := range uint64(inFlight) {
			s.put(i, PendingRoot{ID: i})
		}
		id := uint64(inFlight)
		for b.Loop() {
			s.put(id, PendingRoot{ID: id})
			s.take(id - inFlight)
			id++
		}
	})
	b.Run("map", func(b *testing.B) {
		m := map[uint64]PendingRoot{}
		for i := range uint64(inFlight) {
			m[i] = PendingRoot{ID: i}
		}
		id := uint64(inFlight)
		for b.Loop() {
			m[id] = PendingRoot{ID: id}
			delete(m, id-inFlight)
			id++
		}
	})
}

func TestPendingSetNil(t *testing.T) {
	var s *pendingSet
	if _, ok := s.take(1); ok || s.len() != 0 || len(s.takeExpired(1, nil)) != 0 {
		t.Fatal("a nil set is not empty")
	}
	s.each(func(uint64, PendingRoot) { t.Fatal("a nil set has a root") })
}
