package ledger

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
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

// TestAdoptRejectsTaskAboveMaxTask: a handed-over record whose task does
// not fit a record's 24 bits is refused and counted, and leaves the ledger
// as it was; one that fits is kept for its task and times out after
// Generations rotations like any other. (Unchecked, the bits above MaxTask
// landed in the generation and flags: a record that never expired.)
func TestAdoptRejectsTaskAboveMaxTask(t *testing.T) {
	const gens = 3
	for _, tc := range []struct {
		name    string
		before  func(l *Ledger) // what reached the ledger first
		rec     Record
		want    Outcome
		wantLen int // records after the Adopt
		expired []uint32
	}{
		{name: "task MaxTask kept", rec: Record{SpringID: 1, CheckValue: 7, Task: MaxTask, Init: true},
			want: Outcome{Status: Pending, Task: MaxTask}, wantLen: 1, expired: []uint32{MaxTask}},
		{name: "task above MaxTask", rec: Record{SpringID: 1, CheckValue: 7, Task: MaxTask + 1, Init: true},
			want: Outcome{Status: Rejected}},
		{name: "generation bits set", rec: Record{SpringID: 1, CheckValue: 7, Task: 5 | 3<<24, Init: true},
			want: Outcome{Status: Rejected}},
		{name: "flag bits set", rec: Record{SpringID: 1, CheckValue: 7, Task: 5 | 1<<31, Init: true},
			want: Outcome{Status: Rejected}},
		{name: "without init", rec: Record{SpringID: 1, CheckValue: 7, Task: 1 << 30},
			want: Outcome{Status: Rejected}},
		{name: "onto acks that came first", before: func(l *Ledger) { l.Ack(1, 7) },
			rec: Record{SpringID: 1, CheckValue: 0, Task: 9 | 1<<24, Init: true}, want: Outcome{Status: Rejected},
			wantLen: 1}, // the acks stay, an orphan without init
		{name: "onto an init", before: func(l *Ledger) { l.Init(1, 4, 7) },
			rec: Record{SpringID: 1, CheckValue: 7, Task: 1 << 29}, want: Outcome{Status: Rejected},
			wantLen: 1, expired: []uint32{4}},
		{name: "valid onto acks that came first", before: func(l *Ledger) { l.Ack(1, 3) },
			rec: Record{SpringID: 1, CheckValue: 7, Task: 6, Init: true}, want: Outcome{Status: Pending, Task: 6},
			wantLen: 1, expired: []uint32{6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := New(Config{Generations: gens})
			if tc.before != nil {
				tc.before(l)
			}
			before := l.Stats()
			if got := l.Adopt(tc.rec); got != tc.want {
				t.Fatalf("Adopt(%+v) = %+v, want %+v", tc.rec, got, tc.want)
			}
			st := l.Stats()
			rejected := tc.want.Status == Rejected
			if (st.Rejected == before.Rejected+1) != rejected || (st.Adopted == before.Adopted) != rejected {
				t.Fatalf("stats %+v after %+v, before %+v", st, tc.want, before)
			}
			if l.Len() != tc.wantLen {
				t.Fatalf("%d records, want %d", l.Len(), tc.wantLen)
			}
			var expired []uint32
			for range gens {
				l.Rotate(func(_ uint64, task uint32) { expired = append(expired, task) })
			}
			if l.Len() != 0 || !slices.Equal(expired, tc.expired) {
				t.Fatalf("after %d rotations: %d records left, expired tasks %v, want none left and %v", gens, l.Len(), expired, tc.expired)
			}
		})
	}
}

// TestAdoptAnyTaskExpires: whatever task handed-over records name, those
// the ledger keeps expire for that task exactly at the Generations-th
// rotation, and those it refuses are counted.
func TestAdoptAnyTaskExpires(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 24))
	for round := range 200 {
		gens := 2 + rng.IntN(MaxGenerations-1)
		l := New(Config{Generations: gens})
		want := map[uint64]uint32{}
		var rejected uint64
		for i := range 1 + rng.IntN(64) {
			r := Record{SpringID: uint64(i + 1), CheckValue: rng.Uint64() | 1, Task: rng.Uint32() >> rng.IntN(16), Init: true}
			o := l.Adopt(r)
			if r.Task > MaxTask {
				rejected++
				if o.Status != Rejected {
					t.Fatalf("round %d: Adopt(%+v) = %+v, want rejected", round, r, o)
				}
				continue
			}
			if o != (Outcome{Status: Pending, Task: r.Task}) {
				t.Fatalf("round %d: Adopt(%+v) = %+v", round, r, o)
			}
			want[r.SpringID] = r.Task
		}
		got := map[uint64]uint32{}
		for i := range gens {
			if n := l.Len(); n != len(want)-len(got) {
				t.Fatalf("round %d: %d records after %d rotations, want %d", round, n, i, len(want)-len(got))
			}
			l.Rotate(func(id uint64, task uint32) {
				if i < gens-1 {
					t.Fatalf("round %d: springId %d expired at rotation %d of %d", round, id, i+1, gens)
				}
				got[id] = task
			})
		}
		if st := l.Stats(); l.Len() != 0 || !maps.Equal(got, want) || st.Rejected != rejected || st.Adopted != uint64(len(want)) {
			t.Fatalf("round %d (%d generations): %d records left, stats %+v; expired %v, want %v", round, gens, l.Len(), st, got, want)
		}
	}
}
