package actors

import (
	"fmt"
	"math/rand/v2"

	"github.com/acktor/acktor/messages"
)

// Tuple is one tuple as a processor sees it. Values and the anchors are
// shared with the batch it arrived in: read them, do not modify them. A
// processor may keep a tuple and ack it later.
type Tuple struct {
	Values []string
	From   uint32 // the task that emitted it

	springs []uint64 // roots it is anchored to
	ids     []uint64 // per root: XOR of the edge ids that reached it
	outXor  uint64   // XOR of the edge ids of the tuples emitted anchored to it
	done    bool
}

// Roots returns the springIds of the roots the tuple is anchored to (nil when
// tracking is off). Do not modify the slice.
func (t *Tuple) Roots() []uint64 { return t.springs }

// Collector is how user code emits, acks and fails. It batches tuples per
// target task and ack deltas per acker, folding the deltas of a root that
// follow each other (the words of one line arrive together) into one entry;
// the task flushes it after each input batch, and it flushes itself when a
// batch is full.
type Collector struct {
	env  *env
	task uint32
	outs []output
	send func(target uint32, m *messages.TupleBatch)

	rng     *rand.Rand
	rr      []int                  // shuffle position per output
	batches []*messages.TupleBatch // per target task, nil when empty
	sizes   []int                  // per target task, the size of the last batch sent
	dirty   []uint32               // targets with a batch to send
	acks    []*messages.AckBatch   // per acker, under way
	fails   []uint64
	ackOut  func(acker int, m *messages.AckBatch)
	failOut func(acker int, m *messages.FailRoot)

	emitted, acked, failed uint64
}

func newCollector(e *env, task uint32, send func(uint32, *messages.TupleBatch),
	ackOut func(int, *messages.AckBatch), failOut func(int, *messages.FailRoot)) *Collector {
	c := e.topo.tasks[task]
	return &Collector{
		env: e, task: task, outs: c.outputs, send: send, ackOut: ackOut, failOut: failOut,
		rng:     rand.New(rand.NewPCG(e.cfg.Seed, uint64(task)+1)),
		rr:      make([]int, len(c.outputs)),
		batches: make([]*messages.TupleBatch, e.topo.Tasks()),
		sizes:   make([]int, e.topo.Tasks()),
		acks:    make([]*messages.AckBatch, e.cfg.Ackers),
	}
}

// edge draws a non-zero tuple id.
func (c *Collector) edge() uint64 {
	for {
		if e := c.rng.Uint64(); e != 0 {
			return e
		}
	}
}

// Emit sends a new tuple to every component subscribed to this one, anchored
// to anchors (none: the tuple is not tracked, like Storm's unanchored emit).
// It fails when an anchor was already acked or failed, or when a fields
// grouping names a value the tuple lacks; nothing is emitted then.
func (c *Collector) Emit(anchors []*Tuple, values ...string) error {
	for _, a := range anchors {
		if a.done {
			return fmt.Errorf("emit anchored to a tuple from task %d that was already acked or failed", a.From)
		}
	}
	if err := c.checkFields(values); err != nil {
		return err
	}
	for i, o := range c.outs {
		target := c.route(i, o, values)
		b := c.batch(target)
		n := 0
		if c.env.tracking() {
			first := len(b.SpringIds)
			for _, a := range anchors {
				if len(a.springs) == 0 {
					continue
				}
				e := c.edge()
				a.outXor ^= e
				for _, r := range a.springs {
					n += foldAnchor(b, first, r, e)
				}
			}
		}
		c.append(target, b, n, values)
	}
	return nil
}

// foldAnchor XORs edge e into root r's entry of the tuple being built, whose
// anchors start at index first; it returns 1 if it added an entry.
func foldAnchor(b *messages.TupleBatch, first int, r, e uint64) int {
	for j := first; j < len(b.SpringIds); j++ {
		if b.SpringIds[j] == r {
			b.TupleIds[j] ^= e
			return 0
		}
	}
	b.SpringIds = append(b.SpringIds, r)
	b.TupleIds = append(b.TupleIds, e)
	return 1
}

// emitRoot sends a spout's root tuple to every subscriber and returns the
// XOR of the edge ids it drew: the init of the root's record.
func (c *Collector) emitRoot(springID uint64, values ...string) (uint64, error) {
	if err := c.checkFields(values); err != nil {
		return 0, err
	}
	initXor := uint64(0)
	for i, o := range c.outs {
		target := c.route(i, o, values)
		b := c.batch(target)
		n := 0
		if c.env.tracking() {
			e := c.edge()
			initXor ^= e
			b.SpringIds = append(b.SpringIds, springID)
			b.TupleIds = append(b.TupleIds, e)
			n = 1
		}
		c.append(target, b, n, values)
	}
	return initXor, nil
}

func (c *Collector) checkFields(values []string) error {
	for _, o := range c.outs {
		if o.kind == Fields && o.field >= len(values) {
			return fmt.Errorf("emit to %s: fields grouping on value %d, tuple has %d values", o.to.Name, o.field, len(values))
		}
	}
	return nil
}

// route picks the target task of output i.
func (c *Collector) route(i int, o output, values []string) uint32 {
	if o.kind == Fields {
		return o.to.FirstTask + fnv32(values[o.field])%uint32(o.to.Parallel)
	}
	c.rr[i]++
	return o.to.FirstTask + uint32(c.rr[i]%o.to.Parallel)
}

func fnv32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

func (c *Collector) batch(target uint32) *messages.TupleBatch {
	b := c.batches[target]
	if b == nil {
		// Size the arrays like the last batch to this target: a batch sent
		// after a few tuples must not cost a full batch of memory.
		n := min(c.env.cfg.BatchSize, max(8, c.sizes[target]))
		b = &messages.TupleBatch{
			FromTask:     c.task,
			AnchorCounts: make([]uint32, 0, n),
			ValueCounts:  make([]uint32, 0, n),
			Values:       make([]string, 0, n),
		}
		if c.env.tracking() {
			b.SpringIds = make([]uint64, 0, n)
			b.TupleIds = make([]uint64, 0, n)
		}
		c.batches[target] = b
		c.dirty = append(c.dirty, target)
	}
	return b
}

func (c *Collector) append(target uint32, b *messages.TupleBatch, anchors int, values []string) {
	b.AnchorCounts = append(b.AnchorCounts, uint32(anchors))
	b.ValueCounts = append(b.ValueCounts, uint32(len(values)))
	b.Values = append(b.Values, values...)
	c.emitted++
	if len(b.AnchorCounts) >= c.env.cfg.BatchSize {
		c.sendBatch(target, b)
	}
}

func (c *Collector) sendBatch(target uint32, b *messages.TupleBatch) {
	c.batches[target] = nil
	c.sizes[target] = len(b.AnchorCounts)
	c.send(target, b)
}

// Ack marks t processed. Its delta, its id XOR the ids of the tuples emitted
// anchored to it, is folded into each of its roots. Acking twice is ignored.
func (c *Collector) Ack(t *Tuple) {
	if t.done {
		return
	}
	t.done = true
	c.acked++
	for i, r := range t.springs {
		c.fold(r, t.ids[i]^t.outXor)
	}
}

// fold adds a delta for root r to its acker's batch, into the last entry
// when that is r's too.
func (c *Collector) fold(r, d uint64) {
	a := int(r % uint64(len(c.acks)))
	b := c.acks[a]
	if b == nil {
		b = &messages.AckBatch{SpringIds: make([]uint64, 0, 64), XorDeltas: make([]uint64, 0, 64)}
		c.acks[a] = b
	}
	if n := len(b.SpringIds); n > 0 && b.SpringIds[n-1] == r {
		b.XorDeltas[n-1] ^= d
		return
	}
	b.SpringIds = append(b.SpringIds, r)
	b.XorDeltas = append(b.XorDeltas, d)
	if len(b.SpringIds) >= c.env.cfg.BatchSize {
		c.acks[a] = nil
		c.ackOut(a, b)
	}
}

// Fail fails t's roots at once: their spouts replay them.
func (c *Collector) Fail(t *Tuple) {
	if t.done {
		return
	}
	t.done = true
	c.failed++
	c.fails = append(c.fails, t.springs...)
	if len(c.fails) >= c.env.cfg.BatchSize {
		c.flushFails()
	}
}

// flush sends every batch under way.
func (c *Collector) flush() {
	for _, target := range c.dirty {
		if b := c.batches[target]; b != nil {
			c.sendBatch(target, b)
		}
	}
	c.dirty = c.dirty[:0]
	c.flushAcks()
	c.flushFails()
}

func (c *Collector) flushAcks() {
	for a, b := range c.acks {
		if b != nil {
			c.acks[a] = nil
			c.ackOut(a, b)
		}
	}
}

func (c *Collector) flushFails() {
	if len(c.fails) == 0 {
		return
	}
	n := c.env.cfg.Ackers
	out := make([]*messages.FailRoot, n)
	for _, r := range c.fails {
		a := int(r % uint64(n))
		if out[a] == nil {
			out[a] = &messages.FailRoot{}
		}
		out[a].SpringIds = append(out[a].SpringIds, r)
	}
	c.fails = c.fails[:0]
	for a, m := range out {
		if m != nil {
			c.failOut(a, m)
		}
	}
}

// decode turns a batch into tuples that share its arrays.
func decode(b *messages.TupleBatch) ([]Tuple, error) {
	ts := make([]Tuple, len(b.AnchorCounts))
	if len(b.ValueCounts) != len(ts) || len(b.SpringIds) != len(b.TupleIds) {
		return nil, fmt.Errorf("tuple batch from task %d: %d tuples, %d value counts, %d springIds, %d tupleIds",
			b.FromTask, len(ts), len(b.ValueCounts), len(b.SpringIds), len(b.TupleIds))
	}
	a, v := 0, 0
	for i := range ts {
		na, nv := int(b.AnchorCounts[i]), int(b.ValueCounts[i])
		if a+na > len(b.SpringIds) || v+nv > len(b.Values) {
			return nil, fmt.Errorf("tuple batch from task %d: tuple %d runs past the batch", b.FromTask, i)
		}
		ts[i] = Tuple{
			Values:  b.Values[v : v+nv : v+nv],
			From:    b.FromTask,
			springs: b.SpringIds[a : a+na : a+na],
			ids:     b.TupleIds[a : a+na : a+na],
		}
		a, v = a+na, v+nv
	}
	if a != len(b.SpringIds) || v != len(b.Values) {
		return nil, fmt.Errorf("tuple batch from task %d: %d anchors and %d values left over", b.FromTask, len(b.SpringIds)-a, len(b.Values)-v)
	}
	return ts, nil
}
