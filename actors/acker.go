package actors

import (
	"runtime/debug"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/scheduler"

	"github.com/acktor/acktor/cluster/grain"
	"github.com/acktor/acktor/messages"
	"github.com/acktor/acktor/tracker"
)

// rotate is the acker's timer message.
type rotate struct{}

// flushOut is the message an acker sends itself to tell the spouts what the
// messages queued before it settled, in one message per spout task.
type flushOut struct{}

// ackerTask is an acker's actor: it hands every message to its
// tracker.Acker, which decides, and delivers what the acker decided to
// send. What the acker's records report is batched per spout task and sent
// once the messages queued are handled (flushLater).
type ackerTask struct {
	env      *env
	id       string
	core     *tracker.Acker // nil until activated as an acker identity
	cfg      tracker.AckerConfig
	res      resolver
	root     *actor.RootContext
	cancel   scheduler.CancelFunc
	fwd      *forwarder // set once the acker moved to another member
	self     *actor.PID
	flushing bool   // a flushOut is queued
	early    uint64 // Handovers that came before the acker was activated, dropped
}

func (a *ackerTask) Receive(ctx actor.Context) {
	defer func() {
		if r := recover(); r != nil {
			a.restart(r)
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
	if a.core != nil { // hand over what a new acker set gives other ackers
		a.core.SetDirectory(a.env.dir.Load())
		a.deliver()
	}
	switch m := ctx.Message().(type) {
	case *cluster.ClusterInit:
		a.init(ctx, m)
		return
	case *grain.Moved:
		a.move(ctx, m)
		return
	case *actor.Terminated:
		a.res.forget(m.Who)
		return
	case *messages.AckerStatsRequest:
		st := a.stats()
		st.Member = ctx.Self().Address
		ctx.Respond(st)
		return
	case *actor.Stopping:
		if a.cancel != nil {
			a.cancel()
		}
		// A queued flushOut dies with the actor: a move flushed first, and
		// after a plain stop (shutdown) those roots replay at their deadline.
		return
	}
	if a.core == nil {
		if _, ok := ctx.Message().(*messages.Handover); ok { // records with no ledger to go to
			a.early++
			a.env.log.Errorf("%s: dropped a Handover that came before the acker was activated; its roots replay at their deadline", a.id)
		}
		return
	}
	switch m := ctx.Message().(type) {
	case *messages.AckerSet: // SetDirectory acted on it
	case *messages.Handover:
		a.core.Handover(m)
	case *messages.Track:
		a.core.Track(m)
		a.env.recycle.doneTrack(m)
	case *messages.AckBatch:
		a.core.AckBatch(m)
		a.env.recycle.doneAcks(m)
	case *messages.FailRoot:
		a.core.Fail(m)
	case *rotate:
		a.core.Rotate()
	case *flushOut:
		a.flushing = false
		a.core.Flush()
	default:
		return
	}
	a.deliver()
	a.flushLater()
}

// restart is what an acker does with a panic (panics.go): it starts its
// core afresh, and the roots it held replay at their deadlines; its
// counters start again from zero.
func (a *ackerTask) restart(r any) {
	a.env.log.Errorf("%s: BUG: %v; the acker starts afresh, and the roots it held replay at their spouts' deadlines\n%s",
		a.id, r, debug.Stack())
	if a.core != nil {
		a.core = tracker.NewAcker(a.cfg, a.env.dir.Load())
	}
}

// deliver sends what the acker decided.
func (a *ackerTask) deliver() {
	outs := a.core.Ready()
	defer clear(outs) // sent: the core's buffer holds them no longer (a large Handover)
	for _, o := range outs {
		switch o.Dest {
		case tracker.ToAcker:
			a.toAcker(o.Acker, o.Msg)
		case tracker.ToSpout:
			if p := a.res.get(KindSpout, a.env.topo.identity(o.Task)); p != nil {
				a.root.Send(p, o.Msg)
			} else {
				a.env.log.Errorf("%s: no member hosts spout task %s; its roots replay at their deadline", a.id, a.env.topo.identity(o.Task))
			}
		case tracker.ToClient:
			a.root.Send(pidOf(o.Client), o.Msg)
		}
	}
}

// flushLater queues a flushOut behind the messages already waiting, so that
// what they settle goes out together: under load a spout task hears once
// per burst of acks, not once per ack batch, with no timer and no delay
// when the acker is idle.
func (a *ackerTask) flushLater() {
	if a.flushing || !a.core.Pending() {
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
	spouts := make([]bool, e.topo.Tasks())
	for task := range spouts {
		spouts[task] = e.topo.tasks[task].Spout
	}
	a.cfg = tracker.AckerConfig{Num: n, Generations: e.cfg.Generations, MaxPending: e.cfg.MaxPending,
		Spouts: spouts, Completed: e.recycle.completedOf, Log: e.log}
	a.core = tracker.NewAcker(a.cfg, e.dir.Load())
	a.res = newResolver(ctx, a.env, m.Cluster)
	a.root = ctx.ActorSystem().Root
	a.self = ctx.Self()
	every := e.cfg.rotateEvery()
	a.cancel = scheduler.NewTimerScheduler(a.root).SendRepeatedly(every, every, ctx.Self(), &rotate{})
}

// move hands every record to the acker's activation on its new member,
// then passes on what still reaches it here.
func (a *ackerTask) move(ctx actor.Context, m *grain.Moved) {
	if a.core == nil {
		if m.Done != nil {
			m.Done()
		}
		return
	}
	f := moveTo(ctx, m, a.id, a.env.log)
	if f == nil {
		return
	}
	if a.cancel != nil {
		a.cancel()
	}
	hs := a.core.HandOverAll()
	a.deliver()
	records := 0
	for _, h := range hs {
		a.root.Send(f.to, h)
		records += len(h.SpringIds)
	}
	a.fwd = f
	a.env.log.Debugf("%s: moved to %s with %d records", a.id, f.to.Address, records)
	if m.Done != nil {
		m.Done()
	}
}

func (a *ackerTask) toAcker(n int, m any) {
	if p := a.res.get(KindAcker, tracker.AckerIdentity(n)); p != nil {
		a.root.Send(p, m)
		return
	}
	a.env.log.Errorf("%s: no member hosts %s; the roots it was passed replay at their deadline", a.id, tracker.AckerIdentity(n))
}

func (a *ackerTask) stats() *messages.AckerStats {
	if a.core == nil {
		return &messages.AckerStats{Id: a.id, BadMessages: a.early}
	}
	st := a.core.Stats(a.id)
	st.BadMessages += a.early
	return st
}
