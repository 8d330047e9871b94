package actors

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/acktor/acktor/messages"
	"github.com/acktor/acktor/tracker/ring"
)

// maxAckers bounds Config.Ackers and SetAckers.
const maxAckers = 4096

// directory says which acker owns each root: the tracker paper's ring
// (§3.2) over acker/0 … acker/n-1, frozen into a ring.Table for O(1)
// lookups. It is immutable; a change of the acker set makes a new one with
// the next version, which every task picks up on its next message.
type directory struct {
	version  uint64
	ackers   int
	replicas int
	routing  uint64 // directories alike in it route alike (routingOf)
	table    *ring.Table
	num      []int32 // table index -> acker number
}

// ringScheme numbers the way a directory's ring is built (the point and
// key hashes, the acker names): change it with them, so that members of two
// builds never take each other's routing for their own.
const ringScheme = 1

// routingOf is what a directory's routing rests on, as tasks stamp it on
// their messages: the ring scheme, the ackers and the points per acker.
func routingOf(ackers, replicas int) uint64 {
	return ringScheme<<48 | uint64(ackers)<<32 | uint64(uint32(replicas))
}

func newDirectory(version uint64, ackers, replicas int) *directory {
	d := &directory{version: version, ackers: ackers, replicas: replicas}
	if ackers == 0 {
		return d
	}
	r := ring.New(replicas)
	d.routing = routingOf(ackers, r.Replicas())
	for n := range ackers {
		r.Add(AckerIdentity(n))
		_ = r.SetState(AckerIdentity(n), ring.Running) // it was just added
	}
	d.table = r.Table()
	for _, id := range d.table.IDs() {
		n, _ := strconv.Atoi(strings.TrimPrefix(id, "acker/"))
		d.num = append(d.num, int32(n))
	}
	return d
}

// olderThan says whether the set of version and routing is newer than d:
// a later version, or the same one with a greater routing. Two sets can
// share a version (members configured with different acker counts, two
// SetAckers at once on different members); ordering them makes every member
// settle on one, where otherwise each would pass the other's roots back to
// it for good.
func (d *directory) olderThan(version, routing uint64) bool {
	return version > d.version || version == d.version && routing > d.routing
}

// ackerOf is the number of the acker that owns springID.
func (d *directory) ackerOf(springID uint64) int {
	i, _ := d.table.Owner(springID)
	return int(d.num[i])
}

// learn takes up an acker set announced by another member, if it is newer
// than this member's.
func (e *env) learn(m *messages.AckerSet) {
	if m.Ackers == 0 || m.Ackers > maxAckers || m.Replicas > ring.MaxReplicas {
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
	if version == 0 || !e.dir.Load().olderThan(version, routing) {
		return
	}
	ackers, replicas := int(routing>>32&0xFFFF), int(uint32(routing))
	if routing>>48 != ringScheme || ackers < 1 || ackers > maxAckers || replicas < 1 || replicas > ring.MaxReplicas {
		return
	}
	e.adopt(version, ackers, replicas)
}

// adopt makes the set of version the member's, if it is newer.
func (e *env) adopt(version uint64, ackers, replicas int) {
	d := newDirectory(version, ackers, replicas)
	e.setMu.Lock()
	defer e.setMu.Unlock()
	if !e.dir.Load().olderThan(d.version, d.routing) {
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
	return d.version, d.ackers
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
	if n < 1 || n > maxAckers {
		return fmt.Errorf("set ackers: %d, want 1..%d", n, maxAckers)
	}
	e.setMu.Lock()
	defer e.setMu.Unlock()
	old := e.dir.Load()
	if n == old.ackers {
		return nil
	}
	d := newDirectory(old.version+1, n, old.replicas)
	e.dir.Store(d)
	if e.maxAckers.Load() < int32(n) {
		e.maxAckers.Store(int32(n))
	}
	e.log.Infof("ackers: %d -> %d (acker set version %d)", old.ackers, n, d.version)
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
	if d.ackers == 0 {
		return nil
	}
	m := &messages.AckerSet{Version: d.version, Ackers: uint32(d.ackers), Replicas: uint32(d.replicas)}
	send := func(identity, kind string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		p := c.Get(identity, kind)
		if p == nil {
			return fmt.Errorf("announcing acker set %d: no member hosts %s", d.version, identity)
		}
		c.ActorSystem.Root.Send(p, m)
		return nil
	}
	for a := range int(e.maxAckers.Load()) {
		if err := send(AckerIdentity(a), KindAcker); err != nil {
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
