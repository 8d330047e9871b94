package actors

import (
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/scheduler"

	"github.com/acktor/acktor/cluster/grain"
	"github.com/acktor/acktor/messages"
)

// KindStandby is the cluster kind of the counter tasks' standbys: a replica
// of each counter task on the member that takes the task over should its
// member die (the placement's runner-up), as Kafka Streams keeps standby
// replicas of its state stores. A counter task applies an input batch,
// sends it to its standby, which applies it too, and acks the batch's
// tuples only once the standby says it has: every update of a completed
// root is on two members. When the task's member dies, its new activation
// finds the standby beside it and takes its state over; the roots whose acks
// it held replay, and the exactly-once ids (part of the state) drop what
// the standby had applied already.
// It is grain.StandbyKind(KindCounter), spelled as a constant.
const KindStandby = KindCounter + "-standby"

// CounterTask is where a counter task lives, and its standby.
type CounterTask struct {
	Task    string `json:"task"`
	Member  string `json:"member"`
	Standby string `json:"standby,omitempty"` // "": no member to hold one (a cluster of one)
}

// CounterTasks says where every counter task and its standby live, as this
// member's placement sees the cluster; nil with a placement that does not
// tell.
func (rt *Runtime) CounterTasks(c *cluster.Cluster) []CounterTask {
	o, ok := c.IdentityLookup.(grain.Owners)
	if !ok {
		return nil
	}
	var out []CounterTask
	for task := range uint32(rt.env.topo.Tasks()) {
		if rt.env.topo.kindOf(task) == KindCounter {
			id := rt.env.topo.identity(task)
			out = append(out, CounterTask{Task: id, Member: o.Owner(KindCounter, id), Standby: o.Owner(KindStandby, id)})
		}
	}
	return out
}

// standbyTask is a counter task's standby: the same user code over the same
// input batches, whose tuples, acks and fails go nowhere.
type standbyTask struct {
	env    *env
	task   uint32
	info   TaskInfo
	user   Processor
	col    *Collector
	self   *actor.PID
	key    string // the task's identity, in env.standbys
	synced bool   // it holds the task's state: since a snapshot, every batch
	broken bool   // a part of the snapshot under way did not take
	ts     []Tuple
	c      *cluster.Cluster
}

// orphanGrace is how long a standby that the placement moved away stays,
// when this member is where the counter task goes next (its member died),
// for the task's new activation to take its state.
const orphanGrace = 30 * time.Second

// orphanDone ends an orphaned standby's wait.
type orphanDone struct{}

// promote is a counter task's new activation asking the standby beside it,
// on the same member, for its state.
type promote struct{}

// promoted answers promote: the standby's counter, nil if it holds none.
type promoted struct{ counter *Counter }

func (s *standbyTask) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *cluster.ClusterInit:
		s.init(ctx, m)
	case *messages.StandbyReset:
		s.reset()
	case *messages.CounterState:
		if c, ok := s.user.(counted); ok {
			if err := c.counter().adopt(m); err != nil {
				s.env.log.WithError(err).Errorf("standby of %s: a part of the counter task's state did not take; it holds none until the task sends it again", s.key)
				s.broken = true
			}
			s.synced = m.Last && !s.broken
		}
		if ctx.Sender() != nil {
			ctx.Respond(&messages.CounterState{})
		}
	case *messages.StandbyBatch:
		ctx.Respond(s.apply(m))
	case *promote:
		var out promoted
		if c, ok := s.user.(counted); ok && s.synced {
			out.counter = c.counter()
			s.reset() // the task's new activation owns it now
		}
		ctx.Respond(&out)
	case *grain.Moved: // another member is the runner-up now: the task syncs a standby there
		if m.Done != nil {
			m.Done()
		}
		// When the counter task's member died, this member is the task's
		// next: stay for its new activation to take the state.
		if o, ok := s.c.IdentityLookup.(grain.Owners); ok && s.synced && o.Owner(KindCounter, s.key) == s.c.ActorSystem.Address() {
			scheduler.NewTimerScheduler(ctx.ActorSystem().Root).SendOnce(orphanGrace, ctx.Self(), &orphanDone{})
			return
		}
		ctx.Stop(ctx.Self())
	case *orphanDone:
		ctx.Stop(ctx.Self())
	case *actor.Stopped:
		if s.key != "" {
			s.env.standbys.CompareAndDelete(s.key, s.self)
		}
	}
}

func (s *standbyTask) init(ctx actor.Context, m *cluster.ClusterInit) {
	task, err := s.env.topo.taskOf(m.Identity.Identity)
	if err != nil || s.env.topo.kindOf(task) != KindCounter {
		s.env.log.Errorf("standby: activated for %q, which is no counter task", m.Identity.Identity)
		return
	}
	s.task, s.info, s.self, s.key, s.c = task, s.env.topo.taskInfo(task), ctx.Self(), m.Identity.Identity, m.Cluster
	s.env.standbys.Store(s.key, s.self)
	s.reset()
}

// reset starts the standby afresh, holding no state.
func (s *standbyTask) reset() {
	s.synced, s.broken = false, false
	if s.key == "" {
		return
	}
	user, err := s.env.topo.tasks[s.task].make(s.info)
	if err != nil {
		s.env.log.WithError(err).Errorf("standby of %s", s.key)
		s.user = nil
		return
	}
	s.user = user
	s.col = newCollector(s.env, s.task, func(uint32, *messages.TupleBatch) {},
		func(int, *messages.AckBatch) {}, func(int, *messages.FailRoot) {})
	s.col.rejectOut = func(uint32, *messages.Rejected) {}
}

// apply applies a batch the counter task applied, if the standby holds its
// state; otherwise it asks for the state.
func (s *standbyTask) apply(m *messages.StandbyBatch) *messages.StandbyApplied {
	if !s.synced || s.user == nil {
		return &messages.StandbyApplied{Seq: m.Seq, NeedSnapshot: true}
	}
	ts, err := decode(m.Batch, s.ts, nil) // new arrays: a standby hands no batch back, so it would drain the pool
	if err != nil {
		s.env.log.WithError(err).Errorf("standby of %s: a malformed batch; asking for the state again", s.key)
		s.synced = false
		return &messages.StandbyApplied{Seq: m.Seq, NeedSnapshot: true}
	}
	for i := range ts {
		s.user.Process(&ts[i], s.col)
	}
	s.col.flush() // to nowhere: the counter task sends them
	s.ts = ts[:0]
	return &messages.StandbyApplied{Seq: m.Seq}
}

// replica is a counter task's side of its standby: the batches sent and
// the acks held until the standby has applied them.
type replica struct {
	pid       *actor.PID // the standby synced last; nil: none yet
	synced    bool       // pid holds the task's state
	seq       uint64     // the last batch sent
	held      []heldAcks // by seq
	capturing bool       // acks go to current, not to the ackers
	current   []ackTo    // the acks of the batch being applied
	retryAt   time.Time  // a sync that failed is tried again from then
	syncedAt  uint64     // seq when the standby was last synced
	epoch     uint64     // the membership change the standby was looked up at
	resolving bool       // a lookup is under way
	retrying  bool       // a standbyRetry is due
	none      bool       // no member holds a standby
}

// heldAcks are the acks of one batch.
type heldAcks struct {
	seq  uint64
	acks []ackTo
}

type ackTo struct {
	acker int
	m     *messages.AckBatch
}

// standbyWait bounds the standby's answer to a promote, and is how often a
// counter task sending its state looks whether the standby's member is
// still there.
const standbyWait = time.Second

// syncParts is how many parts of its state (256 KiB each) a counter task
// has on their way to its standby at once, so that the two members work
// on the state at the same time instead of in turn.
const syncParts = 4

// standbyPatience bounds the wait for a part's answer while the standby's
// member is in the membership: a part may take seconds on a loaded member
// (its table of millions of exactly-once ids growing), and a second's
// bound gave the sync up there and began it again, over and over. The
// task waits for nothing else meanwhile, queries included.
const standbyPatience = 30 * time.Second

// syncRetry is how long a counter task waits before it tries again to sync
// a standby that did not take its state (its member may be dying): its
// acks wait meanwhile, its batches do not.
const syncRetry = time.Second

// standby is the task's replica, ready to take the batch about to be
// applied; nil when the task is no counter or the cluster has no member to
// hold a standby (a cluster of one: nothing to fail over to). Where the
// standby lives is looked up aside, once per change of the membership: the
// lookup asks the runner-up's member, which may be the one that just died
// (seconds, until the membership says so), and the task goes on meanwhile,
// its acks held.
func (p *processorTask) standby() *replica {
	if _, ok := p.user.(counted); !ok || p.finished {
		return nil
	}
	if p.rep == nil {
		p.rep = &replica{epoch: ^uint64(0)}
	}
	rep := p.rep
	if e := p.env.epoch.Load(); e != rep.epoch && !rep.resolving {
		rep.epoch, rep.resolving = e, true
		c, id, self, root := p.res.c, p.env.topo.identity(p.task), p.self, p.root
		go func() {
			f := &standbyFound{}
			if o, ok := c.IdentityLookup.(grain.Owners); ok && o.Owner(KindStandby, id) == "" {
				f.none = true // no member to hold one
			} else if f.pid = c.Get(id, KindStandby); f.pid == nil {
				f.failed = true // its member did not answer: try again at the next change
			}
			root.Send(self, f)
		}()
	}
	if rep.none && !rep.resolving {
		return nil
	}
	if rep.pid != nil && !rep.synced && !p.env.now().Before(rep.retryAt) {
		p.sync(rep.pid)
	}
	return rep
}

// live says whether the member at addr is in this member's view.
func (p *processorTask) live(addr string) bool {
	for _, m := range p.res.c.MemberList.Members().Members() {
		if m.Address() == addr {
			return true
		}
	}
	return false
}

// standbyFound is where the task's standby lives now.
type standbyFound struct {
	pid    *actor.PID
	none   bool // no member holds one
	failed bool // the lookup failed
}

// found takes the lookup's answer: a standby elsewhere than the one synced
// gets the task's state; none, and the acks held go.
func (p *processorTask) found(m *standbyFound) {
	rep := p.rep
	if rep == nil {
		return
	}
	rep.resolving = false
	switch {
	case m.none:
		rep.pid, rep.synced, rep.none = nil, false, true
		p.releaseHeld(rep.seq) // nothing else will hold them
		return
	case m.failed:
		rep.epoch = ^uint64(0) // look again at the next batch, or when the retry is due
		p.armStandbyRetry()
		return
	}
	rep.none = false
	switch {
	case !m.pid.Equal(rep.pid):
		p.sync(m.pid)
	case !rep.synced && !p.env.now().Before(rep.retryAt): // the same one: not before a failed sync's retry
		p.sync(m.pid)
	}
}

// standbyRetry is a counter task's timer message: a lookup or sync of its
// standby failed, and no batch may come to try again (its acks held, the
// spouts wait at max pending).
type standbyRetry struct{}

// armStandbyRetry tries again after syncRetry, once at a time.
func (p *processorTask) armStandbyRetry() {
	if p.rep == nil || p.rep.retrying || p.root == nil {
		return
	}
	p.rep.retrying = true
	scheduler.NewTimerScheduler(p.root).SendOnce(syncRetry, p.self, &standbyRetry{})
}

// retryStandby looks the standby up or syncs it, as a batch would.
func (p *processorTask) retryStandby() {
	if p.rep == nil {
		return
	}
	p.rep.retrying = false
	if !p.rep.synced && p.res.c != nil {
		p.standby()
	}
}

// sync sends the standby the task's whole state, afresh, syncParts parts
// at a time. What the task applied so far is then on the standby: the
// acks held go out.
func (p *processorTask) sync(pid *actor.PID) {
	p.rep.pid, p.rep.synced = pid, false
	if !p.live(pid.Address) { // gone, or not yet seen: a part would wait for nothing
		p.rep.retryAt, p.rep.epoch = p.env.now().Add(syncRetry), ^uint64(0) // and look it up again
		p.armStandbyRetry()
		return
	}
	p.root.Send(pid, &messages.StandbyReset{})
	var err error
	var sent []*actor.Future // the parts not yet answered, oldest first
	live := func() bool { return p.live(pid.Address) }
	p.user.(counted).counter().export(counterStateBytes, func(st *messages.CounterState) {
		if err == nil && len(sent) == syncParts {
			err, sent = answered(sent[0], live, standbyWait), sent[1:]
		}
		if err == nil {
			sent = append(sent, p.root.RequestFuture(pid, st, standbyPatience))
		}
	})
	for _, f := range sent {
		if err == nil {
			err = answered(f, live, standbyWait)
		}
	}
	if err != nil { // it may have moved: look it up again too
		p.env.log.WithError(err).Warnf("counter %s/%d: sending its state to its standby; trying again with the next batch", p.info.Component, p.info.Index)
		p.rep.retryAt, p.rep.epoch = p.env.now().Add(syncRetry), ^uint64(0)
		p.armStandbyRetry()
		return
	}
	p.rep.synced, p.rep.syncedAt = true, p.rep.seq
	p.releaseHeld(p.rep.seq)
}

// answered waits for a part's answer while live says the standby's member
// is in this member's view, which it asks every interval.
func answered(f *actor.Future, live func() bool, every time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- f.Wait() }()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			if !live() {
				return errStandbyGone
			}
		}
	}
}

// errStandbyGone ends a sync whose standby's member left the view.
var errStandbyGone = errors.New("the standby's member left")

// replicate sends the batch just applied to the standby and holds its acks
// until the standby has applied it too.
func (p *processorTask) replicate(rep *replica, m *messages.TupleBatch) {
	rep.seq++
	rep.held = append(rep.held, heldAcks{seq: rep.seq, acks: rep.current})
	rep.current = nil
	if rep.synced {
		if rep.pid.Address != p.self.Address { // framed as a copy: tuples of the task may still point into m
			m = framed(m)
		}
		p.root.RequestWithCustomSender(rep.pid, &messages.StandbyBatch{Seq: rep.seq, Batch: m}, p.self)
	}
}

// applied hears the standby: the batches up to m.Seq are on it.
func (p *processorTask) applied(m *messages.StandbyApplied) {
	if p.rep == nil {
		return
	}
	if m.NeedSnapshot {
		if m.Seq > p.rep.syncedAt && p.rep.pid != nil { // not a batch sent before the last sync
			p.rep.synced = false
			if !p.env.now().Before(p.rep.retryAt) {
				p.sync(p.rep.pid) // now: the acks it holds would wait for the next batch
			}
		}
		return
	}
	p.releaseHeld(m.Seq)
}

// standbyLost hears that a batch found no standby where the task sends
// them: it moved (the runner-up changed) or its member left. The task
// looks it up again now rather than at the next change of the membership:
// the acks it holds wait for a standby that has its state.
func (p *processorTask) standbyLost() {
	rep := p.rep
	if rep == nil || rep.pid == nil || !rep.synced || rep.seq <= rep.syncedAt {
		return // a sync or a lookup is under way or due; or an answer to a batch sent before the last sync
	}
	rep.pid, rep.synced, rep.epoch = nil, false, ^uint64(0) // the lookup's answer gets the state
	if p.res.c != nil {
		p.standby()
	}
}

// releaseHeld sends the acks of the batches up to seq.
func (p *processorTask) releaseHeld(seq uint64) {
	if p.rep == nil {
		return
	}
	n := 0
	for _, h := range p.rep.held {
		if h.seq > seq {
			break
		}
		for _, a := range h.acks {
			p.toAcker(a.acker, a.m)
		}
		n++
	}
	p.rep.held = append(p.rep.held[:0], p.rep.held[n:]...)
}

// takeOver gives a counter task activated after its member died the state
// of its standby, if one is beside it on this member: the task's state as
// of the last batch the standby applied. It says whether it took one.
func (p *processorTask) takeOver() bool {
	if _, ok := p.user.(counted); !ok {
		return false
	}
	pid, ok := p.env.standbys.Load(p.env.topo.identity(p.task))
	if !ok {
		return false
	}
	res, err := p.root.RequestFuture(pid.(*actor.PID), &promote{}, standbyWait).Result()
	if err != nil {
		p.env.log.WithError(err).Errorf("counter %s/%d: taking over its standby's state; starting empty", p.info.Component, p.info.Index)
		return false
	}
	c := res.(*promoted).counter
	if c == nil {
		return false
	}
	p.user.(counted).counter().take(c)
	p.env.log.Warnf("counter %s/%d: started again from its standby's state (%d updates applied)", p.info.Component, p.info.Index, c.st.Applied)
	return true
}

// claimed is the answer to a counter task's claim: whether another member
// held an activation of it, which is moving here.
type claimed struct {
	moving bool
	err    error
}

// claim asks, aside, whether the member that held the task before this one
// joined holds it still, and has it move here; the input waits meanwhile.
// A member that joined is asked for a task by the members that know of it
// before the task's old member does: without the claim the two activations
// would both apply updates until the old one moves, and this one's would
// miss the old one's exactly-once ids and sketches (a value seen before,
// counted as new). Only when none holds it does the task take its
// standby's state (claimedBy): a standby beside an activation whose
// earlier one lives and moves here holds part of the state that comes,
// and the two would add up twice. It says whether it asked.
func (p *processorTask) claim() bool {
	if _, counter := p.user.(counted); !counter || !askClaim(p.res.c, p.root, p.self, KindCounter, p.env.topo.identity(p.task)) {
		return false
	}
	p.await() // the answer comes after this message
	return true
}

// askClaim asks aside, through c's placement, that another member holding
// the grain kind/id move it here; the answer comes to self as *claimed. It
// says whether it asked: not in a cluster of one, where no other member
// held it.
func askClaim(c *cluster.Cluster, root *actor.RootContext, self *actor.PID, kind, id string) bool {
	cl, ok := c.IdentityLookup.(grain.Claimer)
	if !ok || cl.Predecessor(kind, id) == "" {
		return false
	}
	go func() {
		moving, err := cl.Claim(kind, id)
		root.Send(self, &claimed{moving: moving, err: err})
	}()
	return true
}

// claimedBy goes on once a claim found no other activation: nothing will
// come to wait for, and the task starts from its standby's state if one is
// beside it (its earlier activation died). When one moves here, its state
// ends the wait.
func (p *processorTask) claimedBy(m *claimed) {
	switch {
	case m.err != nil:
		// The claim may still be acted on there: wait for the state, at
		// most MoveGrace, rather than run beside the old activation.
		p.env.log.WithError(m.err).Warnf("counter %s/%d: no answer from the member that held it before; waiting for its state at most %v", p.info.Component, p.info.Index, MoveGrace)
	case !m.moving && !p.incoming && p.awaiting:
		p.takeOver()
		p.release()
	}
}

// await holds the task's input until the state of its earlier activation
// is in, or MoveGrace has passed.
func (p *processorTask) await() {
	if _, ok := p.user.(counted); ok && !p.awaiting {
		p.awaiting = true
		p.waits++
		scheduler.NewTimerScheduler(p.root).SendOnce(MoveGrace, p.self, &stateLate{wait: p.waits})
	}
}
