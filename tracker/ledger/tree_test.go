package ledger

import (
	"math/rand/v2"
	"testing"
)

// msg is one message an acker receives for a root: the spout's init or a
// processor's ack delta.
type msg struct {
	root uint64
	init bool
	task uint32
	v    uint64
}

// tuple is a tuple in flight in the simulated topology: for each root it is
// anchored to, the XOR of the edge ids that reached it (Storm's
// anchorsToIds), and the XOR of the edge ids of the tuples it emitted.
type tuple struct {
	ids    map[uint64]uint64
	outXor uint64
}

// simulate grows random tuple trees the way processors do (random fan-out
// and depth, multi-anchoring across roots) and returns every message the
// ackers would receive, per root.
func simulate(rng *rand.Rand, roots int) map[uint64][]msg {
	out := map[uint64][]msg{}
	var live []*tuple
	for r := 0; r < roots; r++ {
		root := rng.Uint64()
		task := uint32(rng.IntN(16))
		initXor := uint64(0)
		for c := 1 + rng.IntN(3); c > 0; c-- {
			e := rng.Uint64()
			initXor ^= e
			live = append(live, &tuple{ids: map[uint64]uint64{root: e}})
		}
		out[root] = append(out[root], msg{root: root, init: true, task: task, v: initXor})
	}
	depth := 0
	for len(live) > 0 {
		depth++
		i := rng.IntN(len(live))
		x := live[i]
		live[i] = live[len(live)-1]
		live = live[:len(live)-1]
		fan := rng.IntN(4)
		if depth > 2000 {
			fan = 0 // bound the trees
		}
		for c := 0; c < fan; c++ {
			anchors := []*tuple{x}
			if len(live) > 0 && rng.IntN(4) == 0 { // multi-anchoring
				anchors = append(anchors, live[rng.IntN(len(live))])
			}
			child := &tuple{ids: map[uint64]uint64{}}
			for _, a := range anchors {
				e := rng.Uint64()
				a.outXor ^= e
				for root := range a.ids {
					child.ids[root] ^= e
				}
			}
			live = append(live, child)
		}
		for root, id := range x.ids { // ack x
			out[root] = append(out[root], msg{root: root, v: id ^ x.outXor})
		}
	}
	return out
}

// TestRandomTreesCompleteExactlyWhenAllAcked: whatever the tree, the order of
// the messages, acks before the init and duplicates after completion, a root
// completes at its last message and never before.
//
// Reference: the tracking paper §3.3 (every tupleId is folded in twice, so checkValue
// is 0 exactly when the whole tree has been processed).
func TestRandomTreesCompleteExactlyWhenAllAcked(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		perRoot := simulate(rng, 1+rng.IntN(200))
		var all []msg
		for _, ms := range perRoot {
			all = append(all, ms...)
		}
		rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })

		l := New(Config{Generations: 3})
		left := map[uint64]int{}
		task := map[uint64]uint32{}
		for root, ms := range perRoot {
			left[root] = len(ms)
			task[root] = ms[0].task
		}
		done := map[uint64]bool{}
		for i, m := range all {
			var o Outcome
			if m.init {
				o = l.Init(m.root, m.task, m.v)
			} else {
				o = l.Ack(m.root, m.v)
			}
			left[m.root]--
			switch {
			case left[m.root] > 0 && o.Status != Pending:
				t.Fatalf("seed %d msg %d: root %x %v with %d messages missing", seed, i, m.root, o.Status, left[m.root])
			case left[m.root] == 0 && (o.Status != Completed || o.Task != task[m.root]):
				t.Fatalf("seed %d msg %d: root %x last message gave %+v, want completed for task %d", seed, i, m.root, o, task[m.root])
			}
			if o.Status == Completed {
				done[m.root] = true
			}
			if rng.IntN(10) == 0 && done[m.root] { // a late duplicate of an ack
				if o := l.Ack(m.root, m.v|1); o.Status != Pending {
					t.Fatalf("seed %d: late duplicate ack gave %v", seed, o.Status)
				}
			}
		}
		if len(done) != len(perRoot) {
			t.Fatalf("seed %d: %d of %d roots completed", seed, len(done), len(perRoot))
		}
		for r := 0; r < 3; r++ { // the late duplicates expire silently
			l.Rotate(func(id uint64, _ uint32) { t.Fatalf("seed %d: orphan %x reported as expired", seed, id) })
		}
		if l.Len() != 0 {
			t.Fatalf("seed %d: %d records left", seed, l.Len())
		}
	}
}

// TestMissingAckNeverCompletes drops one message of one root: that root never
// completes and times out (or, if the init was the one lost, is dropped as an
// orphan for the spout's own deadline to replay), and no other root is hurt.
func TestMissingAckNeverCompletes(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		rng := rand.New(rand.NewPCG(seed, 11))
		perRoot := simulate(rng, 1+rng.IntN(50))
		var victim uint64
		for root := range perRoot {
			victim = root
			break
		}
		ms := perRoot[victim]
		lost := rng.IntN(len(ms))
		lostInit := ms[lost].init
		perRoot[victim] = append(ms[:lost:lost], ms[lost+1:]...)

		var all []msg
		for _, ms := range perRoot {
			all = append(all, ms...)
		}
		rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		l := New(Config{Generations: 2})
		completed := 0
		for _, m := range all {
			var o Outcome
			if m.init {
				o = l.Init(m.root, m.task, m.v)
			} else {
				o = l.Ack(m.root, m.v)
			}
			if o.Status == Completed {
				if m.root == victim {
					t.Fatalf("seed %d: root with a lost message completed", seed)
				}
				completed++
			}
		}
		if completed != len(perRoot)-1 {
			t.Fatalf("seed %d: %d completed, want %d", seed, completed, len(perRoot)-1)
		}
		var expired []uint64
		l.Rotate(func(id uint64, _ uint32) { expired = append(expired, id) })
		l.Rotate(func(id uint64, _ uint32) { expired = append(expired, id) })
		if want := !lostInit; (len(expired) == 1 && expired[0] == victim) != want {
			t.Fatalf("seed %d: expired %x, lost init %v", seed, expired, lostInit)
		}
		if l.Len() != 0 {
			t.Fatalf("seed %d: %d records left", seed, l.Len())
		}
	}
}
