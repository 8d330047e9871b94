package actors

import (
	"context"
	"errors"
	"fmt"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/acktor/acktor/messages"
	"github.com/acktor/acktor/tracker"
	"github.com/acktor/acktor/tracker/ring"
)

// learn takes up an acker set announced by another member, if it is newer
// than this member's.
func (e *env) learn(m *messages.AckerSet) {
	if m.Ackers == 0 || m.Ackers > tracker.MaxAckers || m.Replicas > ring.MaxReplicas {
		e.log.Errorf("acker set version %d: %d ackers of %d replicas, ignored", m.Version, m.Ackers, m.Replicas)
		return
	}
	e.adopt(m.Version, int(m.Ackers), int(m.Replicas))
}

// learnFrom takes up the acker set a message's sender routed by (its
// version and routing), if it is newer than this member's: a member that
// missed an announcement (it joined later, or hosted no acker) catches up
// from the first message of one that did not. A routing of another ring
// scheme, or out of bounds, teaches nothing.
func (e *env) learnFrom(version, routing uint64) {
	if version == 0 || !e.dir.Load().OlderThan(version, routing) {
		return
	}
	ackers, replicas, ok := tracker.ParseRouting(routing)
	if !ok {
		return
	}
	e.adopt(version, ackers, replicas)
}

// adopt makes the set of version the member's, if it is newer.
func (e *env) adopt(version uint64, ackers, replicas int) {
	d := tracker.NewDirectory(version, ackers, replicas)
	e.setMu.Lock()
	defer e.setMu.Unlock()
	if !e.dir.Load().OlderThan(d.Version, d.Routing) {
		return
	}
	e.dir.Store(d)
	if e.maxAckers.Load() < int32(ackers) {
		e.maxAckers.Store(int32(ackers))
	}
}

// AckerSet returns the version and size of the current acker set.
func (rt *Runtime) AckerSet() (version uint64, ackers int) {
	d := rt.env.dir.Load()
	return d.Version, d.Ackers
}

// SetAckers changes the number of ackers while the topology runs. Roots
// move between ackers as the ring says (only those on the arcs next to the
// points that come or go); each acker hands the records it no longer owns
// to their new acker, and passes on the messages that still reach it for
// them, so no root is replayed because of the change. Tracking cannot be
// turned on or off at run time.
func (rt *Runtime) SetAckers(ctx context.Context, c *cluster.Cluster, n int) error {
	e := rt.env
	if !e.tracking() {
		return errors.New("set ackers: tracking is off (the runtime started with 0 ackers)")
	}
	if n < 1 || n > tracker.MaxAckers {
		return fmt.Errorf("set ackers: %d, want 1..%d", n, tracker.MaxAckers)
	}
	e.setMu.Lock()
	defer e.setMu.Unlock()
	old := e.dir.Load()
	if n == old.Ackers {
		return nil
	}
	d := tracker.NewDirectory(old.Version+1, n, old.Replicas)
	e.dir.Store(d)
	if e.maxAckers.Load() < int32(n) {
		e.maxAckers.Store(int32(n))
	}
	e.log.Infof("ackers: %d -> %d (acker set version %d)", old.Ackers, n, d.Version)
	if err := rt.announce(ctx, c, rt.running()); err != nil {
		return fmt.Errorf("set ackers: %w", err)
	}
	return nil
}

// announce sends this member's acker set to every acker that owned or owns
// roots under any set so far (an idle one would otherwise keep records it
// no longer owns until its next message) and, with tasks, to every task of
// the topology, so that each member routes by it, not only those hosting an
// acker now.
func (rt *Runtime) announce(ctx context.Context, c *cluster.Cluster, tasks bool) error {
	e := rt.env
	d := e.dir.Load()
	if d.Ackers == 0 {
		return nil
	}
	m := &messages.AckerSet{Version: d.Version, Ackers: uint32(d.Ackers), Replicas: uint32(d.Replicas)}
	send := func(identity, kind string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		p := c.Get(identity, kind)
		if p == nil {
			return fmt.Errorf("announcing acker set %d: no member hosts %s", d.Version, identity)
		}
		c.ActorSystem.Root.Send(p, m)
		return nil
	}
	for a := range int(e.maxAckers.Load()) {
		if err := send(tracker.AckerIdentity(a), KindAcker); err != nil {
			return err
		}
	}
	if !tasks {
		return nil
	}
	for task := range uint32(e.topo.Tasks()) {
		if err := send(e.topo.identity(task), e.topo.kindOf(task)); err != nil {
			return err
		}
	}
	return nil
}
