package ledger

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestHandoverMatchesOneLedger drives the same random inits, acks and
// fails through one ledger and through two that trade records at random
// moments (Extract on the old owner, Adopt on the new). Messages go to the
// new owner as soon as ownership changes, while the handover itself comes a
// few operations later, so acks, inits and fails reach the new owner before
// the records they belong to. Both must report the same outcome per root.
func TestHandoverMatchesOneLedger(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			ref := New(Config{Generations: 2})
			pair := [2]*Ledger{New(Config{Generations: 2}), New(Config{Generations: 2})}
			salt := uint64(0) // ownership: bit 0 of mix(springId ^ salt)
			owner := func(id uint64) int { return int(mix(id^salt) & 1) }
			want, got := map[uint64]Status{}, map[uint64]Status{}
			note := func(m map[uint64]Status, id uint64, o Outcome) {
				if o.Status == Completed || o.Status == Failed {
					if prev, ok := m[id]; ok {
						t.Fatalf("root %d settled twice: %v then %v", id, prev, o.Status)
					}
					m[id] = o.Status
				}
			}
			type root struct {
				id       uint64
				init     uint64   // XOR of all its edges: the spout's init
				edges    []uint64 // XOR terms still to ack
				initSent bool
				failed   bool
			}
			var roots []*root
			handover := func() {
				for from, l := range pair {
					moved := l.Extract(func(id uint64) bool { return owner(id) != from }, nil)
					for _, rec := range moved {
						note(got, rec.SpringID, pair[1-from].Adopt(rec))
					}
				}
			}
			due := -1 // operations until the pending handover, -1: none
			for i := range 3000 {
				if due == 0 {
					handover()
				}
				due--
				switch op := rng.IntN(100); {
				case op < 15 || len(roots) == 0: // a new root: init value = XOR of its edges
					r := &root{id: uint64(i + 1)}
					for range 1 + rng.IntN(4) {
						r.edges = append(r.edges, rng.Uint64()|1)
						r.init ^= r.edges[len(r.edges)-1]
					}
					roots = append(roots, r)
				case op < 97:
					r := roots[rng.IntN(len(roots))]
					l := pair[owner(r.id)]
					switch {
					case r.failed && r.initSent, r.initSent && len(r.edges) == 0: // settled: nothing more comes
						continue
					case !r.initSent && (r.failed || rng.IntN(3) > 0):
						r.initSent = true
						note(want, r.id, ref.Init(r.id, 1, r.init))
						note(got, r.id, l.Init(r.id, 1, r.init))
					case !r.failed && rng.IntN(40) == 0: // a tuple fails: the rest of the tree is never acked
						r.failed = true
						if task, ok := ref.Fail(r.id); ok {
							note(want, r.id, Outcome{Status: Failed, Task: task})
						}
						if task, ok := l.Fail(r.id); ok {
							note(got, r.id, Outcome{Status: Failed, Task: task})
						}
					case len(r.edges) > 0: // acks may come before the init
						e := r.edges[len(r.edges)-1]
						r.edges = r.edges[:len(r.edges)-1]
						note(want, r.id, ref.Ack(r.id, e))
						note(got, r.id, l.Ack(r.id, e))
					}
				default: // a planned change: new ownership now, the handover soon
					if due >= 0 {
						handover()
					}
					salt = rng.Uint64()
					due = rng.IntN(30)
				}
			}
			handover()
			if len(got) != len(want) {
				t.Fatalf("%d roots settled across the pair, %d in one ledger", len(got), len(want))
			}
			for id, s := range want {
				if got[id] != s {
					t.Fatalf("root %d: %v across the pair, %v in one ledger", id, got[id], s)
				}
			}
			if n := pair[0].Len() + pair[1].Len(); n != ref.Len() {
				t.Fatalf("%d records left across the pair, %d in one ledger", n, ref.Len())
			}
		})
	}
}
