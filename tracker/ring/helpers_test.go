package ring

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
)

// springIDs returns n springIds shaped like acktor's spout tasks make them
// (task<<40 | seq): four tasks, each counting up from a random 39-bit start.
func springIDs(n int, seed uint64) []uint64 {
	const tasks, springBits = 4, 40
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	ids := make([]uint64, 0, n)
	for task := range uint64(tasks) {
		seq := rng.Uint64() >> (64 - springBits + 1)
		m := n / tasks
		if task == tasks-1 {
			m = n - len(ids)
		}
		for range m {
			seq++
			ids = append(ids, task<<springBits|seq&(1<<springBits-1))
		}
	}
	return ids
}

// ackerNames are the first n acker identities as acktor names them.
func ackerNames(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "acker/" + strconv.Itoa(i)
	}
	return ids
}

// running returns a ring of the given ackers, all Running.
func running(tb testing.TB, replicas int, ackers ...string) *Ring {
	tb.Helper()
	r := New(replicas)
	for _, id := range ackers {
		r.Add(id)
		mustSet(tb, r, id, Running)
	}
	return r
}

func mustSet(tb testing.TB, r *Ring, id string, s State) {
	tb.Helper()
	if err := r.SetState(id, s); err != nil {
		tb.Fatal(err)
	}
}

// maxOverMean is the largest acker's root count over the mean count.
func maxOverMean(r *Ring, springs []uint64) float64 {
	counts := make(map[string]int)
	for _, id := range springs {
		a, _ := r.Locate(id)
		counts[a]++
	}
	most, ackers := 0, 0
	for _, a := range r.Ackers() {
		if s, _ := r.State(a); s == Running {
			most = max(most, counts[a])
			ackers++
		}
	}
	return float64(most) * float64(ackers) / float64(len(springs))
}

// scan is the reference lookup: a linear pass over all points for the running
// point nearest clockwise from key (distance point-key, wrapping), the smaller
// acker id on a tie, ignoring the acker skip.
func scan(locs []Location, key uint32, skip string) (string, bool) {
	var best string
	var bestD uint32
	found := false
	for _, l := range locs {
		if l.Active != Running || l.Acker == skip {
			continue
		}
		d := l.Key - key
		if !found || d < bestD || d == bestD && l.Acker < best {
			best, bestD, found = l.Acker, d, true
		}
	}
	return best, found
}

// randomRing builds a ring of 1..10 ackers with random names, replica counts
// (mostly small, so arcs are short and edge cases frequent) and states, at
// least one of them Running.
func randomRing(t *testing.T, rng *rand.Rand) *Ring {
	t.Helper()
	replicas := 1 + rng.IntN(24)
	if rng.IntN(10) == 0 {
		replicas = DefaultReplicas
	}
	r := New(replicas)
	n := 1 + rng.IntN(10)
	for len(r.Ackers()) < n {
		r.Add(fmt.Sprintf("acker/%d", rng.IntN(100)))
	}
	for i, id := range r.Ackers() {
		s := State(rng.IntN(3))
		if i == 0 {
			s = Running
		}
		mustSet(t, r, id, s)
	}
	return r
}

// probeKeys are n random keys, both ends of the ring, and the keys of (up to
// 64 random) points with their neighbours.
func probeKeys(r *Ring, rng *rand.Rand, n int) []uint32 {
	keys := []uint32{0, 1, 1<<32 - 1}
	locs := r.Locations()
	rng.Shuffle(len(locs), func(i, j int) { locs[i], locs[j] = locs[j], locs[i] })
	for _, l := range locs[:min(len(locs), 64)] {
		keys = append(keys, l.Key-1, l.Key, l.Key+1)
	}
	for range n {
		keys = append(keys, rng.Uint32())
	}
	return keys
}

// runningAckers returns the ids of the Running ackers.
func runningAckers(r *Ring) []string {
	var ids []string
	for _, id := range r.Ackers() {
		if s, _ := r.State(id); s == Running {
			ids = append(ids, id)
		}
	}
	return ids
}
