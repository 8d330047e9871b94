package actors

import (
	"fmt"
	"runtime/debug"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/scheduler"

	"github.com/acktor/acktor/cluster/grain"
	"github.com/acktor/acktor/messages"
	"github.com/acktor/acktor/tracker"
	"github.com/acktor/acktor/tracker/ledger"
)

// maxClients bounds the remote clients an acker remembers at once. It
// forgets a client Generations rotations after the client last opened or
// handed over a record here: by then every record of it has settled or
// timed out. Past the bound a new client is refused (counted): its roots
// time out at the client, which replays them.
const maxClients = 1 << 16

// client is where a remote client hears back, and the rotation at which it
// last opened or restarted the timeout of a record here.
type client struct {
	pid  *actor.PID
	seen uint64
}

// rotate is the acker's timer message.
type rotate struct{}

// flushOut is the message an acker sends itself to tell the spouts what the
// messages queued before it settled, in one message per spout task.
type flushOut struct{}

// ackerTask holds a ledger and translates messages into calls on it. What
// the calls report is batched per spout task and sent once the messages
// queued are handled (flushLater).
type ackerTask struct {
	env    *env
	id     string
	num    int                // n of acker/n
	dir    *tracker.Directory // the acker set it last acted on
	l      *ledger.Ledger
	res    resolver
	root   *actor.RootContext
	cancel scheduler.CancelFunc

	completed outbox
	failed    outbox
	expired   outbox
	onExpire  func(springID uint64, task uint32)
	onDone    func(springID uint64, task uint32)
	bad       uint64 // malformed messages (or handed-over records) and undeliverable notifications dropped
	refused   uint64 // remote clients refused: the table was full, or their task id was another client's
	quiet     bool   // a refusal was logged since the last rotation
	forwarded uint64 // entries passed on to their root's new acker
	moved     []ledger.Record
	clients   map[uint32]client // remote clients by task id
	rotations uint64            // rotations so far, the clock of clients' seen
	fwd       *forwarder        // set once the acker moved to another member
	self      *actor.PID
	flushing  bool // a flushOut is queued
}

func (a *ackerTask) Receive(ctx actor.Context) {
	defer func() { // the ledger does not panic; if it ever does, keep serving
		if r := recover(); r != nil {
			a.env.log.Errorf("%s: panic: %v\n%s", a.id, r, debug.Stack())
		}
	}()
	if a.fwd.pass(ctx) {
		return
	}
	switch m := ctx.Message().(type) { // a newer acker set, announced or the sender's
	case *messages.AckerSet:
		a.env.learn(m)
	case *messages.Track:
		a.env.learnFrom(m.Version, m.Routing)
	case *messages.AckBatch:
		a.env.learnFrom(m.Version, m.Routing)
	case *messages.FailRoot:
		a.env.learnFrom(m.Version, m.Routing)
	case *messages.Handover:
		a.env.learnFrom(m.Version, m.Routing)
	}
	if a.l != nil {
		if d := a.env.dir.Load(); d != a.dir {
			a.rebalance(d)
		}
	}
	switch m := ctx.Message().(type) {
	case *cluster.ClusterInit:
		a.init(ctx, m)
	case *messages.AckerSet: // the check above acted on it
	case *grain.Moved:
		a.move(ctx, m)
		return
	case *messages.Handover:
		a.adopt(m)
	case *actor.Terminated:
		a.res.forget(m.Who)
	case *messages.Track:
		a.track(m)
	case *messages.AckBatch:
		a.ack(m)
	case *messages.FailRoot:
		a.fail(m)
	case *rotate:
		if a.l != nil {
			a.rotate()
		}
	case *flushOut:
		a.flushing = false
		a.flush()
		return
	case *messages.AckerStatsRequest:
		ctx.Respond(a.stats())
		return
	case *actor.Stopping:
		if a.cancel != nil {
			a.cancel()
		}
		// A queued flushOut dies with the actor: a move flushed first, and
		// after a plain stop (shutdown) those roots replay at their deadline.
		return
	default:
		return
	}
	a.flushLater()
}

// flushLater queues a flushOut behind the messages already waiting, so that
// what they settle goes out together: under load a spout task hears once
// per burst of acks, not once per ack batch, with no timer and no delay
// when the acker is idle.
func (a *ackerTask) flushLater() {
	if a.flushing || a.completed.empty() && a.failed.empty() && a.expired.empty() {
		return
	}
	a.flushing = true
	a.root.Send(a.self, &flushOut{})
}

func (a *ackerTask) init(ctx actor.Context, m *cluster.ClusterInit) {
	e := a.env
	a.id = m.Identity.Identity
	n, ok := tracker.AckerNumber(a.id)
	if !ok {
		e.log.Errorf("acker: activated as %q, which is no acker identity", a.id)
		return
	}
	a.num, a.dir = n, e.dir.Load()
	expect := a.expect(a.dir)
	a.l = ledger.New(ledger.Config{Generations: e.cfg.Generations, ExpectedInFlight: roomy(expect),
		MaxInFlight: maxInFlight(expect)})
	a.res = newResolver(ctx, a.env, m.Cluster)
	a.root = ctx.ActorSystem().Root
	a.self = ctx.Self()
	tasks := e.topo.Tasks()
	a.completed, a.failed, a.expired = newOutbox(tasks), newOutbox(tasks), newOutbox(tasks)
	a.onExpire = func(id uint64, task uint32) { a.expired.add(task, id) }
	a.onDone = func(id uint64, task uint32) { a.completed.add(task, id) }
	every := e.cfg.rotateEvery()
	a.cancel = scheduler.NewTimerScheduler(a.root).SendRepeatedly(every, every, ctx.Self(), &rotate{})
}

// rotate ages the records by one generation, tells the spouts and clients
// what timed out, and forgets the clients none of whose records can be left:
// a record lives Generations rotations from its init or adoption, and both
// mark its client seen.
func (a *ackerTask) rotate() {
	a.l.Rotate(a.onExpire)
	a.rotations++
	a.flush() // what is queued for a client goes out before it is forgotten
	gens := uint64(a.env.cfg.Generations)
	for task, c := range a.clients {
		if a.rotations-c.seen >= gens {
			delete(a.clients, task)
		}
	}
	a.quiet = false
}

// move hands every record to the acker's activation on its new member,
// then passes on what still reaches it here.
func (a *ackerTask) move(ctx actor.Context, m *grain.Moved) {
	if a.l == nil {
		if m.Done != nil {
			m.Done()
		}
		return
	}
	f := moveTo(ctx, m, a.id, a.env.log)
	if f == nil {
		return
	}
	a.flush()
	if a.cancel != nil {
		a.cancel()
	}
	h := &messages.Handover{Version: a.dir.Version, Routing: a.dir.Routing}
	for _, r := range a.l.Extract(func(uint64) bool { return true }, nil) {
		a.addHandover(h, r)
	}
	if len(h.SpringIds) > 0 {
		a.root.Send(f.to, h)
	}
	a.fwd = f
	a.env.log.Debugf("%s: moved to %s with %d records", a.id, f.to.Address, len(h.SpringIds))
	if m.Done != nil {
		m.Done()
	}
}

// expect is this acker's share of the roots the spouts may keep in flight
// (capped: beyond it the table grows once, by half).
func (a *ackerTask) expect(d *tracker.Directory) int {
	spoutTasks := 0
	for _, c := range a.env.topo.Components {
		if c.Spout {
			spoutTasks += c.Parallel
		}
	}
	share := a.env.cfg.MaxPending * spoutTasks / max(d.Ackers, 1)
	return min(share+share/10, 1<<20) // the ring's shares differ by a few %
}

// roomy is what an acker sizes its ledger for: twice its share of the
// roots in flight, up to 128 Ki records (2.5 MB), since a Robin Hood table
// near its 7/8 bound probes far (a root's init, three acks and completion
// take ~3× longer at 80 % load than at 40 %: BenchmarkLedgerLoad); a larger
// share gets its own size, and the ledger's ~23 bytes a record.
func roomy(expect int) int { return max(expect, min(2*expect, 1<<17)) }

// maxInFlight leaves room for orphans (late acks) beyond what the spouts
// may keep in flight; past it, inits are rejected and their roots replay at
// the spout's deadline, and stray acks are dropped and counted.
func maxInFlight(expect int) int { return 4*expect + 4096 }

// rebalance acts on a new acker set: the records this acker no longer owns
// go to their new ackers, which fold them into what reached them first.
func (a *ackerTask) rebalance(d *tracker.Directory) {
	a.dir = d
	a.l.SetMaxInFlight(maxInFlight(a.expect(d)))
	a.moved = a.l.Extract(func(id uint64) bool { return d.AckerOf(id) != a.num }, a.moved[:0])
	out := map[int]*messages.Handover{}
	for _, r := range a.moved {
		a.handover(out, r)
	}
	a.sendHandovers(out)
	if len(a.moved) > 0 {
		a.env.log.Debugf("%s: handed %d records over for acker set %d", a.id, len(a.moved), d.Version)
	}
}

func (a *ackerTask) handover(out map[int]*messages.Handover, r ledger.Record) {
	o := a.dir.AckerOf(r.SpringID)
	h := out[o]
	if h == nil {
		h = &messages.Handover{Version: a.dir.Version, Routing: a.dir.Routing}
		out[o] = h
	}
	a.addHandover(h, r)
}

// addHandover appends a record (and its client's address) to h.
func (a *ackerTask) addHandover(h *messages.Handover, r ledger.Record) {
	flags := uint32(0)
	if r.Init {
		flags |= 1
	}
	if r.Failed {
		flags |= 2
	}
	if c, ok := a.clients[r.Task]; ok && r.Init && r.Task >= tracker.ClientTasks {
		if h.Clients == nil {
			h.Clients = map[uint32]*messages.Pid{}
		}
		h.Clients[r.Task] = &messages.Pid{Address: c.pid.Address, Id: c.pid.Id}
	}
	h.SpringIds = append(h.SpringIds, r.SpringID)
	h.CheckValues = append(h.CheckValues, r.CheckValue)
	h.Tasks = append(h.Tasks, r.Task)
	h.Flags = append(h.Flags, flags)
}

func (a *ackerTask) sendHandovers(out map[int]*messages.Handover) {
	for o, h := range out {
		a.toAcker(o, h)
	}
}

// adopt takes over handed-over records; one this acker does not own either
// (the set changed again) goes on to its owner. A record whose init names
// neither a spout task nor a remote client whose address the Handover
// carries or this acker knows is dropped and counted: there would be no one
// to tell. The rest of the Handover is adopted all the same.
func (a *ackerTask) adopt(m *messages.Handover) {
	n := len(m.SpringIds)
	if a.l == nil || len(m.CheckValues) != n || len(m.Tasks) != n || len(m.Flags) != n {
		a.drop(fmt.Sprintf("handover with %d springIds, %d check values, %d tasks, %d flags", n, len(m.CheckValues), len(m.Tasks), len(m.Flags)))
		return
	}
	var out map[int]*messages.Handover
	var clients map[uint32]bool // whether each client task named is served here
	bad, badTask := 0, uint32(0)
	trusted := a.routedBy(m.Version, m.Routing)
	for i, id := range m.SpringIds {
		r := ledger.Record{SpringID: id, CheckValue: m.CheckValues[i], Task: m.Tasks[i], Init: m.Flags[i]&1 != 0, Failed: m.Flags[i]&2 != 0}
		if r.Init && !a.spoutTask(r.Task) {
			ok, seen := clients[r.Task]
			if !seen {
				ok = a.handedClient(r.Task, m.Clients)
				if clients == nil {
					clients = map[uint32]bool{}
				}
				clients[r.Task] = ok
			}
			if !ok {
				bad, badTask = bad+1, r.Task
				continue
			}
		}
		if !trusted && a.dir.AckerOf(id) != a.num {
			if out == nil {
				out = map[int]*messages.Handover{}
			}
			a.handover(out, r)
			a.forwarded++
			continue
		}
		switch o := a.l.Adopt(r); {
		case o.Status == ledger.Rejected:
			a.env.log.Warnf("%s: rejected a handed-over record for springId %x (task %d too large)", a.id, id, r.Task)
		case o.Status == ledger.Pending && o.Task >= tracker.ClientTasks:
			a.seen(o.Task) // its timeout started over: keep its client as long
		default:
			a.outcome(id, o)
		}
	}
	if bad > 0 {
		a.bad += uint64(bad - 1)
		a.drop(fmt.Sprintf("%d handed-over records whose task is no spout task nor a client with an address (task %d, ...)", bad, badTask))
	}
	a.sendHandovers(out)
}

// spoutTask says whether task is a spout task of the topology.
func (a *ackerTask) spoutTask(task uint32) bool {
	return int(task) < a.env.topo.Tasks() && a.env.topo.tasks[task].Spout
}

// handedClient says whether a handed-over record's init for remote client
// task can be served: the Handover carries its address (remembered) or this
// acker knows it. The client is marked seen.
func (a *ackerTask) handedClient(task uint32, carried map[uint32]*messages.Pid) bool {
	if task < tracker.ClientTasks || task > ledger.MaxTask {
		return false
	}
	if p := pidOf(carried[task]); p != nil {
		return a.client(task, p)
	}
	return a.seen(task)
}

// A message an acker passes on carries the version of the acker set by
// which the receiver owns every entry; a receiver that has not learnt that
// set yet (it lives on another member) takes them all as its own, and hands
// over what it does not own once it learns the set.

// fwd gathers, per acker, the entries of one message that belong to roots
// this acker does not own, in a message of the same kind.
type fwd[M any] struct {
	by   map[int]M
	make func() M
}

func (f *fwd[M]) to(o int) M {
	if f.by == nil {
		f.by = map[int]M{}
	}
	m, ok := f.by[o]
	if !ok {
		m = f.make()
		f.by[o] = m
	}
	return m
}

func (a *ackerTask) track(m *messages.Track) {
	if a.l == nil {
		return
	}
	if len(m.SpringIds) != len(m.InitXors) || !a.trackerOK(m) {
		a.drop(fmt.Sprintf("track from task %d with %d springIds and %d inits", m.Task, len(m.SpringIds), len(m.InitXors)))
		return
	}
	if m.Notify != nil && !a.client(m.Task, pidOf(m.Notify)) {
		return // refused and counted: the client replays these roots at its deadline
	}
	f := fwd[*messages.Track]{make: func() *messages.Track {
		return &messages.Track{Task: m.Task, Version: a.dir.Version, Routing: a.dir.Routing, Notify: m.Notify}
	}}
	trusted := a.routedBy(m.Version, m.Routing)
	for i, id := range m.SpringIds {
		if o := a.owner(id, trusted); o != a.num {
			t := f.to(o)
			t.SpringIds, t.InitXors = append(t.SpringIds, id), append(t.InitXors, m.InitXors[i])
			a.forwarded++
			continue
		}
		a.outcome(id, a.l.Init(id, m.Task, m.InitXors[i]))
	}
	for o, t := range f.by {
		a.toAcker(o, t)
	}
	a.env.recycle.doneTrack(m)
}

// owner is the acker that owns id: this one when the message is trusted
// (routedBy), without a look at the ring.
func (a *ackerTask) owner(id uint64, trusted bool) int {
	if trusted {
		return a.num
	}
	return a.dir.AckerOf(id)
}

// routedBy says whether a message is this acker's in every entry without a
// look at the ring: its sender routed them all by an acker set that routes
// as this acker's does (routing; the acker has learnt a newer set from the
// message already), or, from a sender that stamps no routing, passed them
// on under a newer version than the acker knows (the sender knows better).
// Remote clients stamp neither: each entry is checked against the ring,
// which also corrects a sender whose set differs.
func (a *ackerTask) routedBy(version, routing uint64) bool {
	if routing != 0 {
		return routing == a.dir.Routing
	}
	return version > a.dir.Version
}

// trackerOK says whether a Track is well formed for its sender: a spout
// task of the topology, or a remote client that names its actor.
func (a *ackerTask) trackerOK(m *messages.Track) bool {
	if m.Notify == nil {
		return a.spoutTask(m.Task)
	}
	return m.Task >= tracker.ClientTasks && m.Task <= ledger.MaxTask && pidOf(m.Notify) != nil
}

// client remembers where remote client task hears back and marks it seen.
// It refuses (counted) a task another client still uses, whose records
// would otherwise tell the newcomer, and a new client past maxClients.
func (a *ackerTask) client(task uint32, pid *actor.PID) bool {
	if c, ok := a.clients[task]; ok {
		if !c.pid.Equal(pid) {
			a.refuse("%s: client %d at %s refused: the task is client %s's, which has records here", a.id, task, pid, c.pid)
			return false
		}
		a.clients[task] = client{pid: c.pid, seen: a.rotations}
		return true
	}
	if len(a.clients) >= maxClients {
		a.refuse("%s: %d remote clients with records here; refusing client %d", a.id, maxClients, task)
		return false
	}
	if a.clients == nil {
		a.clients = map[uint32]client{}
	}
	a.clients[task] = client{pid: pid, seen: a.rotations}
	return true
}

// seen marks a known client as having a record whose timeout started now,
// and says whether the client is known.
func (a *ackerTask) seen(task uint32) bool {
	c, ok := a.clients[task]
	if ok {
		c.seen = a.rotations
		a.clients[task] = c
	}
	return ok
}

// refuse counts a refused client, and logs the first refusal per rotation.
func (a *ackerTask) refuse(format string, args ...any) {
	a.refused++
	if !a.quiet {
		a.quiet = true
		a.env.log.Errorf(format+" (further refusals until the next rotation are only counted)", args...)
	}
}

func (a *ackerTask) ack(m *messages.AckBatch) {
	if a.l == nil {
		return
	}
	if len(m.SpringIds) != len(m.XorDeltas) {
		a.drop(fmt.Sprintf("ack batch with %d springIds and %d deltas", len(m.SpringIds), len(m.XorDeltas)))
		return
	}
	if a.routedBy(m.Version, m.Routing) { // every entry is this acker's: the ledger's batched loop
		a.l.AckBatch(m.SpringIds, m.XorDeltas, a.onDone)
		a.env.recycle.doneAcks(m)
		return
	}
	f := fwd[*messages.AckBatch]{make: func() *messages.AckBatch { return &messages.AckBatch{Version: a.dir.Version, Routing: a.dir.Routing} }}
	for i, id := range m.SpringIds {
		if o := a.dir.AckerOf(id); o != a.num {
			b := f.to(o)
			b.SpringIds, b.XorDeltas = append(b.SpringIds, id), append(b.XorDeltas, m.XorDeltas[i])
			a.forwarded++
			continue
		}
		a.outcome(id, a.l.Ack(id, m.XorDeltas[i]))
	}
	for o, b := range f.by {
		a.toAcker(o, b)
	}
	a.env.recycle.doneAcks(m)
}

func (a *ackerTask) fail(m *messages.FailRoot) {
	if a.l == nil {
		return
	}
	f := fwd[*messages.FailRoot]{make: func() *messages.FailRoot { return &messages.FailRoot{Version: a.dir.Version, Routing: a.dir.Routing} }}
	trusted := a.routedBy(m.Version, m.Routing)
	for _, id := range m.SpringIds {
		if o := a.owner(id, trusted); o != a.num {
			b := f.to(o)
			b.SpringIds = append(b.SpringIds, id)
			a.forwarded++
			continue
		}
		if task, ok := a.l.Fail(id); ok {
			a.failed.add(task, id)
		}
	}
	for o, b := range f.by {
		a.toAcker(o, b)
	}
}

func (a *ackerTask) toAcker(n int, m any) {
	if p := a.res.get(KindAcker, tracker.AckerIdentity(n)); p != nil {
		a.root.Send(p, m)
		return
	}
	a.env.log.Errorf("%s: no member hosts %s; the roots it was passed replay at their deadline", a.id, tracker.AckerIdentity(n))
}

func (a *ackerTask) outcome(id uint64, o ledger.Outcome) {
	switch o.Status {
	case ledger.Completed:
		a.completed.add(o.Task, id)
	case ledger.Failed:
		a.failed.add(o.Task, id)
	case ledger.Rejected:
		a.env.log.Warnf("%s: rejected an init for springId %x (duplicate, task too large, or the ledger full); the spout replays it at its deadline", a.id, id)
	}
}

// drop logs a malformed message; the roots it concerned time out and replay.
func (a *ackerTask) drop(what string) {
	a.bad++
	a.env.log.Errorf("%s: dropped malformed %s", a.id, what)
}

// flush tells the spout tasks what the last message settled.
func (a *ackerTask) flush() {
	a.completed.drain(func(task uint32, ids []uint64) []uint64 {
		m, spare := a.env.recycle.completedOf(ids)
		m.Version, m.Routing = a.dir.Version, a.dir.Routing
		a.toSpout(task, m)
		return spare
	})
	a.failed.drain(func(task uint32, ids []uint64) []uint64 {
		a.toSpout(task, &messages.Failed{SpringIds: ids, Reason: messages.FailReason_FAIL_REASON_EXPLICIT,
			Version: a.dir.Version, Routing: a.dir.Routing})
		return nil
	})
	a.expired.drain(func(task uint32, ids []uint64) []uint64 {
		a.toSpout(task, &messages.Failed{SpringIds: ids, Reason: messages.FailReason_FAIL_REASON_TIMEOUT,
			Version: a.dir.Version, Routing: a.dir.Routing})
		return nil
	})
}

// outbox gathers springIds per spout task (or remote client) until the
// next flush.
type outbox struct {
	ids     [][]uint64          // by topology task id
	clients map[uint32][]uint64 // by remote client task id
	dirty   []uint32            // tasks with ids
}

func newOutbox(tasks int) outbox { return outbox{ids: make([][]uint64, tasks)} }

func (o *outbox) empty() bool { return len(o.dirty) == 0 }

func (o *outbox) add(task uint32, id uint64) {
	if int(task) < len(o.ids) {
		if len(o.ids[task]) == 0 {
			o.dirty = append(o.dirty, task)
		}
		o.ids[task] = append(o.ids[task], id)
		return
	}
	if o.clients == nil {
		o.clients = map[uint32][]uint64{}
	}
	if len(o.clients[task]) == 0 {
		o.dirty = append(o.dirty, task)
	}
	o.clients[task] = append(o.clients[task], id)
}

// drain hands each task's ids to send, which keeps them and may return an
// empty array for the task's next ids. A task's ids leave the outbox before
// send sees them: a send that panics loses its own ids (their roots replay
// at their deadline), and the tasks after it stay queued for the next drain.
func (o *outbox) drain(send func(task uint32, ids []uint64) (spare []uint64)) {
	i, n := 0, len(o.dirty)
	defer func() { o.dirty = append(o.dirty[:0], o.dirty[i:n]...) }()
	for i < n {
		t := o.dirty[i]
		i++
		if int(t) < len(o.ids) {
			ids := o.ids[t]
			o.ids[t] = nil
			o.ids[t] = send(t, ids)[:0]
		} else {
			ids := o.clients[t]
			delete(o.clients, t)
			send(t, ids)
		}
	}
}

func (a *ackerTask) toSpout(task uint32, m any) {
	if task >= tracker.ClientTasks {
		if c, ok := a.clients[task]; ok {
			a.root.Send(c.pid, m)
		} else {
			a.bad++
			a.env.log.Errorf("%s: no address for remote client %d; it will time its roots out", a.id, task)
		}
		return
	}
	if !a.spoutTask(task) {
		a.bad++
		a.env.log.Errorf("%s: dropped a notification for task %d, which is no spout task", a.id, task)
		return
	}
	if p := a.res.get(KindSpout, a.env.topo.identity(task)); p != nil {
		a.root.Send(p, m)
		return
	}
	a.env.log.Errorf("%s: no member hosts spout task %s; its roots replay at their deadline", a.id, a.env.topo.identity(task))
}

func (a *ackerTask) stats() *messages.AckerStats {
	if a.l == nil {
		return &messages.AckerStats{Id: a.id, BadMessages: a.bad}
	}
	s := a.l.Stats()
	return &messages.AckerStats{Id: a.id, Tracked: s.Inits, InFlight: uint64(a.l.Len()), PeakInFlight: uint64(s.PeakInFlight),
		Completed: s.Completed, Failed: s.Failed, Expired: s.Expired, Orphaned: s.Orphaned, Rejected: s.Rejected,
		Acks: s.Acks, Bytes: uint64(a.l.Bytes()), Dropped: s.Dropped,
		HandedOver: s.HandedOver, Adopted: s.Adopted, Forwarded: a.forwarded,
		BadMessages: a.bad, ClientsRefused: a.refused}
}
