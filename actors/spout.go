package actors

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/scheduler"

	"github.com/acktor/acktor/cluster/grain"
	"github.com/acktor/acktor/messages"
	"github.com/acktor/acktor/source"
	"github.com/acktor/acktor/tracker"
)

// pull, spoutTick and startHeld are the spout's messages to itself.
type (
	pull      struct{}
	spoutTick struct{}
	startHeld struct{}
)

// handoverWait is how long an activation that takes over a moved spout
// task holds a start from a checkpoint, waiting for the state its earlier
// activation hands over (which waits as long for the run to take it).
const handoverWait = 5 * time.Second

// spoutTask pulls roots from its source, emits them, and replays failures;
// which root is in flight until when, and which acker hears of it, its
// tracker.Spout decides.
type spoutTask struct {
	env      *env
	task     uint32
	info     TaskInfo
	src      source.Source
	col      *Collector
	res      resolver
	root     *actor.RootContext
	self     *actor.PID
	reporter *actor.PID
	cancel   scheduler.CancelFunc

	core     *tracker.Spout // nil until activated as a spout task
	stamp    int64          // the time of a pull or replay round, unix ns: ingestion time of new roots
	started  bool
	finished bool
	done     bool              // reported done
	err      string            // why the task broke, for its reports
	total    int64             // the roots its source will yield, -1 if unknown
	settled  []tracker.Settled // scratch of the core's answers
	fwd      *forwarder        // set once the task moved to another member
	// unsubscribe ends the task's watch on the membership: a member that
	// dies fails the roots in flight (memberDied).
	unsubscribe  func()
	deaths       map[string]bool // by member id: the members whose death failed the roots already
	checkpointed time.Time       // when the last checkpoint went to the reporter
	// scope is what root content ids derive from besides the root's id:
	// the task, or for a source with GlobalIDs its component's first task,
	// the same whichever task a broker hands the root to.
	scope uint32
	// nearOf is the acker set and the topology epoch that the core's near
	// ackers were worked out under, and nearAt when (setNear).
	nearOf    *tracker.Directory
	nearEpoch uint64
	nearAt    int64
	// shares is the source when it shares its splits (source.Splits): it
	// asks the reporter for the next split while it reads one. asked says a
	// request is out since the last tick (which asks again, should it be
	// lost), starved that a pull found the source waiting for a grant.
	shares  source.Splits
	asked   bool
	starved bool
	opened  bool // its source opened: reports say whether it shares
	// incoming says the activation takes over a moved task (grain.Incoming
	// came first, or a claim moves it here); heldStart is a start from a
	// checkpoint it holds until the state handed over comes, or
	// handoverWait has passed (holdStart); claim is its claim's progress.
	incoming  bool
	heldStart *messages.StartSpout
	claim     claimState
	stopAsked bool // a start said Stop: a later one without it must not undo that
}

// claimState is where a spout task's claim stands (spoutTask.claimFirst).
type claimState uint8

const (
	noClaim claimState = iota
	claiming
	claimDone
)

// maxEarly bounds the notifications a spout task keeps before it starts
// (a moved task's new activation hears from ackers before its state comes).
const maxEarly = 4096

func (s *spoutTask) Receive(ctx actor.Context) {
	defer s.recoverPanic()
	if s.fwd.pass(ctx) {
		return
	}
	switch m := ctx.Message().(type) {
	case *cluster.ClusterInit:
		s.init(ctx, m)
	case *actor.Terminated:
		s.res.forget(m.Who)
	case *messages.StartSpout:
		if s.started && s.finished && s.err != "" { // it broke: a service's lead starts it afresh
			ctx.Stop(ctx.Self())
			return
		}
		s.stopAsked = s.stopAsked || m.Stop
		if !s.holdStart(m) {
			s.start(m)
		}
	case *grain.Incoming:
		s.incoming = true
	case *claimed:
		s.claimedBy(m)
	case *startHeld:
		if m := s.heldStart; m != nil && !s.started {
			s.env.log.Warnf("spout %s/%d: the state of its earlier activation did not come within %v; starting from its checkpoint",
				s.info.Component, s.info.Index, handoverWait)
			s.start(m)
		}
		s.heldStart, s.incoming = nil, false
	case *pull:
		s.pull(true)
	case *spoutTick:
		s.tick()
	case *messages.SplitGrant:
		s.granted(m)
	case *messages.AckerSet:
		s.env.learn(m)
	case *messages.Completed:
		s.env.learnFrom(m.Version, m.Routing)
		if s.step(m) {
			s.env.recycle.doneCompleted(m)
		}
	case *messages.Failed:
		s.env.learnFrom(m.Version, m.Routing)
		s.step(m)
	case *messages.Rejected:
		s.step(m)
	case *grain.Moved:
		s.move(ctx, m)
	case *memberDied:
		s.died(m)
	case *actor.Stopping, *actor.Restarting:
		if s.unsubscribe != nil {
			s.unsubscribe()
			s.unsubscribe = nil
		}
		if s.cancel != nil {
			s.cancel()
		}
		s.env.stages.source.dropBacklog(s.task)
		if s.src != nil {
			if err := s.src.Close(); err != nil {
				s.env.log.WithError(err).Warnf("spout %s: closing its source", s.info.Component)
			}
		}
	}
}

// recoverPanic turns a panic in user code (a source, a dead-letter sink)
// into the task's error: the run reports it instead of waiting for a task
// that lost its state.
func (s *spoutTask) recoverPanic() {
	r := recover()
	if r == nil {
		return
	}
	s.err = fmt.Sprintf("spout %s/%d: panic: %v", s.info.Component, s.info.Index, r)
	s.env.log.Errorf("%s\n%s", s.err, debug.Stack())
	if s.cancel != nil {
		s.cancel()
	}
	s.finished = true
	s.done = true
	s.report()
}

func (s *spoutTask) init(ctx actor.Context, m *cluster.ClusterInit) {
	task, err := s.env.topo.taskOf(m.Identity.Identity)
	if err != nil || !s.env.topo.tasks[task].Spout {
		s.env.log.Errorf("spout: activated as %q, which is no spout task", m.Identity.Identity)
		return
	}
	s.task, s.info = task, s.env.topo.taskInfo(task)
	s.res = newResolver(ctx, s.env, m.Cluster)
	s.setup(ctx.ActorSystem().Root, ctx.Self())
	c, self, root := m.Cluster, ctx.Self(), ctx.ActorSystem().Root
	deaths, ok := c.IdentityLookup.(grain.Deaths)
	if !ok {
		return // a placement that tells no deaths: the deadlines catch what they cause
	}
	if died := deaths.LastDeath(); !died.IsZero() && time.Since(died) < deathSettles {
		// Started again after a member died, maybe in its place: the
		// members may not all know yet.
		s.core.Shorten(s.env.now().Add(deathSettles-time.Since(died)).UnixNano(), int64(undeliveredRetry))
	}
	sub := c.ActorSystem.EventStream.Subscribe(func(evt any) {
		t, ok := evt.(*cluster.ClusterTopology)
		if !ok {
			return
		}
		for _, gone := range t.Left {
			if deaths.Died(gone.Address()) {
				root.Send(self, &memberDied{addr: gone.Address(), member: gone.Id})
			}
		}
	})
	s.unsubscribe = func() { c.ActorSystem.EventStream.Unsubscribe(sub) }
}

// setup makes the task's core and collector.
func (s *spoutTask) setup(root *actor.RootContext, self *actor.PID) {
	s.root, s.self = root, self
	s.core = tracker.NewSpout(tracker.SpoutConfig{Task: s.task, MaxPending: s.env.cfg.MaxPending, MaxReplays: s.env.cfg.MaxReplays,
		BatchSize: s.env.cfg.BatchSize, MaxEarly: maxEarly, Deadline: int64(s.env.cfg.spoutDeadline()),
		Draw: randomSeq, Track: s.env.recycle.track, Untracked: !s.env.tracking(), IdleWait: s.env.cfg.idleWait()})
	s.col = newCollector(s.env, s.task, s.sendTuples, nil, nil)
	s.col.local = func(t uint32) bool { return s.res.local(s.env, t) }
}

// holdStart holds a start from a checkpoint (or from no state) that comes
// to an activation taking over a moved task before the state its earlier
// activation handed over: the run sends every spout task such a start for
// a while after a member left, and taken first it would replay the roots
// in flight at the checkpoint and read again what was read since. The
// start with the handed-over state follows; should it not come within
// handoverWait (the earlier activation died while it moved), the latest
// held start is taken then. An activation that a call made, not a move,
// first claims the task from the other members (claimFirst), holding the
// start meanwhile. It says whether it held m.
func (s *spoutTask) holdStart(m *messages.StartSpout) bool {
	switch {
	case s.started || (m.State != nil && !m.State.Checkpoint):
		return false
	case !s.incoming && (m.State == nil || !s.claimFirst()):
		return false
	}
	if s.heldStart == nil {
		scheduler.NewTimerScheduler(s.root).SendOnce(handoverWait, s.self, &startHeld{})
	}
	s.heldStart = m
	return true
}

// claimFirst asks, aside, whether another member holds the task still,
// and has it move here (Incoming and its state follow); it says whether
// the start must wait for the answer. The members that know of a join ask
// the member that joined for the task before the task's old member moves
// it there, and the run's start after a member left may be the first to
// come.
func (s *spoutTask) claimFirst() bool {
	if s.claim != noClaim {
		return s.claim == claiming
	}
	s.claim = claimDone
	if s.res.c == nil {
		return false
	}
	if !askClaim(s.res.c, s.root, s.self, KindSpout, s.env.topo.identity(s.task)) {
		return false // a cluster of one: no other member held it
	}
	s.claim = claiming // the answer comes after this message
	return true
}

// claimedBy takes the held start once the claim found no other
// activation; when one moves here, its state comes instead. Without an
// answer the start waits out handoverWait.
func (s *spoutTask) claimedBy(m *claimed) {
	s.claim = claimDone
	switch {
	case m.err != nil:
		s.env.log.WithError(m.err).Warnf("spout %s/%d: no answer from the member that held it before; waiting for its state at most %v",
			s.info.Component, s.info.Index, handoverWait)
	case m.moving:
		s.incoming = true
	case !s.incoming && !s.started && s.heldStart != nil:
		held := s.heldStart
		s.heldStart = nil
		s.start(held)
	}
}

// memberDied tells a spout task that a member died (left without handing
// its grains over): its address and its member id.
type memberDied struct{ addr, member string }

// died fails every root in flight when a member died: its ackers' records
// and the tuples at its processors are gone, and the roots they held would
// otherwise wait for their deadline (a timeout's length of nothing).
func (s *spoutTask) died(m *memberDied) {
	if s.core == nil || !s.core.Started() || s.finished || s.deaths[m.member] {
		return // a death is heard once; a member that came back on the address and died again is another
	}
	now := s.env.now()
	s.core.Shorten(now.Add(deathSettles).UnixNano(), int64(undeliveredRetry))
	if s.deaths == nil {
		s.deaths = map[string]bool{}
	}
	s.deaths[m.member] = true
	n := s.core.Len()
	if n == 0 {
		return
	}
	if lag := s.env.cfg.MembershipLag; lag > 0 { // replayed now, they could go to the dead member through one that has not heard
		var ids []uint64
		s.core.Each(func(id uint64, _ tracker.PendingRoot) { ids = append(ids, id) })
		s.core.Hasten(ids, now.Add(lag).UnixNano())
		s.env.log.Warnf("spout %s/%d: member %s died; replaying the %d roots in flight in %v, once every member knows, not at their deadline",
			s.info.Component, s.info.Index, m.addr, n, lag)
		return
	}
	s.stamp = now.UnixNano() // the time of replays
	s.settled = s.core.FailAll(fmt.Sprintf("member %s died", m.addr), s.settled[:0])
	s.env.log.Warnf("spout %s/%d: member %s died; replaying the %d roots in flight now, not at their deadline", s.info.Component, s.info.Index, m.addr, n)
	s.settle()
	s.flush()
}

// move hands the task's state to the run's reporter, which starts the
// task's activation on its new member from it, and passes on what still
// reaches it here.
func (s *spoutTask) move(ctx actor.Context, m *grain.Moved) {
	f := moveTo(ctx, m, fmt.Sprintf("spout %s/%d", s.info.Component, s.info.Index), s.env.log)
	if f == nil {
		return
	}
	if s.started && !s.finished && s.src != nil {
		s.flush()
		if s.cancel != nil {
			s.cancel()
		}
		st := s.state()
		s.env.stages.source.dropBacklog(s.task)
		if err := s.src.Close(); err != nil {
			s.env.log.WithError(err).Warnf("spout %s: closing its source", s.info.Component)
		}
		s.src = nil
		if s.reporter != nil { // wait until the run has the state: it restarts the task from it
			_, err := s.root.RequestFuture(s.reporter, &messages.SpoutMoved{Task: s.task, State: st}, 5*time.Second).Result()
			if err != nil {
				s.env.log.WithError(err).Errorf("spout %s/%d: handing its state to the run", s.info.Component, s.info.Index)
			}
		}
	}
	if s.core != nil {
		for _, e := range s.core.TakeHeld() { // held before a start that never came here
			s.root.Send(f.to, e)
		}
	}
	if !s.started && s.heldStart != nil { // the new activation holds it in turn
		held := s.heldStart
		held.Stop = held.Stop || s.stopAsked
		s.root.Send(f.to, held)
		s.heldStart = nil
	}
	s.fwd = f
	if m.Done != nil {
		m.Done()
	}
}

// state is what a moved task's new activation resumes from.
func (s *spoutTask) state() *messages.SpoutState {
	st := &messages.SpoutState{Exhausted: s.core.Ended(), Report: s.snapshot()}
	if sk, ok := s.src.(source.Seeker); ok {
		st.Position, st.Seekable = sk.Position(), true
	}
	if s.shares != nil { // Position is in split
		split, reserve := s.shares.Held()
		st.Shared, st.Split, st.Reserve = true, uint32(split), int32(reserve)
	}
	s.core.Each(func(id uint64, p tracker.PendingRoot) {
		st.SpringIds = append(st.SpringIds, id)
		st.RootIds = append(st.RootIds, p.ID)
		st.Times = append(st.Times, p.Time)
		st.Deadlines = append(st.Deadlines, p.Deadline)
		st.Attempts = append(st.Attempts, p.Attempt)
	})
	return st
}

// restore resumes from the state of the task's earlier activation: its
// source's position, sequence, pending roots and counters.
func (s *spoutTask) restore(st *messages.SpoutState) {
	if err := checkSpoutState(st); err != nil {
		s.env.log.WithError(err).Errorf("spout %s/%d: starting afresh", s.info.Component, s.info.Index)
		return
	}
	n := len(st.SpringIds)
	switch sk, ok := s.src.(source.Seeker); {
	case st.Exhausted:
		s.core.End(false)
	case st.Shared && s.shares != nil:
		if err := s.shares.SeekSplit(int(st.Split), int(st.Reserve), st.Position); err != nil {
			s.env.log.WithError(err).Errorf("spout %s/%d: resuming its source; reading its first split again", s.info.Component, s.info.Index)
		}
	case st.Shared:
		s.env.log.Errorf("spout %s/%d: its state is of a source that shared its splits, and this one does not; reading it again from the start", s.info.Component, s.info.Index)
	case st.Seekable && ok:
		if err := sk.Seek(st.Position); err != nil {
			s.env.log.WithError(err).Errorf("spout %s/%d: resuming its source; reading it again from the start", s.info.Component, s.info.Index)
		}
	default:
		// A broker's consumer resumes where its group committed, a
		// stream where its server redelivers; stdin cannot go back.
		s.env.log.Warnf("spout %s/%d: its source cannot seek to the earlier activation's position; it goes on from where the source resumes by itself", s.info.Component, s.info.Index)
	}
	s.env.log.Debugf("spout %s/%d: resumed with %d pending roots", s.info.Component, s.info.Index, len(st.SpringIds))
	roots := make([]tracker.PendingRoot, n)
	for i := range roots {
		roots[i] = tracker.PendingRoot{ID: st.RootIds[i], Time: st.Times[i], Deadline: st.Deadlines[i], Attempt: st.Attempts[i]}
	}
	s.core.Restore(st.SpringIds, roots)
	if r := st.Report; r != nil {
		s.core.Resume(r)
		s.col.emitted = r.Emitted
	}
}

// checkSpoutState says what is wrong with a spout task's state, if
// anything: its columns of roots in flight must be as long as each other.
func checkSpoutState(st *messages.SpoutState) error {
	n := len(st.SpringIds)
	if len(st.RootIds) != n || len(st.Times) != n || len(st.Deadlines) != n || len(st.Attempts) != n {
		return fmt.Errorf("malformed spout state: %d springIds, %d root ids, %d times, %d deadlines, %d attempts",
			n, len(st.RootIds), len(st.Times), len(st.Deadlines), len(st.Attempts))
	}
	return nil
}

// randomSeq starts a task's sequence at a random point, so that a restarted
// task does not reuse the springIds of records still in flight.
func randomSeq() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) >> (64 - tracker.SpringBits + 1) // leave room to count
}

// step hands the core an acker's or a processor's notification and
// delivers what it settles; false when the core held it for a start to
// come (a moved task's new activation hears from ackers before its state).
func (s *spoutTask) step(m any) (settled bool) {
	if s.core == nil { // activated as no spout task: nothing in flight
		return true
	}
	held := !s.core.Started()
	s.setDeadline()
	var err error
	s.settled, err = s.core.Step(m, s.stamp, s.settled[:0])
	if err != nil {
		s.env.log.WithError(err).Errorf("spout %s/%d: dropping a %T (its roots replay at their deadline)", s.info.Component, s.info.Index, m)
	}
	if held {
		return false
	}
	s.settle()
	return true
}

func (s *spoutTask) start(m *messages.StartSpout) {
	switch {
	case s.col == nil:
		return
	case s.started:
		if m.Reporter != nil { // a service's lead changed: report there
			s.reporter = pidOf(m.Reporter)
		}
		if m.Stop && !s.finished { // the run ends: read no more, and no redelivery reopens it
			s.core.End(true)
			s.refill()
		}
		return
	}
	s.started = true
	s.reporter = pidOf(m.Reporter)
	src, err := s.env.topo.tasks[s.task].source(s.info.Index, s.info.Parallel)
	if err != nil {
		s.err = fmt.Sprintf("spout %s/%d: %v", s.info.Component, s.info.Index, err)
		s.core.Start(false, false, 0, nil) // nothing in flight: what comes settles nothing
		s.finish()
		return
	}
	s.src, s.opened = src, true
	s.scope = s.task
	if _, ok := src.(source.GlobalIDs); ok {
		s.scope = s.env.topo.tasks[s.task].FirstTask
	}
	s.total = src.Total()
	if sp, ok := src.(source.Splits); ok && m.ShareSplits && s.info.Parallel > 1 {
		sp.Share()
		s.shares = sp
	}
	if m.State != nil {
		s.restore(m.State)
	}
	if m.Stop || s.stopAsked { // before what was held settles: that reads nothing more either
		s.core.End(true)
	}
	_, redelivers := src.(source.Redeliverer)
	s.setDeadline()
	var restarted int
	if s.settled, restarted = s.core.Start(redelivers, m.State.GetCheckpoint(), s.stamp, s.settled[:0]); restarted > 0 {
		s.env.log.Warnf("spout %s/%d: started again from its checkpoint; replaying the %d roots it had in flight",
			s.info.Component, s.info.Index, restarted)
	}
	if len(s.settled) > 0 {
		s.settle()
	}
	if s.finished {
		return
	}
	every := min(s.env.cfg.ReportEvery, s.env.cfg.Timeout/4)
	s.cancel = scheduler.NewTimerScheduler(s.root).SendRepeatedly(every, every, s.self, &spoutTick{})
	s.pull(false)
}

// pull emits up to a batch of new roots while there is room under max
// pending, then queues another pull so that acks get a turn in between;
// woken says it is the pull the core queued. The core decides what each
// answer of the source means.
func (s *spoutTask) pull(woken bool) {
	if s.src == nil || s.finished {
		return
	}
	s.setDeadline()
	s.setNear()
	var bad *source.BadRecord
	for s.core.Pull(woken); s.core.Reads(); {
		r, err := s.src.Next()
		switch {
		case err == nil:
			s.take(r)
		case errors.Is(err, source.ErrNotReady):
			s.starved = s.shares != nil
			s.core.NotReady()
		case errors.Is(err, io.EOF):
			s.core.Exhausted()
		case errors.As(err, &bad):
			s.deadLetter(s.core.BadRecord(bad.ID, bad.Reason), bad.Payload)
		default:
			s.err = fmt.Sprintf("spout %s/%d: reading source: %v", s.info.Component, s.info.Index, err)
			s.core.Broke()
		}
	}
	if bl, ok := s.src.(source.Backlogger); ok {
		s.env.stages.source.setBacklog(s.task, bl.Backlog())
	}
	s.askSplit()
	s.flush()
	if wait, ok := s.core.Again(); ok {
		if wait > 0 {
			scheduler.NewTimerScheduler(s.root).SendOnce(wait, s.self, &pull{})
		} else {
			s.root.Send(s.self, &pull{})
		}
	}
	s.maybeFinish()
}

// take emits a root the source handed out.
func (s *spoutTask) take(r source.Root) {
	s.env.stages.source.taken.Add(1)
	s.emit(s.core.Took(tracker.PendingRoot{ID: r.ID, Time: r.Time, Attempt: r.Attempt}, s.stamp), r.Payload)
}

// emit sends one root with a fresh springId, and its init to its acker
// at the next flush.
func (s *spoutTask) emit(p tracker.PendingRoot, payload string) {
	d := s.env.dir.Load()
	springID := s.core.NextSpringID(d)
	initXor, err := s.col.emitRoot(springID, rootContentID(s.scope, p.ID), p.Time, payload)
	if err != nil {
		s.deadLetter(s.core.EmitFailed(p, err.Error()), payload)
		return
	}
	if s.core.Open(springID, p, initXor, d, s.stamp) { // no acker tracks it
		s.src.Done(p.ID)
	}
}

// setNear tells the core which ackers the placement puts on this member,
// when the acker set or the cluster changed since it last did, or a
// second passed (the placement hears of a change in its own time): roots
// are then given to them where it can, so that their inits and
// completions and the acks of this member's tasks stay here.
func (s *spoutTask) setNear() {
	d, epoch := s.env.dir.Load(), s.env.epoch.Load()
	if d == s.nearOf && epoch == s.nearEpoch && s.stamp-s.nearAt < int64(time.Second) {
		return
	}
	s.nearOf, s.nearEpoch, s.nearAt = d, epoch, s.stamp
	var near []bool
	if o, ok := s.owners(); ok {
		near = nearAckers(d.Ackers, func(id string) string { return o.Owner(KindAcker, id) }, s.self.Address)
	}
	s.core.SetNear(near)
}

// owners is the placement's answer to who owns a grain, if it gives one.
func (s *spoutTask) owners() (grain.Owners, bool) {
	if s.res.c == nil {
		return nil, false
	}
	o, ok := s.res.c.IdentityLookup.(grain.Owners)
	return o, ok
}

// nearAckers says, by acker number, which of ackers owner puts at address
// self.
func nearAckers(ackers int, owner func(identity string) string, self string) []bool {
	near := make([]bool, ackers)
	for i := range near {
		near[i] = owner(tracker.AckerIdentity(i)) == self
	}
	return near
}

// setDeadline reads the clock once for a round of emissions: their time,
// from which their deadlines run.
func (s *spoutTask) setDeadline() { s.stamp = s.env.now().UnixNano() }

func (s *spoutTask) sendTuples(target uint32, b *messages.TupleBatch) {
	if p := s.res.get(s.env.topo.kindOf(target), s.env.topo.identity(target)); p != nil {
		sendTuples(s.root, s.self.Address, p, b, &s.env.recycle)
		return
	}
	s.env.log.Errorf("spout %s: no member hosts %s; their %d roots replay in %v", s.info.Component, s.env.topo.identity(target), len(b.AnchorCounts), undeliveredRetry)
	s.core.Hasten(b.SpringIds, s.env.now().Add(undeliveredRetry).UnixNano())
}

// deathSettles is how long after a member's death the roots a spout task
// opens get a deadline of undeliveredRetry: until every member knows of
// the death, what one sends the dead member is lost without an error.
const deathSettles = 5 * time.Second

// undeliveredRetry is how soon a root replays whose init or first tuples
// could not be delivered (no member hosts the task or acker for now, as
// while the cluster learns of a death): the placement has settled by then.
const undeliveredRetry = 2 * time.Second

// flush sends the inits first, so that they usually beat the acks.
func (s *spoutTask) flush() {
	s.core.Flush()
	outs := s.core.Ready()
	for _, o := range outs {
		if p := s.res.get(KindAcker, tracker.AckerIdentity(o.Acker)); p != nil {
			s.root.Send(p, o.Msg)
		} else {
			s.env.log.Errorf("spout %s: no member hosts %s; its roots replay in %v", s.info.Component, tracker.AckerIdentity(o.Acker), undeliveredRetry)
			s.core.Hasten(o.Msg.(*messages.Track).SpringIds, s.env.now().Add(undeliveredRetry).UnixNano())
		}
	}
	clear(outs) // sent: the core's buffer holds them no longer
	s.col.flush()
}

// settle delivers the core's verdicts on the roots it settled: a completed
// root is done at its source, a failed one replayed, handed back to its
// broker or dead-lettered. The caller set the stamp: the time of replays.
func (s *spoutTask) settle() {
	replayed := false
	for _, v := range s.settled {
		switch v.Verdict {
		case tracker.Done:
			s.src.Done(v.Root.ID)
		case tracker.Redeliver:
			s.redeliver(v.Root)
		case tracker.Replay, tracker.DeadLetter:
			replayed = s.reread(v) || replayed
		}
	}
	clear(s.settled)
	if replayed {
		s.flush()
	}
	s.refill()
}

// refill pulls again once the core says enough room is free, or to finish
// an exhausted source.
func (s *spoutTask) refill() {
	if s.core.WantsPull() {
		s.pull(false)
	}
}

// reread asks the source for a failed root's payload again, and replays
// or dead-letters the root as the core decides; true when it emitted the
// root again.
func (s *spoutTask) reread(v tracker.Settled) (emitted bool) {
	payload, err := s.src.Replay(v.Root.ID)
	got, why := tracker.Read, ""
	switch {
	case errors.Is(err, source.ErrReleased):
		s.env.log.Debugf("spout %s/%d: root %d: %v", s.info.Component, s.info.Index, v.Root.ID, err)
		got = tracker.Released
	case err != nil && v.Verdict == tracker.Replay: // its letter goes without a payload
		got, why, payload = tracker.Unreadable, err.Error(), ""
	case err != nil: // its letter goes with what the source kept, if anything
		got, why = tracker.Unreadable, err.Error()
	}
	v, ok := s.core.Reread(v, got, why)
	switch {
	case !ok:
		return false
	case v.Verdict == tracker.Replay:
		s.emit(v.Root, payload)
		return true
	}
	s.deadLetter(v, payload)
	return false
}

// redeliver leaves a failed root to its broker, which hands it out again
// through Next.
func (s *spoutTask) redeliver(p tracker.PendingRoot) {
	if err := s.src.(source.Redeliverer).Redeliver(p.ID, p.Attempt); err != nil {
		// The broker redelivers an unanswered root anyway, once its ack
		// wait is over (always so for a root this task took over from a
		// moved one, whose connection held it): it comes back all the same.
		s.env.log.Warnf("spout %s/%d: redelivering root %d: %v", s.info.Component, s.info.Index, p.ID, err)
	}
}

// deadLetter hands a root the core dead-lettered to the dead-letter sink,
// and is done with it at its source.
func (s *spoutTask) deadLetter(v tracker.Settled, payload string) {
	s.env.cfg.DeadLetters.DeadLetter(DeadLetter{Component: s.info.Component, Task: s.task, RootID: v.Root.ID,
		Payload: payload, Attempts: int(v.Root.Attempt) + 1, Reason: v.Reason})
	s.src.Done(v.Root.ID)
}

// askSplit asks the reporter for the next split while the source reads
// one, so that it has it before it needs it.
func (s *spoutTask) askSplit() {
	if s.shares == nil || s.asked || s.reporter == nil || s.finished || s.core.Ended() {
		return
	}
	last, ok := s.shares.Wants()
	if !ok {
		return
	}
	s.asked = true
	t := s.env.topo.tasks[s.task]
	s.root.Send(s.reporter, &messages.SplitRequest{Task: s.task, FirstTask: t.FirstTask, Parallel: uint32(s.info.Parallel),
		Splits: uint32(s.shares.NumSplits()), Last: int32(last), From: &messages.Pid{Address: s.self.Address, Id: s.self.Id}})
}

// granted hands the source the split the reporter granted, and pulls if
// the source was waiting for it (the pull the core queued comes later: it
// keeps the one chain of pulls). A refusal breaks the task: its roots in
// flight finish, and the run reports why.
func (s *spoutTask) granted(m *messages.SplitGrant) {
	if s.shares == nil || s.finished {
		return
	}
	if m.Error != "" {
		s.err = fmt.Sprintf("spout %s/%d: the run refused its split request: %s", s.info.Component, s.info.Index, m.Error)
		s.core.Broke()
		s.refill()
		return
	}
	s.shares.Grant(int(m.After), int(m.Split))
	s.asked = false
	if s.starved {
		s.starved = false
		s.pull(false)
	}
}

// tick fails roots past their own deadline (their acker may be gone),
// reports progress, and asks again for a split the source still wants: a
// request or its answer may have been lost.
func (s *spoutTask) tick() {
	s.asked = false
	s.askSplit()
	s.setDeadline()
	s.settled = s.core.Expire(s.stamp, s.settled[:0])
	s.settle()
	s.flush()
	s.report()
}

func (s *spoutTask) report() {
	if s.reporter == nil {
		return
	}
	r := s.snapshot()
	// A report of a task over a seekable source (a file, the generator)
	// carries a checkpoint, where it is and which roots are in flight:
	// should its member die, the task starts again elsewhere from there and
	// replays those roots, so a crash re-reads at most a report interval of
	// its input besides what was in flight. A broker's source keeps its own
	// committed position.
	if _, ok := s.src.(source.Seeker); ok && !s.finished {
		r.Checkpoint = s.state()
		r.Checkpoint.Checkpoint = true
	}
	s.root.Send(s.reporter, r)
}

func (s *spoutTask) snapshot() *messages.TaskReport {
	r := &messages.TaskReport{Task: s.task, Done: s.done, Error: s.err, Total: s.total, Started: s.opened, SharesSplits: s.shares != nil}
	if s.col != nil {
		r.Emitted = s.col.emitted
	}
	if s.core != nil { // activated as a spout task
		s.core.Report(r)
	}
	return r
}

func (s *spoutTask) maybeFinish() {
	if s.core.Finished() {
		s.finish()
	}
}

// finish drains the topology below this task and reports it done.
func (s *spoutTask) finish() {
	if s.finished {
		return
	}
	s.finished = true
	s.env.stages.source.dropBacklog(s.task)
	if s.col != nil {
		s.col.flush()
		sendDrains(s.env, s.task, &s.res, s.root, s.reporter)
	}
	if s.cancel != nil {
		s.cancel()
	}
	if s.src != nil { // done with it: closing commits what finished
		if err := s.src.Close(); err != nil {
			s.env.log.WithError(err).Warnf("spout %s/%d: closing its source", s.info.Component, s.info.Index)
		}
		s.src = nil
	}
	s.done = true
	s.report()
}

// sendDrains tells every task downstream of task that it will send no more.
func sendDrains(e *env, task uint32, res *resolver, root *actor.RootContext, reporter *actor.PID) {
	var rep *messages.Pid
	if reporter != nil {
		rep = &messages.Pid{Address: reporter.Address, Id: reporter.Id}
	}
	for _, o := range e.topo.tasks[task].outputs {
		for i := range o.to.Parallel {
			target := o.to.FirstTask + uint32(i)
			if p := res.get(e.topo.kindOf(target), e.topo.identity(target)); p != nil {
				root.Send(p, &messages.Drain{FromTask: task, Reporter: rep})
			} else {
				e.log.Errorf("task %d: no member hosts %s to drain", task, e.topo.identity(target))
			}
		}
	}
}
