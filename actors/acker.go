package actors

import (
	"fmt"
	"runtime/debug"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/scheduler"

	"github.com/acktor/acktor/actors/ledger"
	"github.com/acktor/acktor/messages"
)

// rotate is the acker's timer message.
type rotate struct{}

// ackerTask holds a ledger and translates messages into calls on it. What
// the calls report is batched per spout task and sent after each message.
type ackerTask struct {
	env    *env
	id     string
	l      *ledger.Ledger
	res    resolver
	root   *actor.RootContext
	cancel scheduler.CancelFunc

	completed outbox
	failed    outbox
	expired   outbox
	onExpire  func(springID uint64, task uint32)
	bad       uint64 // malformed messages dropped
}

func (a *ackerTask) Receive(ctx actor.Context) {
	defer func() { // the ledger does not panic; if it ever does, keep serving
		if r := recover(); r != nil {
			a.env.log.Errorf("%s: panic: %v\n%s", a.id, r, debug.Stack())
		}
	}()
	switch m := ctx.Message().(type) {
	case *cluster.ClusterInit:
		a.init(ctx, m)
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
			a.l.Rotate(a.onExpire)
		}
	case *messages.AckerStatsRequest:
		ctx.Respond(a.stats())
		return
	case *actor.Stopping:
		if a.cancel != nil {
			a.cancel()
		}
		return
	default:
		return
	}
	a.flush()
}

func (a *ackerTask) init(ctx actor.Context, m *cluster.ClusterInit) {
	e := a.env
	spoutTasks := 0
	for _, c := range e.topo.Components {
		if c.Spout {
			spoutTasks += c.Parallel
		}
	}
	// Pre-size for this acker's share of the roots the spouts may keep in
	// flight (capped: beyond it the table grows once, by half).
	expect := min(e.cfg.MaxPending*spoutTasks/max(e.cfg.Ackers, 1), 1<<20)
	a.id = m.Identity.Identity
	// The bound leaves room for orphans (late acks) beyond what the spouts
	// may keep in flight; past it, inits are rejected and their roots replay
	// at the spout's deadline, and stray acks are dropped and counted.
	a.l = ledger.New(ledger.Config{Generations: e.cfg.Generations, ExpectedInFlight: expect,
		MaxInFlight: 4*expect + 4096})
	a.res = newResolver(ctx, m.Cluster)
	a.root = ctx.ActorSystem().Root
	n := e.topo.Tasks()
	a.completed, a.failed, a.expired = newOutbox(n), newOutbox(n), newOutbox(n)
	a.onExpire = func(id uint64, task uint32) { a.expired.add(task, id) }
	every := e.cfg.rotateEvery()
	a.cancel = scheduler.NewTimerScheduler(a.root).SendRepeatedly(every, every, ctx.Self(), &rotate{})
}

func (a *ackerTask) track(m *messages.Track) {
	if a.l == nil {
		return
	}
	if len(m.SpringIds) != len(m.InitXors) || int(m.Task) >= a.env.topo.Tasks() || !a.env.topo.tasks[m.Task].Spout {
		a.drop(fmt.Sprintf("track from task %d with %d springIds and %d inits", m.Task, len(m.SpringIds), len(m.InitXors)))
		return
	}
	for i, id := range m.SpringIds {
		a.outcome(id, a.l.Init(id, m.Task, m.InitXors[i]))
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
	for i, id := range m.SpringIds {
		a.outcome(id, a.l.Ack(id, m.XorDeltas[i]))
	}
}

func (a *ackerTask) fail(m *messages.FailRoot) {
	if a.l == nil {
		return
	}
	for _, id := range m.SpringIds {
		if task, ok := a.l.Fail(id); ok {
			a.failed.add(task, id)
		}
	}
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
	a.completed.drain(func(task uint32, ids []uint64) {
		a.toSpout(task, &messages.Completed{SpringIds: ids})
	})
	a.failed.drain(func(task uint32, ids []uint64) {
		a.toSpout(task, &messages.Failed{SpringIds: ids, Reason: messages.FailReason_FAIL_REASON_EXPLICIT})
	})
	a.expired.drain(func(task uint32, ids []uint64) {
		a.toSpout(task, &messages.Failed{SpringIds: ids, Reason: messages.FailReason_FAIL_REASON_TIMEOUT})
	})
}

// outbox gathers springIds per spout task until the next flush.
type outbox struct {
	ids   [][]uint64 // by task id
	dirty []uint32   // tasks with ids
}

func newOutbox(tasks int) outbox { return outbox{ids: make([][]uint64, tasks)} }

func (o *outbox) add(task uint32, id uint64) {
	if len(o.ids[task]) == 0 {
		o.dirty = append(o.dirty, task)
	}
	o.ids[task] = append(o.ids[task], id)
}

// drain hands each task's ids to send, which keeps them.
func (o *outbox) drain(send func(task uint32, ids []uint64)) {
	for _, t := range o.dirty {
		send(t, o.ids[t])
		o.ids[t] = nil
	}
	o.dirty = o.dirty[:0]
}

func (a *ackerTask) toSpout(task uint32, m any) {
	if p := a.res.get(KindSpout, a.env.topo.identity(task)); p != nil {
		a.root.Send(p, m)
		return
	}
	a.env.log.Errorf("%s: no member hosts spout task %s; its roots replay at their deadline", a.id, a.env.topo.identity(task))
}

func (a *ackerTask) stats() *messages.AckerStats {
	if a.l == nil {
		return &messages.AckerStats{Id: a.id}
	}
	s := a.l.Stats()
	return &messages.AckerStats{Id: a.id, Tracked: s.Inits, InFlight: uint64(a.l.Len()), PeakInFlight: uint64(s.PeakInFlight),
		Completed: s.Completed, Failed: s.Failed, Expired: s.Expired, Orphaned: s.Orphaned, Rejected: s.Rejected,
		Acks: s.Acks, Bytes: uint64(a.l.Bytes()), Dropped: s.Dropped}
}
