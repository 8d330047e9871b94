package ring

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// Property tests: many random rings (seeded), probed at random keys and at
// every point's key and neighbours.

const (
	propRings = 300
	propKeys  = 300
)

func TestPropertyLocateMatchesScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	for i := range propRings {
		r := randomRing(t, rng)
		locs := r.Locations()
		for _, k := range probeKeys(r, rng, propKeys) {
			got, gotOK := r.LocateKey(k)
			want, wantOK := scan(locs, k, "")
			if got != want || gotOK != wantOK {
				t.Fatalf("ring %d, key %d: LocateKey = %q, %v; scan = %q, %v", i, k, got, gotOK, want, wantOK)
			}
		}
		for range 50 {
			id := rng.Uint64()
			got, _ := r.Locate(id)
			if want, _ := r.LocateKey(Key(id)); got != want {
				t.Fatalf("ring %d: Locate(%d) = %q, LocateKey(Key) = %q", i, id, got, want)
			}
		}
	}
}

// TestPropertyTableMatchesLocate: a frozen Table names the same owner as
// the ring it was made from, at random keys, at every point and beside it,
// at bucket edges; later ring changes do not reach it.
func TestPropertyTableMatchesLocate(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for i := range propRings {
		r := randomRing(t, rng)
		tab := r.Table()
		keys := probeKeys(r, rng, propKeys)
		for b := uint32(0); b < 1<<tableBits; b += 97 {
			lo := b << (32 - tableBits)
			keys = append(keys, lo, lo-1, lo+1)
		}
		for _, k := range keys {
			want, wantOK := r.LocateKey(k)
			n, ok := tab.OwnerKey(k)
			if ok != wantOK || (ok && tab.IDs()[n] != want) {
				t.Fatalf("ring %d, key %#x: table owner %d (%v) of %v, ring %q (%v)", i, k, n, ok, tab.IDs(), want, wantOK)
			}
		}
		ids := r.Ackers()
		r.Remove(ids[0])
		r.Add("late-comer")
		_ = r.SetState("late-comer", Running)
		for _, k := range keys[:20] {
			if n, ok := tab.OwnerKey(k); ok && tab.IDs()[n] == "late-comer" {
				t.Fatalf("ring %d: a change after Table reached it", i)
			}
		}
	}
}

// Removing a running acker moves exactly the roots it owned, each to the next
// running acker clockwise; adding one (and starting it) moves only roots onto
// it. Removing or adding an acker that is not running moves nothing.
func TestPropertyRemoveAndAddMoveOnlyTheirArcs(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for i := range propRings {
		before := randomRing(t, rng)
		ids := before.Ackers()
		gone := ids[rng.IntN(len(ids))]
		goneState, _ := before.State(gone)
		after := before.Clone()
		after.Remove(gone)
		locs := before.Locations()
		for _, k := range probeKeys(before, rng, propKeys) {
			was, _ := before.LocateKey(k)
			now, nowOK := after.LocateKey(k)
			want, wantOK := scan(locs, k, gone) // the next running acker clockwise, B aside
			if now != want || nowOK != wantOK {
				t.Fatalf("ring %d, remove %s: key %d went %q -> %q, want %q", i, gone, k, was, now, want)
			}
			if was != gone && now != was {
				t.Fatalf("ring %d, remove %s: key %d moved %q -> %q, not one of %s's", i, gone, k, was, now, gone)
			}
			if goneState != Running && now != was {
				t.Fatalf("ring %d, remove %s (%v): key %d moved", i, gone, goneState, k)
			}
		}

		added := fmt.Sprintf("new/%d", i)
		grown := before.Clone()
		grown.Add(added)
		for _, k := range probeKeys(grown, rng, propKeys) {
			was, _ := before.LocateKey(k)
			if now, _ := grown.LocateKey(k); now != was {
				t.Fatalf("ring %d, add %s (not started): key %d moved %q -> %q", i, added, k, was, now)
			}
		}
		mustSet(t, grown, added, Running)
		for _, k := range probeKeys(grown, rng, propKeys) {
			was, _ := before.LocateKey(k)
			if now, _ := grown.LocateKey(k); now != was && now != added {
				t.Fatalf("ring %d, add %s: key %d moved %q -> %q", i, added, k, was, now)
			}
		}
	}
}

// For ownership, failing (or stopping) an acker is removing it; making it
// Running again restores exactly the ownership it had.
func TestPropertyFailIsRemoveAndRestoreIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for i := range propRings {
		r := randomRing(t, rng)
		up := runningAckers(r)
		b := up[rng.IntN(len(up))]
		for _, down := range []State{Failed, NotStarted} {
			failed := r.Clone()
			mustSet(t, failed, b, down)
			removed := r.Clone()
			removed.Remove(b)
			restored := failed.Clone()
			mustSet(t, restored, b, Running)
			for _, k := range probeKeys(r, rng, propKeys) {
				f, fOK := failed.LocateKey(k)
				m, mOK := removed.LocateKey(k)
				if f != m || fOK != mOK {
					t.Fatalf("ring %d, %s %v: key %d on %q, but on %q when removed", i, b, down, k, f, m)
				}
				orig, _ := r.LocateKey(k)
				if back, _ := restored.LocateKey(k); back != orig {
					t.Fatalf("ring %d, %s %v then running: key %d on %q, was %q", i, b, down, k, back, orig)
				}
			}
			if failed.Owned(b) != 0 || restored.Owned(b) != r.Owned(b) {
				t.Fatalf("ring %d: %s owns %v %v, then %v running, was %v", i, b, failed.Owned(b), down, restored.Owned(b), r.Owned(b))
			}
		}
	}
}

// The shares of the running ackers cover the ring, and Owned agrees with a
// count of the keys each acker gets.
func TestPropertyOwnedCoversRing(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for i := range propRings {
		r := randomRing(t, rng)
		sum := 0.0
		for _, id := range r.Ackers() {
			sum += r.Owned(id)
		}
		if sum < 1-1e-9 || sum > 1+1e-9 {
			t.Fatalf("ring %d: shares sum to %v", i, sum)
		}
	}
	// A uniform sample of keys lands in proportion to the shares.
	r := running(t, 16, ackerNames(5)...)
	const n = 200_000
	counts := map[string]int{}
	for range n {
		id, _ := r.LocateKey(rng.Uint32())
		counts[id]++
	}
	for _, id := range r.Ackers() {
		if got, want := float64(counts[id])/n, r.Owned(id); got < want-0.01 || got > want+0.01 {
			t.Errorf("%s: %.4f of the keys, owns %.4f of the ring", id, got, want)
		}
	}
}
