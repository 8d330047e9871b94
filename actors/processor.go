package actors

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/scheduler"
	"google.golang.org/protobuf/proto"

	"github.com/acktor/acktor/cluster/grain"
	"github.com/acktor/acktor/cluster/wire"
	"github.com/acktor/acktor/messages"
	"github.com/acktor/acktor/tracker"
)

// processorTask runs user code over the tuples sent to one task of a
// processor component.
type processorTask struct {
	env  *env
	task uint32
	info TaskInfo
	user Processor
	col  *Collector
	res  resolver
	root *actor.RootContext
	self *actor.PID

	drained    map[uint32]bool
	finished   bool
	hold       ackHold
	st         messages.TaskReport
	lastReport time.Time
	reportDue  bool          // a reportNow is scheduled
	fwd        *forwarder    // set once the task moved to another member
	reporter   *messages.Pid // the run's, as drains name it

	// awaiting: the task was activated to take over a moved counter's
	// state (or claimed it, see claim), which has not all come yet; its
	// input waits in held, so that no update is applied before the
	// exactly-once ids it may repeat and the sketches it must be tested
	// against.
	awaiting bool
	held     []any
	incoming bool   // grain.Incoming came: the state follows
	waits    uint64 // awaits so far: a stateLate ends only the wait it was set for
	in       moveIn // the handover parts taken so far

	// reuse is set when user keeps no tuple past Process (a Reuser, or the
	// runtime's own Counter): its batches, once every tuple is done, and
	// its tuples' array (ts) are then reused.
	reuse bool
	ts    []Tuple

	rep     *replica // a counter task's standby
	decided bool     // whether the task starts from a moved state, its standby's or none
}

func (p *processorTask) Receive(ctx actor.Context) {
	defer p.recoverPanic()
	if p.fwd != nil && p.tookHere(ctx) || p.fwd.pass(ctx) {
		return
	}
	switch ctx.Message().(type) {
	case *messages.TupleBatch, *messages.Drain, *messages.CounterQuery:
		if !p.decided && p.col != nil { // not moved here (Incoming comes first): restarted, new, or moving here
			p.decided = true
			if !p.claim() { // nothing to ask: a cluster of one, or no counter
				p.takeOver()
			}
		}
	}
	if p.awaiting {
		switch ctx.Message().(type) {
		case *messages.TupleBatch, *messages.Drain:
			p.held = append(p.held, ctx.Message())
			return
		}
	}
	switch m := ctx.Message().(type) {
	case *cluster.ClusterInit:
		p.init(ctx, m)
	case *grain.Incoming:
		p.decided, p.incoming = true, true // its state comes from its earlier activation
		p.await()
	case *claimed:
		p.claimedBy(m)
	case *stateLate:
		if p.awaiting && m.wait == p.waits {
			p.env.log.Warnf("counter %s/%d: the moved task's state did not all come in %v; going on without the rest", p.info.Component, p.info.Index, MoveGrace)
			p.release()
		}
	case *actor.Terminated:
		p.res.forget(m.Who)
	case *messages.AckerSet:
		p.env.learn(m)
	case *messages.TupleBatch:
		p.batch(m)
	case *messages.Drain:
		p.drain(m)
	case *messages.CounterQuery:
		ctx.Respond(p.query(m))
	case *grain.Moved:
		p.move(ctx, m)
	case *messages.ProcessorState:
		if p.in.take(m.Move, m.Part) {
			p.adopt(m)
		}
		if ctx.Sender() != nil {
			ctx.Respond(&messages.ProcessorState{})
		}
	case *messages.CounterState:
		p.takeWindow(ctx, m)
	case *messages.StandbyApplied:
		p.applied(m)
	case *actor.DeadLetterResponse: // only batches to the standby name the task their sender
		p.standbyLost()
	case *standbyFound:
		p.found(m)
	case *standbyRetry:
		p.retryStandby()
	case *flushAcks:
		p.hold = ackHold{}
		if p.col != nil {
			p.col.flushAcks()
		}
	case *reportNow:
		p.reportDue = false
		p.lastReport = p.env.now()
		p.report(p.env.reporter.Load())
	}
}

// reportNow is the processor's timer message: report what the last
// batches did, which a report too soon after the one before left out.
type reportNow struct{}

// reportSoon reports at most once every ReportEvery; a report due sooner
// goes out when the interval is over, so that the run's progress catches
// up once the input goes idle.
func (p *processorTask) reportSoon() {
	now := p.env.now()
	wait := p.env.cfg.ReportEvery - now.Sub(p.lastReport)
	switch {
	case wait <= 0:
		p.lastReport = now
		p.report(p.env.reporter.Load())
	case !p.reportDue:
		p.reportDue = true
		scheduler.NewTimerScheduler(p.root).SendOnce(wait, p.self, &reportNow{})
	}
}

// recoverPanic turns a panic in user code outside Process (the factory,
// Finish) into the task's error, which ends the run.
func (p *processorTask) recoverPanic() {
	r := recover()
	if r == nil {
		return
	}
	p.st.Error = fmt.Sprintf("processor %s/%d: panic: %v", p.info.Component, p.info.Index, r)
	p.env.log.Errorf("%s\n%s", p.st.Error, debug.Stack())
	p.finished = true
	p.report(p.env.reporter.Load())
}

// flushAcks is the processor's timer message: send the deltas held back.
type flushAcks struct{}

func (p *processorTask) init(ctx actor.Context, m *cluster.ClusterInit) {
	task, err := p.env.topo.taskOf(m.Identity.Identity)
	if err != nil || p.env.topo.kindOf(task) != m.Identity.Kind {
		p.env.log.Errorf("processor: activated as %s %q, which is no task of that kind", m.Identity.Kind, m.Identity.Identity)
		return
	}
	p.task, p.info = task, p.env.topo.taskInfo(task)
	p.st.Task = task
	p.res = newResolver(ctx, p.env, m.Cluster)
	p.root = ctx.ActorSystem().Root
	p.self = ctx.Self()
	p.drained = map[uint32]bool{}
	p.col = newCollector(p.env, task, p.sendTuples, p.sendAcks, p.sendFails)
	p.col.rejectOut = p.sendReject
	p.col.local = func(t uint32) bool { return p.res.local(p.env, t) }
	user, err := p.env.topo.tasks[task].make(p.info)
	if err != nil {
		p.st.Error = fmt.Sprintf("processor %s/%d: %v", p.info.Component, p.info.Index, err)
		p.env.log.Error(p.st.Error)
		return
	}
	p.user = user
	switch user.(type) {
	case *Counter, Reuser:
		p.reuse = true
	}
}

func (p *processorTask) batch(m *messages.TupleBatch) {
	if p.col == nil {
		return
	}
	ts, err := decode(m, p.ts, &p.env.recycle)
	if err != nil {
		p.env.log.WithError(err).Errorf("processor %s/%d: dropped a malformed batch; its roots will time out", p.info.Component, p.info.Index)
		return
	}
	rep := p.standby()
	if rep != nil {
		rep.capturing = true
	}
	if c, ok := p.user.(counted); ok {
		c.counter().warm(ts)
	}
	for i := 0; i < len(ts); {
		i = p.process(ts, i)
	}
	p.st.Processed += uint64(len(ts))
	if p.reuse && allDone(ts) && rep == nil { // a batch sent to the standby is not the task's to reuse
		p.ts = ts[:0]
		p.env.recycle.doneTuples(m)
	} else {
		p.ts = nil
	}
	p.col.flushTuples()
	p.col.flushFails() // replays start sooner
	if rep != nil {
		p.col.flushAcks() // into rep.current
		rep.capturing = false
		p.replicate(rep, m)
	} else {
		p.holdAcks()
	}
	p.reportSoon()
}

// move sends what the runtime knows of the task (drains, finished, counts)
// to its activation on its new member, and a counter's window, and passes
// on what still reaches it here. Other user state does not move: a stateful
// processor of the user's starts empty there.
func (p *processorTask) move(ctx actor.Context, m *grain.Moved) {
	f := moveTo(ctx, m, "processor "+p.info.Component, p.env.log)
	if f == nil {
		return
	}
	if p.col != nil {
		p.col.flush()
	}
	if p.rep != nil { // the state goes to the new activation
		p.releaseHeld(p.rep.seq)
	}
	move, part := rand.Uint64()|1, uint32(0)
	if c, ok := p.user.(counted); ok {
		part = p.handWindow(c.counter(), m, f, move)
	}
	st := &messages.ProcessorState{Finished: p.finished, Processed: p.st.Processed, Reporter: p.reporter, Move: move, Part: part}
	if p.col != nil {
		st.Emitted = p.col.emitted
	}
	for t := range p.drained {
		st.Drained = append(st.Drained, t)
	}
	if err := p.handPart(f.to, st); err != nil {
		p.env.log.WithError(err).Errorf("processor %s/%d: handing its drains to its new member", p.info.Component, p.info.Index)
	}
	for _, h := range p.held { // input held for a state that now goes on too
		p.root.Send(f.to, h)
	}
	p.held, p.awaiting = nil, false
	p.fwd = f
	if m.Done != nil {
		m.Done()
	}
}

// handWindow sends a counter's window to its new activation, one part at
// a time (a remote batch carries at most one), as handover move, and says
// how many parts it sent. A first part that finds no activation there (its
// member left meanwhile, or it moved on and stopped) reached nobody: the
// window goes to the activation the placement gives now instead, up to
// moveTries times, and so does what follows it (f.to). Once a part is in,
// the others go there whatever befalls one of them.
func (p *processorTask) handWindow(k *Counter, m *grain.Moved, f *forwarder, move uint64) uint32 {
	for try := 1; ; try++ {
		part, lost := uint32(0), false
		k.export(counterStateBytes, func(st *messages.CounterState) {
			if lost {
				return
			}
			st.Move, st.Part = move, part
			err := p.handPart(f.to, st)
			switch {
			case part == 0 && errors.Is(err, actor.ErrDeadLetter):
				lost = true
				return
			case err != nil:
				p.env.log.WithError(err).Errorf("counter %s/%d: handing part %d of its window to its new member", p.info.Component, p.info.Index, part)
			}
			part++
		})
		if !lost {
			return part
		}
		if try == moveTries {
			p.env.log.Errorf("counter %s/%d: its new activation went away %d times; its window is lost", p.info.Component, p.info.Index, moveTries)
			return 0
		}
		time.Sleep(moveRetry)
		to, err := m.Activate()
		if err != nil || to == nil { // the member it moves to is gone too
			p.env.log.WithError(err).Errorf("counter %s/%d: its new activation went away, and none came in its place; its window is lost", p.info.Component, p.info.Index)
			return 0
		}
		f.to = to
	}
}

// handPart sends one part of a move's handover to to and waits for its
// answer, sending the same part again (the taker takes it once) when none
// comes in handWait, up to handTries times. It returns nil once answered,
// ErrDeadLetter when no activation is there, or the last error.
func (p *processorTask) handPart(to *actor.PID, msg proto.Message) error {
	var err error
	for try := 0; try < handTries; try++ {
		if _, err = p.root.RequestFuture(to, msg, p.env.handWait).Result(); err == nil || errors.Is(err, actor.ErrDeadLetter) {
			return err
		}
		p.env.log.WithError(err).Warnf("processor %s/%d: its new member did not answer a part of its state; sending it again", p.info.Component, p.info.Index)
	}
	return fmt.Errorf("no answer in %d tries of %v: %w", handTries, p.env.handWait, err)
}

// takeWindow takes a part of a moved counter's window, once, answers it
// (the old activation then sends the next) and, after the last, handles
// the input held meanwhile.
func (p *processorTask) takeWindow(ctx actor.Context, m *messages.CounterState) {
	if c, ok := p.user.(counted); ok && p.in.take(m.Move, m.Part) {
		if err := c.counter().adopt(m); err != nil {
			p.env.log.WithError(err).Warnf("counter %s/%d: taking over its window", p.info.Component, p.info.Index)
		}
	}
	if ctx.Sender() != nil {
		ctx.Respond(&messages.CounterState{})
	}
	if m.Last && p.awaiting {
		p.release()
	}
}

// handoverPart is a CounterState or a ProcessorState: a numbered part of a
// move's handover.
type handoverPart interface {
	GetMove() uint64
	GetPart() uint32
}

// tookHere answers, for an activation that moved on, a handover part sent
// to it again that it had taken before it moved: the part is in the state
// it handed over, and passed on it would count twice there.
func (p *processorTask) tookHere(ctx actor.Context) bool {
	m, ok := ctx.Message().(handoverPart)
	if !ok || !p.in.took(m.GetMove(), m.GetPart()) {
		return false
	}
	if ctx.Sender() != nil {
		ctx.Respond(&messages.CounterState{}) // handPart takes any answer
	}
	return true
}

// adopt takes over the state of the task's earlier activation: its drains
// add to those that reached this one already.
func (p *processorTask) adopt(m *messages.ProcessorState) {
	if p.col == nil || p.finished {
		return
	}
	p.st.Processed += m.Processed
	p.col.emitted += m.Emitted
	if m.Finished { // Finish ran there, and the drains went on
		p.finished = true
		return
	}
	for _, t := range m.Drained {
		p.drain(&messages.Drain{FromTask: t, Reporter: m.Reporter})
	}
}

// stateLate ends the wait for a moved counter's state.
type stateLate struct{ wait uint64 }

// release handles, in order, the input held while the task awaited its
// moved state.
func (p *processorTask) release() {
	p.awaiting = false
	held := p.held
	p.held = nil
	for _, m := range held {
		switch m := m.(type) {
		case *messages.TupleBatch:
			p.batch(m)
		case *messages.Drain:
			p.drain(m)
		}
	}
}

// query answers a CounterQuery from the user code, when it is a Querier.
func (p *processorTask) query(q *messages.CounterQuery) *messages.CounterResult {
	k, ok := p.user.(Querier)
	if !ok {
		return &messages.CounterResult{Error: fmt.Sprintf("task %s is no counter", p.info.Component)}
	}
	return k.Query(q)
}

// ackHoldBatches bounds the input batches whose deltas a processor holds
// with AckDelay 0. Holding them until the queue drained made a root wait
// for every batch queued behind its own, and under max pending the queue
// holds most of the roots in flight: the spouts stalled until the
// pipeline ran dry. At 8 ackers it took 1.11× the run time of holding
// over at most 4 batches (median of 20 alternating word counts); sending
// after every batch, 9× the messages, was no faster than 2, 4 or 8.
const ackHoldBatches = 4

// ackHold decides when a processor sends the deltas it holds: fewer,
// fuller AckBatches for the ackers (a full one goes at once).
type ackHold struct {
	over   int  // input batches whose deltas are held (AckDelay 0)
	queued bool // a flushAcks is queued or timed
}

// after is told that an input batch left deltas pending: flush says send
// them now; queue says send a flushAcks, behind the input batches already
// queued when delay is 0, else after delay.
func (h *ackHold) after(delay time.Duration) (flush, queue bool) {
	if delay <= 0 {
		if h.over++; h.over >= ackHoldBatches {
			h.over = 0
			return true, false
		}
	}
	if h.queued {
		return false, false
	}
	h.queued = true
	return false, true
}

// holdAcks lets deltas gather over several input batches, up to AckDelay
// or, with AckDelay 0, until the input batches already queued are handled
// or ackHoldBatches went by.
func (p *processorTask) holdAcks() {
	if !p.col.acksPending() {
		return
	}
	flush, queue := p.hold.after(p.env.cfg.AckDelay)
	switch {
	case flush:
		p.col.flushAcks()
	case !queue:
	case p.env.cfg.AckDelay <= 0:
		p.root.Send(p.self, &flushAcks{})
	default:
		scheduler.NewTimerScheduler(p.root).SendOnce(p.env.cfg.AckDelay, p.self, &flushAcks{})
	}
}

func (p *processorTask) report(to *actor.PID) {
	if to == nil || p.col == nil { // not initialised: nothing to tell
		return
	}
	p.root.Send(to, &messages.TaskReport{Task: p.task, Done: p.finished, Emitted: p.col.emitted,
		Processed: p.st.Processed, Error: p.st.Error})
}

// process runs user code on ts from i on and returns len(ts); a panic
// fails the tuple it came from (its root replays) instead of killing the
// task, and process returns the index after that tuple. One recovery
// covers the run of tuples, not one per tuple (about 4 ns a tuple in the
// members' profiles).
func (p *processorTask) process(ts []Tuple, i int) (next int) {
	if p.user == nil {
		for ; i < len(ts); i++ {
			p.col.Fail(&ts[i])
		}
		return i
	}
	defer func() {
		if r := recover(); r != nil {
			p.env.log.Errorf("processor %s/%d: panic in Process, tuple failed: %v\n%s", p.info.Component, p.info.Index, r, debug.Stack())
			p.col.Fail(&ts[next])
			next++
		}
	}()
	for next = i; next < len(ts); next++ {
		p.user.Process(&ts[next], p.col)
	}
	return next
}

// drain counts upstream tasks that are done; after the last one the task
// finishes its user code and drains the tasks below it.
func (p *processorTask) drain(m *messages.Drain) {
	if p.col == nil || p.finished {
		return
	}
	if m.Reporter != nil {
		p.reporter = m.Reporter
	}
	p.drained[m.FromTask] = true
	if len(p.drained) < p.env.topo.tasks[p.task].upstream {
		return
	}
	p.finished = true
	if f, ok := p.user.(Finisher); ok {
		f.Finish(p.col)
	}
	p.col.flush()
	reporter := pidOf(m.Reporter)
	sendDrains(p.env, p.task, &p.res, p.root, reporter)
	p.report(reporter)
}

func (p *processorTask) sendTuples(target uint32, b *messages.TupleBatch) {
	if pid := p.res.get(p.env.topo.kindOf(target), p.env.topo.identity(target)); pid != nil {
		sendTuples(p.root, p.self.Address, pid, b, &p.env.recycle)
		return
	}
	p.env.log.Errorf("processor %s: no member hosts %s; %d tuples left to time out", p.info.Component, p.env.topo.identity(target), len(b.AnchorCounts))
}

func (p *processorTask) sendAcks(acker int, m *messages.AckBatch) {
	if p.rep != nil && p.rep.capturing { // until the standby has the batch
		p.rep.current = append(p.rep.current, ackTo{acker, m})
		return
	}
	p.toAcker(acker, m)
}

func (p *processorTask) sendFails(acker int, m *messages.FailRoot) {
	p.toAcker(acker, m)
}

// forAcker is m as it goes to an acker at pid: an ack batch for another
// member in its wire form, where the member's serializer takes it
// (wire.Installed), and the batch itself back to the recycler at once.
// Sent as it is, it is serialised after Send returns, so its arrays can
// never be reused, and a task whose acks all leave the member would make
// new ones for every batch.
func (p *processorTask) forAcker(pid *actor.PID, m any) any {
	b, ok := m.(*messages.AckBatch)
	if !ok || pid.Address == p.self.Address || !wire.Installed() {
		return m
	}
	size := proto.Size(b) // cached for the marshalling
	enc, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(wire.Buffer(size), b)
	if err != nil { // a message of ours that protobuf cannot encode: let the remote's serializer say why
		return m
	}
	p.env.recycle.doneAcks(b)
	return &wire.Encoded{Type: wire.AckBatch, Bytes: enc}
}

// sendReject tells spout task task that a root is rejected.
func (p *processorTask) sendReject(task uint32, m *messages.Rejected) {
	if pid := p.res.get(KindSpout, p.env.topo.identity(task)); pid != nil {
		p.root.Send(pid, m)
		return
	}
	p.env.log.Errorf("processor %s: no member hosts %s; the roots it rejected replay when their failure reaches it", p.info.Component, p.env.topo.identity(task))
}

func (p *processorTask) toAcker(acker int, m any) {
	if pid := p.res.get(KindAcker, tracker.AckerIdentity(acker)); pid != nil {
		p.root.Send(pid, p.forAcker(pid, m))
		return
	}
	// The roots' records will never hear of these tuples: fail them at
	// their spout tasks now rather than after the timeout.
	var ids []uint64
	switch m := m.(type) {
	case *messages.AckBatch:
		ids = m.SpringIds
	case *messages.FailRoot:
		ids = m.SpringIds
	}
	p.env.log.Errorf("processor %s: no member hosts %s; failing its %d roots at their spout tasks", p.info.Component, tracker.AckerIdentity(acker), len(ids))
	by := map[uint32][]uint64{}
	for _, id := range ids {
		by[tracker.TaskOf(id)] = append(by[tracker.TaskOf(id)], id)
	}
	for task, ids := range by {
		if int(task) >= p.env.topo.Tasks() || !p.env.topo.tasks[task].Spout {
			continue // a remote client's: it times out there
		}
		if pid := p.res.get(KindSpout, p.env.topo.identity(task)); pid != nil {
			p.root.Send(pid, &messages.Failed{SpringIds: ids})
		}
	}
}
