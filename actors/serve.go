package actors

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/acktor/acktor/messages"
)

// reporterName is the name of a service member's reporter: a member asks
// the lead's for the service's progress.
const reporterName = "acktor-reporter"

// serving is a service this runtime serves: where, and who leads.
type serving struct {
	c      *cluster.Cluster
	leader func() string
}

// serveEvery is how often the lead of a service makes sure every spout
// task runs: a task that died with its member starts again on another
// within it (sooner when the membership tells of the loss).
const serveEvery = time.Second

// Serve runs the topology as a service on c until ctx ends: no driver and
// no end. Every member of the cluster calls it; lead says whether this
// member leads now (an election every member computes alike, such as the
// owner of a fixed identity). The lead starts the spout tasks that do not
// run (a spout task is a virtual actor: two leads starting it at once
// start it once) and makes them report to it, restarts those that moved
// with the state they handed over, starts again those that died with their
// member, and announces the acker set after membership changes. A member
// that stops leading stops doing so, but still restarts the tasks that
// hand it their state as they move (a lead that leaves the cluster moves
// its tasks before it stops serving). A task's error (a source that
// broke, a panic in user code) is logged, and a spout task so ended starts
// afresh at the lead's next round; the service goes on. A runtime serves
// once, or runs once.
func (rt *Runtime) Serve(ctx context.Context, c *cluster.Cluster, leader func() string) error {
	if !rt.ran.CompareAndSwap(false, true) {
		return errors.New("serve: this runtime has run already; make a new one")
	}
	e := rt.env
	rep := newReporter(e.topo, false, e.log) // a lead that changes would not know the grants
	rt.start = time.Now()
	rt.run.Store(rep)
	root := c.ActorSystem.Root
	pid, err := root.SpawnNamed(actor.PropsFromFunc(rep.receive), reporterName)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer root.Stop(pid)
	rt.serving.Store(&serving{c: c, leader: leader})
	defer rt.serving.Store(nil)
	lead := func() bool { return leader() == c.ActorSystem.Address() }
	e.reporter.Store(pid)
	defer e.reporter.Store(nil)
	rpid := &messages.Pid{Address: pid.Address, Id: pid.Id}

	var changedAt atomic.Int64
	sub := c.ActorSystem.EventStream.Subscribe(func(evt any) {
		if t, ok := evt.(*cluster.ClusterTopology); ok && len(t.Left)+len(t.Joined) > 0 {
			changedAt.Store(time.Now().UnixNano())
		}
	})
	defer c.ActorSystem.EventStream.Unsubscribe(sub)
	tick := time.NewTicker(min(e.cfg.ReportEvery, serveEvery))
	defer tick.Stop()
	leading, started := false, time.Time{}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-rep.moved: // a spout task moved to another member: start it there
			for _, task := range rep.restarts() {
				if err := rt.startSpout(c, rep, task, rpid); err != nil {
					e.log.WithError(err).Warn("serve: restarting a moved spout task")
				}
			}
			continue
		case <-tick.C:
		}
		now := lead()
		if now && !leading {
			e.log.Infof("serve: this member leads the service now")
		}
		if now && (!leading || time.Since(started) >= serveEvery || changedAt.Load() > started.UnixNano()) {
			rt.lead(ctx, c, rep, rpid, !leading || changedAt.Load() > started.UnixNano())
			started = time.Now()
		}
		leading = now
		if err := rep.takeErr(); err != nil { // a spout task that failed starts again at the next round
			e.log.WithError(err).Error("serve: a task failed; it starts afresh")
		}
	}
}

// lead is one round of the lead's work: every spout task is asked to run
// and to report here (a started task only takes the reporter), and after a
// membership change (or on taking the lead) the acker set is announced.
func (rt *Runtime) lead(ctx context.Context, c *cluster.Cluster, rep *reporter, rpid *messages.Pid, announce bool) {
	e := rt.env
	if announce {
		if err := rt.announce(ctx, c, true); err != nil {
			e.log.WithError(err).Warn("serve: announcing the acker set")
		}
	}
	if err := rt.startSpouts(c, rep, rpid); err != nil {
		e.log.WithError(err).Warn("serve: starting spout tasks")
	}
}
