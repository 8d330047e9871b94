package actors

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acktor/acktor/messages"
	"github.com/acktor/acktor/tracker"
	"github.com/acktor/acktor/tracker/ring"
)

// TestDirectoryFollowsTheRing: roots go where the paper's ring puts them,
// and a new acker set moves only the roots on the arcs that changed.
func TestDirectoryFollowsTheRing(t *testing.T) {
	d3, d4 := tracker.NewDirectory(1, 3, ring.DefaultReplicas), tracker.NewDirectory(2, 4, ring.DefaultReplicas)
	r := ring.New(ring.DefaultReplicas)
	for n := range 3 {
		r.Add(tracker.AckerIdentity(n))
		_ = r.SetState(tracker.AckerIdentity(n), ring.Running)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	moved := 0
	for range 20_000 {
		id := rng.Uint64()
		want, _ := r.Locate(id)
		if got := tracker.AckerIdentity(d3.AckerOf(id)); got != want {
			t.Fatalf("springId %d: directory says %s, ring %s", id, got, want)
		}
		if a, b := d3.AckerOf(id), d4.AckerOf(id); a != b {
			moved++
			if b != 3 {
				t.Fatalf("springId %d moved from acker %d to %d, not to the new acker 3", id, a, b)
			}
		}
	}
	if moved < 20_000/6 || moved > 20_000/3 { // about a quarter move
		t.Fatalf("%d of 20000 roots moved to the fourth acker", moved)
	}
}

// TestSetAckersHandsOver changes the acker count four times while a word
// count runs: records move with their roots, messages that reach an old
// owner are passed on, and not one root is failed or replayed.
func TestSetAckersHandsOver(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	vocab := strings.Fields("a b c d e f g h i j")
	var lines []string
	truth := map[string]int64{}
	for range 60_000 {
		var ws []string
		for range 1 + rng.IntN(6) {
			w := vocab[rng.IntN(len(vocab))]
			ws = append(ws, w)
			truth[w]++
		}
		lines = append(lines, strings.Join(ws, " "))
	}
	w := &words{counts: map[string]int64{}, seed: 9, doneIDs: map[uint64]int{}}
	cfg := DefaultConfig()
	cfg.Ackers, cfg.MaxPending, cfg.BatchSize, cfg.ReportEvery = 2, 512, 64, time.Millisecond
	cfg.Timeout = 10 * time.Second // a lost record would replay within the test, a slow machine would not
	cfg.Log = quietLog()
	rt, err := New(w.topology(t, lines, 2), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := startMember(t, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	plan := []int{5, 1, 3, 4} // after each fifth of the lines
	var setErr error
	st, err := rt.Run(ctx, c, func(p Progress) {
		if len(plan) > 0 && p.Completed >= uint64(len(lines))*uint64(5-len(plan))/5 {
			setErr = rt.SetAckers(ctx, c, plan[0])
			plan = plan[1:]
		}
	})
	if err != nil || setErr != nil {
		t.Fatal(err, setErr)
	}
	if version, n := rt.AckerSet(); version < 4 || n < 3 {
		t.Fatalf("acker set version %d with %d ackers: the run ended before the plan", version, n)
	}
	if st.Completed != uint64(len(lines)) || st.Failed != 0 || st.Replayed != 0 {
		t.Fatalf("%d of %d lines completed, %d failed, %d replayed", st.Completed, len(lines), st.Failed, st.Replayed)
	}
	var handed, adopted, tracked uint64
	for _, a := range st.Ackers {
		handed, adopted, tracked = handed+a.HandedOver, adopted+a.Adopted, tracked+a.Tracked
	}
	if handed == 0 || adopted == 0 || len(st.Ackers) != 5 || tracked != st.Roots {
		t.Fatalf("%d records handed over, %d adopted, %d ackers reported, %d tracked of %d roots", handed, adopted, len(st.Ackers), tracked, st.Roots)
	}
	for word, n := range truth {
		if w.counts[word] != n {
			t.Fatalf("%s counted %d, truth %d", word, w.counts[word], n)
		}
	}
}

func TestSetAckersRejects(t *testing.T) {
	for _, tc := range []struct {
		ackers, set int
		want        string
	}{
		{0, 2, "tracking is off"},
		{2, 0, "want 1..4096"},
		{2, 5000, "want 1..4096"},
	} {
		var b Builder
		b.Spout("s", 1, nopSource)
		topo, _ := b.Build()
		cfg := DefaultConfig()
		cfg.Ackers, cfg.Log = tc.ackers, quietLog()
		rt, err := New(topo, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.SetAckers(context.Background(), nil, tc.set); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%d ackers, set %d: %v, want %q", tc.ackers, tc.set, err, tc.want)
		}
	}
}

// TestLearnFrom: a member takes up the acker set a message's sender routed
// by when it is newer and well formed, and nothing else.
func TestLearnFrom(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version uint64
		routing uint64
		want    uint64 // the member's version after; it starts at 3
		ackers  int
	}{
		{"newer", 5, tracker.RoutingOf(7, 64), 5, 7},
		{"older", 2, tracker.RoutingOf(7, 64), 3, 2},
		{"the same version, a greater routing", 3, tracker.RoutingOf(7, 64), 3, 7},
		{"the same version, a smaller routing", 3, tracker.RoutingOf(1, 64), 3, 2},
		{"no version", 0, tracker.RoutingOf(7, 64), 3, 2},
		{"no routing", 5, 0, 3, 2},
		{"another ring scheme", 5, (tracker.RingScheme+1)<<48 | 7<<32 | 64, 3, 2},
		{"no ackers", 5, tracker.RoutingOf(0, 64), 3, 2},
		{"too many ackers", 5, tracker.RoutingOf(tracker.MaxAckers+1, 64), 3, 2},
		{"no replicas", 5, tracker.RoutingOf(7, 0), 3, 2},
		{"too many replicas", 5, tracker.RoutingOf(7, ring.MaxReplicas+1), 3, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &env{log: quietLog()}
			e.dir.Store(tracker.NewDirectory(3, 2, 64))
			e.learnFrom(tc.version, tc.routing)
			if d := e.dir.Load(); d.Version != tc.want || d.Ackers != tc.ackers {
				t.Fatalf("acker set %d of %d ackers, want %d of %d", d.Version, d.Ackers, tc.want, tc.ackers)
			}
			if d := e.dir.Load(); tc.ackers != 2 && (d.Routing != tc.routing || int(e.maxAckers.Load()) != tc.ackers) {
				t.Fatalf("learnt routing %x (max ackers %d), want %x", d.Routing, e.maxAckers.Load(), tc.routing)
			}
		})
	}
}

// TestAckerTrustsItsOwnRouting: an acker takes every entry of a Track or
// an AckBatch stamped with its own acker set's routing without looking at
// its ring, and checks (and passes on) the entries of one stamped with
// another set's or with none.
func TestAckerTrustsItsOwnRouting(t *testing.T) {
	rt, c := startAckers(t, 2)
	dir := rt.env.dir.Load()
	var foreign []uint64 // roots acker/1 owns
	for id := uint64(1); len(foreign) < 10; id++ {
		if dir.AckerOf(id) == 1 {
			foreign = append(foreign, id)
		}
	}
	forwarded := func() uint64 {
		t.Helper()
		res, err := c.Request(tracker.AckerIdentity(0), KindAcker, &messages.AckerStatsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return res.(*messages.AckerStats).Forwarded
	}
	ones := make([]uint64, len(foreign))
	for i := range ones {
		ones[i] = 1
	}
	for _, tc := range []struct {
		name    string
		routing uint64
		passed  uint64
	}{
		{"its own routing: trusted", dir.Routing, 0},
		{"another set's routing: checked", tracker.RoutingOf(2, ring.DefaultReplicas+1), 10},
		{"no routing: checked", 0, 10},
	} {
		for _, m := range []any{
			&messages.Track{Task: 0, SpringIds: foreign, InitXors: ones, Routing: tc.routing},
			&messages.AckBatch{SpringIds: foreign, XorDeltas: ones, Routing: tc.routing},
		} {
			t.Run(fmt.Sprintf("%T/%s", m, tc.name), func(t *testing.T) {
				before := forwarded()
				c.ActorSystem.Root.Send(c.Get(tracker.AckerIdentity(0), KindAcker), m)
				if got := forwarded() - before; got != tc.passed {
					t.Fatalf("acker/0 passed on %d entries, want %d", got, tc.passed)
				}
			})
		}
	}
}

// TestNearAckers: a spout task prefers the ackers the placement puts on its
// own member.
func TestNearAckers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		owners []string // by acker number
		want   []bool
	}{
		{"one of three here", []string{"b", "a", "c"}, []bool{false, true, false}},
		{"two of four here", []string{"a", "b", "a", "c"}, []bool{true, false, true, false}},
		{"none here", []string{"b", "c"}, []bool{false, false}},
		{"all here", []string{"a", "a"}, []bool{true, true}},
		{"unplaced (no member hosts ackers)", []string{"", ""}, []bool{false, false}},
		{"no ackers", nil, nil},
	} {
		owner := func(id string) string {
			n, ok := tracker.AckerNumber(id)
			if !ok || n >= len(tc.owners) {
				t.Fatalf("%s: asked for the owner of %q", tc.name, id)
			}
			return tc.owners[n]
		}
		if got := nearAckers(len(tc.owners), owner, "a"); !slices.Equal(got, tc.want) {
			t.Errorf("%s: near %v, want %v", tc.name, got, tc.want)
		}
	}
}
