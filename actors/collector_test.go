package actors

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acktor/acktor/messages"
	"github.com/acktor/acktor/source"
	"github.com/acktor/acktor/tracker"
	"github.com/acktor/acktor/tracker/ledger"
)

func nopSource(int, int) (source.Source, error) { return idleSource{}, nil }

func nopProc(TaskInfo) (Processor, error) {
	return procFunc(func(t *Tuple, c *Collector) { c.Ack(t) }), nil
}

func TestBuildRejects(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(b *Builder)
		want  string
	}{
		{"no spout", func(b *Builder) {}, "no spout"},
		{"bad name", func(b *Builder) { b.Spout("a b", 1, nopSource) }, `component name "a b"`},
		{"parallelism", func(b *Builder) { b.Spout("s", 0, nopSource) }, "parallelism 0"},
		{"duplicate", func(b *Builder) { b.Spout("s", 1, nopSource); b.Processor("s", 1, nopProc).Shuffle("s") }, "declared twice"},
		{"unknown input", func(b *Builder) { b.Spout("s", 1, nopSource); b.Processor("p", 1, nopProc).Shuffle("x") }, `unknown component "x"`},
		{"no input", func(b *Builder) { b.Spout("s", 1, nopSource); b.Processor("p", 1, nopProc) }, "subscribes to nothing"},
		{"negative field", func(b *Builder) { b.Spout("s", 1, nopSource); b.Processor("p", 1, nopProc).Fields("s", -1) }, "field -1"},
		{"nil source", func(b *Builder) { b.Spout("s", 1, nil) }, "nil source"},
		{"subscribed twice", func(b *Builder) { b.Spout("s", 1, nopSource); b.Processor("p", 1, nopProc).Shuffle("s").Fields("s", 0) }, "subscribes to s twice"},
		{"cycle", func(b *Builder) {
			b.Spout("s", 1, nopSource)
			b.Processor("p", 1, nopProc).Shuffle("s").Shuffle("q")
			b.Processor("q", 1, nopProc).Shuffle("p")
		}, "cycle"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b Builder
			tc.build(&b)
			_, err := b.Build()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Build() = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestTaskIdentities(t *testing.T) {
	var b Builder
	b.Spout("s", 2, nopSource)
	b.Processor("p", 3, nopProc).Shuffle("s")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	for task := uint32(0); task < uint32(topo.Tasks()); task++ {
		id := topo.identity(task)
		got, err := topo.taskOf(id)
		if err != nil || got != task {
			t.Fatalf("taskOf(%q) = %d, %v; want %d", id, got, err, task)
		}
	}
	for _, bad := range []string{"p/3", "p/-1", "x/0", "p", "p/zz", "acker/0"} {
		if _, err := topo.taskOf(bad); err == nil {
			t.Errorf("taskOf(%q) accepted", bad)
		}
	}
	if p, _ := topo.Component("p"); p.upstream != 2 || p.FirstTask != 2 {
		t.Fatalf("p: upstream %d, first task %d", p.upstream, p.FirstTask)
	}
}

// wiring builds s -> p (shuffle) -> q (fields on value 0), q a sink, and
// collectors for task 0 (s), 1 (p) and 2 (q) that record what they send.
type wiring struct {
	env    *env
	tuples map[uint32][]*messages.TupleBatch
	acks   []*messages.AckBatch
	fails  []*messages.FailRoot
}

func newWiring(t testing.TB, ackers int) *wiring {
	var b Builder
	b.Spout("s", 1, nopSource)
	b.Processor("p", 1, nopProc).Shuffle("s")
	b.Processor("q", 1, nopProc).Fields("p", 0)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Ackers, cfg.BatchSize = ackers, 4
	return &wiring{env: newEnv(topo, cfg, quietLog()), tuples: map[uint32][]*messages.TupleBatch{}}
}

func (w *wiring) collector(task uint32) *Collector {
	return newCollector(w.env, task,
		func(to uint32, b *messages.TupleBatch) { w.tuples[to] = append(w.tuples[to], b) },
		func(_ int, m *messages.AckBatch) { w.acks = append(w.acks, m) },
		func(_ int, m *messages.FailRoot) { w.fails = append(w.fails, m) })
}

// received decodes everything sent to task.
func (w *wiring) received(t *testing.T, task uint32) []*Tuple {
	t.Helper()
	var out []*Tuple
	for _, b := range w.tuples[task] {
		ts, err := decode(b, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range ts {
			out = append(out, &ts[i])
		}
	}
	w.tuples[task] = nil
	return out
}

// TestMultiAnchoringCompletesBothRoots: a tuple anchored to tuples of two
// roots is folded into both records; each root completes only when that
// tuple is acked too.
func TestMultiAnchoringCompletesBothRoots(t *testing.T) {
	w := newWiring(t, 1)
	spout, p, q := w.collector(0), w.collector(1), w.collector(2)
	l := ledger.New(ledger.Config{Generations: 2})
	init1, _ := spout.emitRoot(101, 1, 0, "x y")
	init2, _ := spout.emitRoot(202, 2, 0, "z")
	spout.flush()
	l.Init(101, 0, init1)
	l.Init(202, 0, init2)
	in := w.received(t, 1)
	if len(in) != 2 {
		t.Fatalf("p received %d tuples, want 2", len(in))
	}
	if err := p.Emit(in, "joined"); err != nil { // anchored to both roots
		t.Fatal(err)
	}
	p.Ack(in[0])
	p.Ack(in[1])
	p.flush()
	apply := func() (done []uint64) {
		for _, a := range w.acks {
			for i, id := range a.SpringIds {
				if o := l.Ack(id, a.XorDeltas[i]); o.Status == ledger.Completed {
					done = append(done, id)
				}
			}
		}
		w.acks = nil
		return done
	}
	if done := apply(); len(done) != 0 {
		t.Fatalf("roots %v completed while the joined tuple is pending", done)
	}
	child := w.received(t, 2)
	if len(child) != 1 || len(child[0].Roots()) != 2 {
		t.Fatalf("q received %+v", child)
	}
	q.Ack(child[0])
	q.flush()
	if done := apply(); len(done) != 2 {
		t.Fatalf("completed %v after the last ack, want both roots", done)
	}
}

func TestEmitErrors(t *testing.T) {
	w := newWiring(t, 1)
	spout, p := w.collector(0), w.collector(1)
	spout.emitRoot(1, 1, 0, "a")
	spout.flush()
	in := w.received(t, 1)
	if err := p.Emit(in); err == nil || !strings.Contains(err.Error(), "fields grouping on value 0") {
		t.Fatalf("emit without the grouped field: %v", err)
	}
	p.Ack(in[0])
	if err := p.Emit(in, "late"); err == nil || !strings.Contains(err.Error(), "already acked") {
		t.Fatalf("emit anchored to an acked tuple: %v", err)
	}
	p.flush()
	if len(w.tuples[2]) != 0 {
		t.Fatal("a failed emit sent a tuple")
	}
}

func TestFailAndBatchLimits(t *testing.T) {
	w := newWiring(t, 2)
	spout, p := w.collector(0), w.collector(1)
	for id := uint64(1); id <= 10; id++ {
		spout.emitRoot(id, id, 0, "w")
	}
	if n := len(w.tuples[1]); n != 2 { // BatchSize 4: two full batches sent before flush
		t.Fatalf("%d batches sent before flush, want 2", n)
	}
	spout.flush()
	in := w.received(t, 1)
	for _, tu := range in {
		p.Fail(tu)
		p.Ack(tu) // ignored: already failed
	}
	p.flush()
	roots := 0
	for _, f := range w.fails {
		for _, id := range f.SpringIds {
			roots++
			if id < 1 || id > 10 {
				t.Fatalf("failed unknown root %d", id)
			}
		}
	}
	if roots != 10 || len(w.acks) != 0 {
		t.Fatalf("%d roots failed, %d ack batches; want 10 and 0", roots, len(w.acks))
	}
}

func TestDecodeRejectsMalformed(t *testing.T) {
	for _, b := range []*messages.TupleBatch{
		{AnchorCounts: []uint32{1}, ValueCounts: []uint32{0}},                                                   // anchor past the end
		{AnchorCounts: []uint32{0}, ValueCounts: []uint32{2}, Values: []string{"a"}},                            // value past the end
		{AnchorCounts: []uint32{0, 0}, ValueCounts: []uint32{0}},                                                // counts disagree
		{AnchorCounts: []uint32{0}, ValueCounts: []uint32{0}, SpringIds: []uint64{1}},                           // ids disagree
		{AnchorCounts: []uint32{0}, ValueCounts: []uint32{1}, Values: []string{"a", "left over"}},               // left over
		{AnchorCounts: []uint32{0}, ValueCounts: []uint32{0}, ContentIds: []uint64{1}},                          // lineage half there
		{AnchorCounts: []uint32{0}, ValueCounts: []uint32{0}, ContentIds: []uint64{1, 2}, Times: []int64{1, 2}}, // lineage too long
	} {
		if _, err := decode(b, nil, nil); err == nil {
			t.Errorf("decode(%v) accepted a malformed batch", b)
		}
	}
}

// TestLineage: a replayed root (same content id, new springId) yields
// children with the same content ids and time; siblings differ; a tuple
// anchored to two roots takes the later time.
func TestLineage(t *testing.T) {
	w := newWiring(t, 1)
	spout, p := w.collector(0), w.collector(1)
	children := func(springID uint64) (cids []uint64, times []int64) {
		spout.emitRoot(springID, rootContentID(0, 7), 1000, "x y")
		spout.flush()
		in := w.received(t, 1)
		if got := in[0].ContentID(); got != rootContentID(0, 7) || in[0].Time() != 1000 {
			t.Fatalf("root lineage (%x, %d)", got, in[0].Time())
		}
		for _, word := range strings.Fields(in[0].Values()[0]) {
			if err := p.Emit(in, word); err != nil {
				t.Fatal(err)
			}
		}
		p.flush()
		for _, c := range w.received(t, 2) {
			cids, times = append(cids, c.ContentID()), append(times, c.Time())
		}
		return cids, times
	}
	first, ft := children(11)
	again, at := children(12) // the replay
	if len(first) != 2 || first[0] == first[1] || first[0] == 0 {
		t.Fatalf("children content ids %x: want two distinct non-zero", first)
	}
	for i := range first {
		if first[i] != again[i] || ft[i] != 1000 || at[i] != 1000 {
			t.Fatalf("replay changed lineage: %x/%v then %x/%v", first, ft, again, at)
		}
	}
	if rootContentID(0, 7) == rootContentID(1, 7) || rootContentID(0, 7) == rootContentID(0, 8) {
		t.Fatal("root content ids collide across tasks or roots")
	}

	spout.emitRoot(21, 21, 5, "a")
	spout.emitRoot(22, 22, 9, "b")
	spout.flush()
	if err := p.Emit(w.received(t, 1), "joined"); err != nil {
		t.Fatal(err)
	}
	p.flush()
	if j := w.received(t, 2); len(j) != 1 || j[0].Time() != 9 {
		t.Fatalf("joined tuple time %d, want the later root's 9", j[0].Time())
	}
}

// threeRoots wires one acker, emits roots 1, 2 and 3 from the spout, and
// returns the processor's collector and the three tuples it received.
func threeRoots(t *testing.T) (*wiring, *Collector, []*Tuple) {
	t.Helper()
	w := newWiring(t, 1)
	spout, p := w.collector(0), w.collector(1)
	for id := uint64(1); id <= 3; id++ {
		spout.emitRoot(id, id, 0, "w")
	}
	spout.flush()
	return w, p, w.received(t, 1)
}

// TestRecycledAckBatch: an ack batch the acker has read and put back is
// the next one a collector fills, and it starts empty.
func TestRecycledAckBatch(t *testing.T) {
	w, p, in := threeRoots(t)
	p.Ack(in[0])
	p.Ack(in[1])
	p.flush()
	if len(w.acks) != 1 || len(w.acks[0].SpringIds) != 2 {
		t.Fatalf("first batch %+v, want two entries", w.acks)
	}
	read := w.acks[0]
	read.Version = 7 // as an acker's pass-on would have it
	w.env.recycle.doneAcks(read)
	w.acks = nil
	p.Ack(in[2])
	p.flush()
	if len(w.acks) != 1 || w.acks[0] != read { // a pool keeps what it was given across one collection
		t.Fatalf("the batch after recycling is not the one put back")
	}
	if v := w.env.dir.Load().Version; len(read.SpringIds) != 1 || read.SpringIds[0] != 3 || read.Version != v {
		t.Fatalf("batch after recycling %+v, want root 3 alone, version %d (the task's acker set, not the 7 it was read with)", read, v)
	}
}

// TestAckBatchRouting: an ack batch is stamped with the acker set its
// entries were routed by, and with none once they were routed by two.
func TestAckBatchRouting(t *testing.T) {
	w, p, in := threeRoots(t)
	dir := w.env.dir.Load()
	p.Ack(in[0])
	p.flush()
	if len(w.acks) != 1 || w.acks[0].Routing != dir.Routing || dir.Routing == 0 {
		t.Fatalf("batch %+v, want routing %x", w.acks, dir.Routing)
	}
	p.Ack(in[1])
	w.env.dir.Store(tracker.NewDirectory(dir.Version+1, dir.Ackers, dir.Replicas+1)) // another ring, the same acker
	p.Ack(in[2])
	p.flush()
	if len(w.acks) != 2 || len(w.acks[1].SpringIds) != 2 || w.acks[1].Routing != 0 {
		t.Fatalf("batch routed by two sets %+v, want routing 0", w.acks[1])
	}
}

// TestLocalOrShuffle: a local-or-shuffle output spreads over the
// subscriber's tasks on the emitter's member, over all of them when none is
// there or the collector cannot tell, and looks again after the member's
// topology changes.
func TestLocalOrShuffle(t *testing.T) {
	var b Builder
	b.Spout("s", 1, nopSource)
	b.Processor("p", 4, nopProc).LocalOrShuffle("s") // tasks 1..4
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Ackers, cfg.BatchSize = 1, 1
	cases := []struct {
		name  string
		local func(uint32) bool // nil: the collector cannot tell
		after func(uint32) bool // the locals once the topology changed
		want  []uint32          // targets of 8 roots, 4 before the change
	}{
		{"none can tell", nil, nil, []uint32{2, 3, 4, 1, 2, 3, 4, 1}},
		{"two local", func(t uint32) bool { return t == 2 || t == 4 }, nil, []uint32{4, 2, 4, 2, 4, 2, 4, 2}},
		{"none local", func(uint32) bool { return false }, nil, []uint32{2, 3, 4, 1, 2, 3, 4, 1}},
		{"moved", func(t uint32) bool { return t == 3 }, func(t uint32) bool { return t == 1 }, []uint32{3, 3, 3, 3, 1, 1, 1, 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(topo, cfg, quietLog())
			var got []uint32
			c := newCollector(e, 0, func(to uint32, _ *messages.TupleBatch) { got = append(got, to) }, nil, nil)
			c.local = tc.local
			asked := 0
			if tc.local != nil {
				c.local = func(t uint32) bool { asked++; return tc.local(t) }
			}
			for i := range 8 {
				if i == 4 && tc.after != nil {
					c.local = tc.after
					e.epoch.Add(1) // the member's topology changed
				}
				if _, err := c.emitRoot(uint64(100+i), uint64(i), 0, "line"); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("targets %v, want %v", got, tc.want)
			}
			if tc.local != nil && asked != 4 { // once per task, not per tuple
				t.Fatalf("asked %d times where tasks run, want 4", asked)
			}
		})
	}
}

// TestAckHold: with AckDelay 0 a processor's deltas wait behind the input
// batches already queued, but over at most ackHoldBatches batches; with a
// delay, only the timer sends them. One flushAcks is under way at a time.
func TestAckHold(t *testing.T) {
	type step struct{ flush, queue bool }
	for _, tc := range []struct {
		name  string
		delay time.Duration
		want  []step // after each of consecutive input batches, no flushAcks handled
	}{
		{"behind the queue, at most 4 batches", 0, []step{
			{false, true}, {false, false}, {false, false}, {true, false},
			{false, false}, {false, false}, {false, false}, {true, false}}},
		{"timer", 5 * time.Millisecond, []step{{false, true}, {false, false}, {false, false}, {false, false}, {false, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h ackHold
			for i, w := range tc.want {
				if flush, queue := h.after(tc.delay); flush != w.flush || queue != w.queue {
					t.Fatalf("batch %d: flush %v, queue %v; want %v, %v", i+1, flush, queue, w.flush, w.queue)
				}
			}
			h = ackHold{} // the flushAcks came
			if _, queue := h.after(tc.delay); !queue {
				t.Fatal("after a flushAcks, the next batch queues none")
			}
		})
	}
}

// TestPanicInProcessFailsThatTuple: a Process that panics fails the tuple
// it panicked on (its root replays) and the batch goes on with the next
// one, wherever in the batch the panics fall; every tuple is done after.
func TestPanicInProcessFailsThatTuple(t *testing.T) {
	cases := []struct {
		name   string
		panics []string // the values Process panics on
	}{
		{"none", nil},
		{"first", []string{"0"}},
		{"last", []string{"3"}},
		{"two in a row", []string{"1", "2"}},
		{"all", []string{"0", "1", "2", "3"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWiring(t, 1) // batches of 4
			spout := w.collector(0)
			for i := range 4 {
				if _, err := spout.emitRoot(uint64(100+i), uint64(i), 0, strconv.Itoa(i)); err != nil {
					t.Fatal(err)
				}
			}
			spout.flush()
			var acked []string
			user := procFunc(func(tu *Tuple, c *Collector) {
				if slices.Contains(tc.panics, tu.Values()[0]) {
					panic("broke on " + tu.Values()[0])
				}
				acked = append(acked, tu.Values()[0])
				c.Ack(tu)
			})
			p := &processorTask{env: w.env, task: 1, info: w.env.topo.taskInfo(1), user: user}
			p.col = w.collector(1)
			ts, err := decode(w.tuples[1][0], nil, nil)
			if err != nil || len(ts) != 4 {
				t.Fatalf("decoded %d tuples, %v", len(ts), err)
			}
			for i := 0; i < len(ts); {
				i = p.process(ts, i)
			}
			p.col.flush()
			var want []string
			for i := range 4 {
				if v := strconv.Itoa(i); !slices.Contains(tc.panics, v) {
					want = append(want, v)
				}
			}
			var failed int
			for _, f := range w.fails {
				failed += len(f.SpringIds)
			}
			if !slices.Equal(acked, want) || failed != len(tc.panics) || !allDone(ts) {
				t.Errorf("acked %v (want %v), %d roots failed (want %d), all done %v", acked, want, failed, len(tc.panics), allDone(ts))
			}
		})
	}
}
