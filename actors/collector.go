package actors

import (
	"fmt"
	"math/rand/v2"

	"github.com/acktor/acktor/internal/mix"
	"github.com/acktor/acktor/messages"
	"github.com/acktor/acktor/tracker"
)

// Tuple is one tuple as a processor sees it. It points into the batch it
// arrived in (48 bytes a tuple, whatever its values): read its values, do
// not modify them. A processor may keep a tuple and ack it later.
type Tuple struct {
	batch  *messages.TupleBatch
	v0, nv uint32 // its values: batch.Values[v0 : v0+nv]
	a0, na uint32 // its anchors: batch.SpringIds and batch.TupleIds[a0 : a0+na]
	outXor uint64 // XOR of the edge ids of the tuples emitted anchored to it
	i      uint32 // its index in the batch: its lineage
	emits  uint32 // tuples emitted anchored to it: the next child's content id
	done   bool
}

// Values returns the tuple's values.
func (t *Tuple) Values() []string {
	return t.batch.Values[t.v0 : t.v0+t.nv : t.v0+t.nv]
}

// From is the task that emitted the tuple.
func (t *Tuple) From() uint32 { return t.batch.FromTask }

// Roots returns the springIds of the roots the tuple is anchored to (none
// when tracking is off). Do not modify the slice.
func (t *Tuple) Roots() []uint64 {
	return t.batch.SpringIds[t.a0 : t.a0+t.na : t.a0+t.na]
}

// ContentID is the tuple's content id: the same on every replay of its
// root, as long as the processors upstream emit the same tuples in the same
// order for the same input. Windowed counters drop an update whose content
// id they already applied (exactly-once). 0 means none (an unanchored tuple).
func (t *Tuple) ContentID() uint64 {
	if int(t.i) < len(t.batch.ContentIds) {
		return t.batch.ContentIds[t.i]
	}
	return 0
}

// Time is the time of the tuple's root in unix nanoseconds: the source's
// event time, or when the spout first read it; replays keep it. A tuple
// anchored to several roots has the latest of their times.
func (t *Tuple) Time() int64 {
	if int(t.i) < len(t.batch.Times) {
		return t.batch.Times[t.i]
	}
	return 0
}

// childLineage is the content id and time of a tuple emitted anchored to
// anchors: the content id derives from each anchor's and from how many
// tuples were emitted anchored to it before.
func childLineage(anchors []*Tuple) (cid uint64, time int64) {
	for _, a := range anchors {
		a.emits++
		cid ^= mix.Splitmix64(a.ContentID() + uint64(a.emits)*mix.Golden)
		time = max(time, a.Time())
	}
	return cid, time
}

// rootContentID is the content id of a root with id in scope (a spout
// task, or a spout component whose source has GlobalIDs): stable across
// replays, distinct across scopes and roots (up to 64-bit hash collisions).
func rootContentID(scope uint32, id uint64) uint64 {
	if cid := mix.Splitmix64(mix.Splitmix64(uint64(scope)+1) ^ id); cid != 0 {
		return cid
	}
	return 1
}

// ids returns, per root, the XOR of the edge ids that reached the tuple.
func (t *Tuple) ids() []uint64 {
	return t.batch.TupleIds[t.a0 : t.a0+t.na : t.a0+t.na]
}

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

	rng      *rand.PCG              // edge ids; the concrete source, called without an interface
	rr       []int                  // shuffle position per output
	batches  []*messages.TupleBatch // per target task, nil when empty
	sizes    []int                  // per target task, the size of the last batch sent
	dirty    []uint32               // targets with a batch to send
	acks     []*messages.AckBatch   // per acker, under way
	ackSize  []int                  // per acker, the size of the last batch sent
	lastAck  *messages.AckBatch     // the batch whose last entry is lastRoot's
	lastRoot uint64
	fails    []uint64
	ackOut   func(acker int, m *messages.AckBatch)
	failOut  func(acker int, m *messages.FailRoot)
	// rejectOut sends a Rejected to a spout task; nil in a spout's own
	// Collector, which rejects nothing.
	rejectOut func(task uint32, m *messages.Rejected)
	// local says whether a task runs on this member (nil: all do); locals
	// caches, per LocalOrShuffle output, its tasks that do, as of the
	// member's topology epoch localAt.
	local   func(target uint32) bool
	locals  [][]uint32
	localAt uint64

	emitted, acked, failed uint64
}

func newCollector(e *env, task uint32, send func(uint32, *messages.TupleBatch),
	ackOut func(int, *messages.AckBatch), failOut func(int, *messages.FailRoot)) *Collector {
	c := e.topo.tasks[task]
	return &Collector{
		env: e, task: task, outs: c.outputs, send: send, ackOut: ackOut, failOut: failOut,
		rng:     rand.NewPCG(e.cfg.Seed, uint64(task)+1),
		rr:      make([]int, len(c.outputs)),
		batches: make([]*messages.TupleBatch, e.topo.Tasks()),
		sizes:   make([]int, e.topo.Tasks()),
		acks:    make([]*messages.AckBatch, e.cfg.Ackers),
		ackSize: make([]int, e.cfg.Ackers),
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
			return fmt.Errorf("emit anchored to a tuple from task %d that was already acked or failed", a.From())
		}
	}
	if err := c.checkFields(values); err != nil {
		return err
	}
	cid, tm := childLineage(anchors)
	if len(anchors) == 0 {
		tm = c.env.now().UnixNano()
	}
	for i, o := range c.outs {
		target := c.route(i, o, values)
		b := c.batch(target)
		n := 0
		if c.env.tracking() {
			first := len(b.SpringIds)
			for _, a := range anchors {
				if a.na == 0 {
					continue
				}
				e := c.edge()
				a.outXor ^= e
				for _, r := range a.Roots() {
					n += foldAnchor(b, first, r, e)
				}
			}
		}
		c.append(target, b, n, cid, tm, values)
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

// emitRoot sends a spout's root tuple, with its content id and time, to
// every subscriber and returns the XOR of the edge ids it drew: the init of
// the root's record.
func (c *Collector) emitRoot(springID, cid uint64, time int64, values ...string) (uint64, error) {
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
		c.append(target, b, n, cid, time, values)
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
	switch o.kind {
	case Fields:
		return o.to.FirstTask + fnv32(values[o.field])%uint32(o.to.Parallel)
	case LocalOrShuffle:
		if l := c.localTasks(i, o); len(l) > 0 {
			c.rr[i]++
			return l[c.rr[i]%len(l)]
		}
	}
	c.rr[i]++
	return o.to.FirstTask + uint32(c.rr[i]%o.to.Parallel)
}

// localTasks returns output i's tasks on this member, found again after
// every change of the cluster's members (tasks move then). Nil means
// every task is local.
func (c *Collector) localTasks(i int, o output) []uint32 {
	if c.local == nil {
		return nil
	}
	if n := c.env.epoch.Load(); c.locals == nil || n != c.localAt {
		c.locals, c.localAt = make([][]uint32, len(c.outs)), n
	}
	if c.locals[i] == nil {
		l := make([]uint32, 0, o.to.Parallel)
		for t := o.to.FirstTask; t < o.to.FirstTask+uint32(o.to.Parallel); t++ {
			if c.local(t) {
				l = append(l, t)
			}
		}
		c.locals[i] = l
	}
	return c.locals[i]
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
		// Size the arrays like recent batches to this target: a batch sent
		// after a few tuples must not cost a full batch of memory.
		b = c.env.recycle.tupleBatch(c.task, c.capFor(c.sizes[target]), c.env.tracking())
		c.batches[target] = b
		c.dirty = append(c.dirty, target)
	}
	return b
}

func (c *Collector) append(target uint32, b *messages.TupleBatch, anchors int, cid uint64, time int64, values []string) {
	b.AnchorCounts = append(b.AnchorCounts, uint32(anchors))
	b.ContentIds = append(b.ContentIds, cid)
	b.Times = append(b.Times, time)
	b.ValueCounts = append(b.ValueCounts, uint32(len(values)))
	b.Values = append(b.Values, values...)
	c.emitted++
	if len(b.AnchorCounts) >= c.env.cfg.BatchSize {
		c.sendBatch(target, b)
	}
}

func (c *Collector) sendBatch(target uint32, b *messages.TupleBatch) {
	c.batches[target] = nil
	c.sizes[target] = sizeHint(c.sizes[target], len(b.AnchorCounts))
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
	ids := t.ids()
	for i, r := range t.Roots() {
		c.fold(r, ids[i]^t.outXor)
	}
}

// fold adds a delta for root r to its acker's batch, into the last entry
// when that is r's too.
func (c *Collector) fold(r, d uint64) {
	if c.lastAck != nil && r == c.lastRoot { // the usual case: no lookup at all
		c.lastAck.XorDeltas[len(c.lastAck.XorDeltas)-1] ^= d
		return
	}
	dir := c.env.dir.Load()
	a := dir.AckerOf(r)
	if a >= len(c.acks) { // SetAckers added ackers
		c.acks = append(c.acks, make([]*messages.AckBatch, a+1-len(c.acks))...)
		c.ackSize = append(c.ackSize, make([]int, a+1-len(c.ackSize))...)
	}
	b := c.acks[a]
	if b == nil {
		b = c.env.recycle.ackBatch(c.capFor(c.ackSize[a]))
		b.Version, b.Routing = dir.Version, dir.Routing
		c.acks[a] = b
	} else if b.Routing != dir.Routing {
		b.Version, b.Routing = 0, 0 // routed by two acker sets: the acker checks each entry
	}
	if n := len(b.SpringIds); n > 0 && b.SpringIds[n-1] == r {
		b.XorDeltas[n-1] ^= d
		return
	}
	b.SpringIds = append(b.SpringIds, r)
	b.XorDeltas = append(b.XorDeltas, d)
	c.lastAck, c.lastRoot = b, r
	if len(b.SpringIds) >= c.env.cfg.BatchSize {
		c.sendAcks(a, b)
	}
}

func (c *Collector) sendAcks(a int, b *messages.AckBatch) {
	if c.lastAck == b {
		c.lastAck = nil
	}
	c.acks[a] = nil
	c.ackSize[a] = sizeHint(c.ackSize[a], len(b.SpringIds))
	c.ackOut(a, b)
}

// sizeHint is the size to expect of the next batch to a target: the last
// batch's size, but decaying slowly from larger ones, so that a small batch
// sent at the end of an input batch does not make the next full one grow
// its arrays again (regrowth was a quarter of all allocation).
func sizeHint(prev, last int) int {
	return max(last, prev-prev/8)
}

// capFor is the capacity for a new batch given a hint: past half a batch,
// a whole one, since appending would double to it anyway.
func (c *Collector) capFor(hint int) int {
	if n := c.env.cfg.BatchSize; hint*2 > n {
		return n
	}
	return max(8, hint)
}

// Fail fails t's roots at once: their spouts replay them.
func (c *Collector) Fail(t *Tuple) {
	if t.done {
		return
	}
	t.done = true
	c.failed++
	c.fails = append(c.fails, t.Roots()...)
	if len(c.fails) >= c.env.cfg.BatchSize {
		c.flushFails()
	}
}

// Reject fails t's roots for good: their spout tasks dead-letter them at
// once with reason, without replaying them. It is for a record no replay
// can mend (a malformed line, a value out of range), which Fail would
// replay until the spout's max replays before dead-lettering it with no
// reason of the processor's. Roots of remote clients, whose tasks the
// topology does not know, are failed as Fail does, and so is every root
// when tracking is off (a root counts as done once emitted). Should the
// acker's word of the failure reach the spout first (it comes by another
// path), the root replays and is rejected again.
func (c *Collector) Reject(t *Tuple, reason string) {
	if t.done {
		return
	}
	if c.rejectOut != nil {
		comp := c.env.topo.tasks[c.task].Name
		for _, r := range t.Roots() {
			if task := tracker.TaskOf(r); int(task) < c.env.topo.Tasks() && c.env.topo.tasks[task].Spout {
				c.rejectOut(task, &messages.Rejected{SpringIds: []uint64{r}, Reason: reason, Component: comp})
			}
		}
	}
	c.Fail(t) // the ackers forget the records; the spouts ignore the Failed that follows
}

// flush sends every batch under way.
func (c *Collector) flush() {
	c.flushTuples()
	c.flushAcks()
	c.flushFails()
}

// flushTuples sends the tuple batches under way.
func (c *Collector) flushTuples() {
	for _, target := range c.dirty {
		if b := c.batches[target]; b != nil {
			c.sendBatch(target, b)
		}
	}
	c.dirty = c.dirty[:0]
}

// acksPending says whether deltas wait for a flush.
func (c *Collector) acksPending() bool {
	for _, b := range c.acks {
		if b != nil {
			return true
		}
	}
	return false
}

func (c *Collector) flushAcks() {
	for a, b := range c.acks {
		if b != nil {
			c.sendAcks(a, b)
		}
	}
}

func (c *Collector) flushFails() {
	if len(c.fails) == 0 {
		return
	}
	d := c.env.dir.Load()
	out := make([]*messages.FailRoot, d.Ackers)
	for _, r := range c.fails {
		a := d.AckerOf(r)
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

// decode turns a batch into tuples that point into it, in buf's array if
// it has room. A frame is decoded into the arrays of a batch from r, if it
// has one.
func decode(b *messages.TupleBatch, buf []Tuple, r *recycler) ([]Tuple, error) {
	if len(b.Frame) > 0 {
		if err := unframe(b, r.columns()); err != nil {
			return nil, err
		}
	}
	ts := buf[:0]
	if n := len(b.AnchorCounts); cap(ts) >= n {
		ts = ts[:n]
	} else {
		ts = make([]Tuple, n)
	}
	if len(b.ValueCounts) != len(ts) || len(b.SpringIds) != len(b.TupleIds) {
		return nil, fmt.Errorf("tuple batch from task %d: %d tuples, %d value counts, %d springIds, %d tupleIds",
			b.FromTask, len(ts), len(b.ValueCounts), len(b.SpringIds), len(b.TupleIds))
	}
	if lin := len(b.ContentIds); lin != len(b.Times) || (lin != 0 && lin != len(ts)) {
		return nil, fmt.Errorf("tuple batch from task %d: %d tuples, %d content ids, %d times (want all or none)",
			b.FromTask, len(ts), len(b.ContentIds), len(b.Times))
	}
	a, v := uint64(0), uint64(0)
	for i := range ts {
		na, nv := b.AnchorCounts[i], b.ValueCounts[i]
		if a+uint64(na) > uint64(len(b.SpringIds)) || v+uint64(nv) > uint64(len(b.Values)) {
			return nil, fmt.Errorf("tuple batch from task %d: tuple %d runs past the batch", b.FromTask, i)
		}
		ts[i] = Tuple{batch: b, v0: uint32(v), nv: nv, a0: uint32(a), na: na, i: uint32(i)}
		a, v = a+uint64(na), v+uint64(nv)
	}
	if a != uint64(len(b.SpringIds)) || v != uint64(len(b.Values)) {
		return nil, fmt.Errorf("tuple batch from task %d: %d anchors and %d values left over", b.FromTask, uint64(len(b.SpringIds))-a, uint64(len(b.Values))-v)
	}
	return ts, nil
}

// allDone says whether every tuple of ts was acked or failed.
func allDone(ts []Tuple) bool {
	for i := range ts {
		if !ts[i].done {
			return false
		}
	}
	return true
}
