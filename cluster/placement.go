package cluster

import (
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/eventstream"

	"github.com/acktor/acktor/cluster/grain"
	"github.com/acktor/acktor/internal/mix"
	"github.com/acktor/acktor/messages"
)

// Placement is acktor's identity lookup: Proto.Actor's disthash (rendezvous
// hashing of identities onto members, grains spawned by a placement actor
// on their owner) with a better hash, and moves instead of restarts: when a
// topology change gives a grain to another member, disthash poisons it and
// its next call starts it afresh there; Placement sends it grain.Moved, so
// that it hands its state to its new activation and passes on what still
// reaches it (acktor's tasks and ackers do). Leave (Node.Leave) moves every
// grain of a member that leaves before it goes. A component's first tasks
// are dealt out evenly over the members (rendezvous.pick). disthash scores a member with FNV-1a over identity+address,
// whose last bytes barely mix: with members on sequential ports (9100,
// 9101, 9102) one member took half of all identities (measured: 1496 of
// 3000 ackers, against 745 and 759). Here a member's score is
// splitmix64(fnv64(identity) ^ fnv64(address)), where every bit of both
// reaches every bit of the score. The rest follows disthash (Apache 2.0,
// github.com/asynkron/protoactor-go/cluster/identitylookup/disthash).
//
// The grains of the kinds in deal are dealt out instead (rendezvous.pick).
func Placement(deal ...string) pcluster.IdentityLookup { return &placement{deal: deal} }

// placementActorName is the name of each member's placement actor.
const placementActorName = "acktor-placement"

type placement struct {
	job   string   // the job this member carries, if any: place only on members that carry it
	deal  []string // the kinds whose grains are dealt out (Config.Deal)
	c     *pcluster.Cluster
	rdv   atomic.Pointer[rendezvous]
	actor *actor.PID
	sub   *eventstream.Subscription

	mu        sync.Mutex
	members   []*pcluster.Member   // as of the last topology
	gone      map[string]bool      // members that evacuated and are leaving
	evacuated map[string]time.Time // members that evacuated, kept a while after they left
	told      map[string]bool      // the members that heard this one evacuated (nil: it has not)
	diedAt    time.Time            // when a member last left without evacuating
}

// evacuate asks the placement actor to move every grain off this member;
// done is closed when they have handed their state over (or after a while).
type evacuate struct{ done chan struct{} }

// evacuateWait bounds how long a leaving member waits for its grains.
const evacuateWait = 10 * time.Second

// Evacuate moves every grain of this member to the member that owns it
// once this one is gone, waits until they have handed their state over,
// and tells the other members (MemberEvacuated), which then look grains up
// again rather than send here, and waits until each has heard. The member
// passes on activation requests and messages to the others from then on;
// call it just before leaving, and leave some time for stragglers: once a
// member has left, the others drop its messages.
func Evacuate(c *pcluster.Cluster) {
	p, ok := c.IdentityLookup.(*placement)
	if !ok {
		return
	}
	e := &evacuate{done: make(chan struct{})}
	c.ActorSystem.Root.Send(p.actor, e)
	select {
	case <-e.done:
	case <-time.After(evacuateWait + time.Second):
	}
	p.tellEvacuated(evacuateWait)
}

// tellEvacuated tells every member that has not heard yet that this one
// evacuated, and waits until each has heard it or wait has passed. A
// member that has not heard when this one leaves the member list takes the
// leave for a death (grain.Deaths), and its spout tasks replay every root
// in flight; a message sent without waiting may sit behind the traffic
// this member still passes on for longer than the leave's grace. Leave
// calls it again just before the provider learns of the leave, for the
// members that joined meanwhile.
func (p *placement) tellEvacuated(wait time.Duration) {
	c := p.c
	self := c.ActorSystem.Address()
	m := &messages.MemberEvacuated{Address: self}
	var to []string
	p.mu.Lock()
	first := p.told == nil
	if first {
		p.told = map[string]bool{}
	}
	for _, mb := range c.MemberList.Members().Members() {
		if a := mb.Address(); a != self && !p.told[a] {
			to = append(to, a)
		}
	}
	p.mu.Unlock()
	asked := make([]*actor.Future, len(to))
	for i, a := range to {
		asked[i] = c.ActorSystem.Root.RequestFuture(actor.NewPID(a, placementActorName), m, wait)
	}
	if first {
		c.ActorSystem.EventStream.Publish(m)
	}
	p.await(asked, to)
}

// await waits for the answers to tellEvacuated's requests, and stops
// waiting for members that leave meanwhile: a member that has gone does
// not answer, and needs no telling.
func (p *placement) await(asked []*actor.Future, to []string) {
	type answer struct {
		i   int
		err error
	}
	answers := make(chan answer, len(asked))
	for i, f := range asked {
		go func() {
			_, err := f.Result()
			answers <- answer{i, err}
		}()
	}
	answered := make([]bool, len(asked))
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for n := len(asked); n > 0; {
		select {
		case a := <-answers:
			answered[a.i], n = true, n-1
			if a.err != nil {
				p.c.Logger().Warn("placement: a member did not confirm the evacuation; it may take the leave for a death",
					slog.String("member", to[a.i]), slog.Any("error", a.err))
				continue
			}
			p.mu.Lock()
			p.told[to[a.i]] = true
			p.mu.Unlock()
		case <-tick.C:
			members := map[string]bool{}
			for _, m := range p.c.MemberList.Members().Members() {
				members[m.Address()] = true
			}
			gone := true
			for i, done := range answered {
				gone = gone && (done || !members[to[i]])
			}
			if gone {
				return
			}
		}
	}
}

func (p *placement) Setup(c *pcluster.Cluster, _ []string, _ bool) {
	p.c = c
	p.rdv.Store(&rendezvous{})
	props := actor.PropsFromProducer(func() actor.Actor {
		return &placementActor{p: p, grains: map[string]placed{}, left: map[string]placed{}}
	})
	p.actor, _ = c.ActorSystem.Root.SpawnNamed(props, placementActorName)
	p.gone, p.evacuated = map[string]bool{}, map[string]time.Time{}
	p.sub = c.ActorSystem.EventStream.Subscribe(func(ev any) {
		switch m := ev.(type) {
		case *pcluster.ClusterTopology:
			p.update(m.Members, "")
			c.ActorSystem.Root.Send(p.actor, m)
		case *messages.MemberEvacuated:
			if m.Address != c.ActorSystem.Address() {
				p.update(nil, m.Address)
			}
		case *pcluster.ActivationTerminated:
			// The grain stopped or moved: calls look it up again rather than
			// wait on a forwarder whose member may be dying.
			if m.ClusterIdentity != nil && m.Pid != nil {
				c.PidCache.RemoveByValue(m.ClusterIdentity.Identity, m.ClusterIdentity.Kind, m.Pid)
			}
		}
	})
}

// update recomputes the owners from the latest members (nil: unchanged)
// without those that evacuated: a member that has moved its grains away
// owns nothing more, though it stays in the topology until it is gone, and
// asking it for a grain after it stopped would fail.
func (p *placement) update(members []*pcluster.Member, evacuated string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if members != nil {
		in := map[string]bool{}
		for _, m := range members {
			in[m.Address()] = true
		}
		for _, m := range p.members {
			if _, left := p.evacuated[m.Address()]; !in[m.Address()] && !left {
				p.diedAt = time.Now()
			}
		}
		p.members = members
		for a := range p.gone { // it has left: forget it, an address may come back
			if !in[a] {
				delete(p.gone, a)
			}
		}
	}
	if evacuated != "" {
		p.gone[evacuated] = true
		p.evacuated[evacuated] = time.Now()
		for a, at := range p.evacuated {
			if time.Since(at) > evacuatedFor {
				delete(p.evacuated, a)
			}
		}
	}
	p.rdv.Store(newRendezvous(p.eligible(p.members, ""), p.deal...))
}

// eligible is ms but the member at skip, those that evacuated and those
// that carry another job: the members this one's grains may go to. A
// member started with another job joins the cluster before it is refused,
// and must get no grain of this one meanwhile. p.mu is held.
func (p *placement) eligible(ms []*pcluster.Member, skip string) []*pcluster.Member {
	var out []*pcluster.Member
	for _, m := range ms {
		if m.Address() != skip && !p.gone[m.Address()] && (p.job == "" || hasKind(m.Kinds, JobKind(p.job))) {
			out = append(out, m)
		}
	}
	return out
}

func (p *placement) Shutdown() {
	p.c.ActorSystem.EventStream.Unsubscribe(p.sub)
	if err := p.c.ActorSystem.Root.PoisonFuture(p.actor).Wait(); err != nil {
		p.c.Logger().Error("placement: stopping the placement actor", slog.Any("error", err))
	}
}

// Get asks the owner's placement actor for the grain, activating it there.
func (p *placement) Get(ci *pcluster.ClusterIdentity) *actor.PID {
	owner := p.rdv.Load().owner(ci.Kind, ci.Identity)
	if owner == "" {
		return nil
	}
	f := p.c.ActorSystem.Root.RequestFuture(actor.NewPID(owner, placementActorName),
		&pcluster.ActivationRequest{ClusterIdentity: ci}, 5*time.Second)
	res, err := f.Result()
	if err != nil {
		p.c.Logger().Warn("placement: activation failed", slog.String("identity", ci.Identity), slog.String("owner", owner), slog.Any("error", err))
		return nil
	}
	r, ok := res.(*pcluster.ActivationResponse)
	if !ok {
		return nil
	}
	return r.Pid
}

func (p *placement) RemovePid(ci *pcluster.ClusterIdentity, pid *actor.PID) {
	p.c.MemberList.BroadcastEvent(&pcluster.ActivationTerminated{Pid: pid, ClusterIdentity: ci}, true)
}

// rendezvous picks each identity's member: the highest score among the
// members that host its kind.
type rendezvous struct {
	members []rdvMember
	deal    []string
}

type rdvMember struct {
	addr  string
	seed  uint64
	kinds []string
}

func newRendezvous(ms []*pcluster.Member, deal ...string) *rendezvous {
	r := &rendezvous{deal: deal}
	for _, m := range ms {
		r.members = append(r.members, rdvMember{addr: m.Address(), seed: fnv64(m.Address()), kinds: m.Kinds})
	}
	return r
}

// owner is the member of kind's identity. That of a standby kind
// (StandbyKind) is the runner-up of its kind's identity: the member that
// owns the identity once its owner is gone, so that a grain's new activation
// finds its standby beside it; "" with a single member.
func (r *rendezvous) owner(kind, identity string) string { return r.ownerWithout(kind, identity, "") }

// ownerWithout is owner among the members but the one at skip.
func (r *rendezvous) ownerWithout(kind, identity, skip string) string {
	base, standby := grain.StandbyOf(kind)
	eligible := func(m rdvMember) bool {
		return m.addr != skip && hasKind(m.kinds, base) && (!standby || hasKind(m.kinds, kind))
	}
	deal := hasKind(r.deal, base)
	owner := r.pick(identity, deal, eligible)
	if !standby || owner == "" {
		return owner
	}
	return r.pick(identity, deal, func(m rdvMember) bool { return eligible(m) && m.addr != owner })
}

// pick is the member of identity among those eligible: the highest score;
// or, if deal, for one of a component's first spreadRounds·m identities
// (m eligible members; identities component/0, component/1, …, as acktor
// names its tasks and ackers), the highest score among the members that
// hold fewest of the identities before it. Scores alone put a small
// component's tasks unevenly: three tasks on three members all land apart
// only 2 times in 9.
func (r *rendezvous) pick(identity string, deal bool, eligible func(rdvMember) bool) string {
	m := 0
	for _, x := range r.members {
		if eligible(x) {
			m++
		}
	}
	comp, idx, ok := splitIdentity(identity)
	if !deal || !ok || idx >= spreadRounds*m {
		best, owner := uint64(0), ""
		h := fnv64(identity)
		for _, x := range r.members {
			if s := mix.Splitmix64(h ^ x.seed); eligible(x) && (owner == "" || s > best) {
				best, owner = s, x.addr
			}
		}
		return owner
	}
	held := make([]int, len(r.members))
	owner := -1
	for j := 0; j <= idx; j++ {
		h := fnv64(comp + "/" + strconv.Itoa(j))
		best := uint64(0)
		owner = -1
		for k, x := range r.members {
			s := mix.Splitmix64(h ^ x.seed)
			if eligible(x) && (owner < 0 || held[k] < held[owner] || held[k] == held[owner] && s > best) {
				owner, best = k, s
			}
		}
		held[owner]++
	}
	return r.members[owner].addr
}

// spreadRounds is how many identities of a component each member gets in
// turn before scores alone place the rest: enough for the tasks of most
// components, few enough that a change of members moves at most
// spreadRounds·m identities of a component that its leaver did not hold.
const spreadRounds = 2

// splitIdentity splits an identity of the form component/index, the index
// written as strconv.Itoa does.
func splitIdentity(id string) (comp string, idx int, ok bool) {
	i := strings.LastIndexByte(id, '/')
	if i < 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(id[i+1:])
	if err != nil || n < 0 || strconv.Itoa(n) != id[i+1:] {
		return "", 0, false
	}
	return id[:i], n, true
}

// has says whether the member at addr is among r's.
func (r *rendezvous) has(addr string) bool {
	for _, m := range r.members {
		if m.addr == addr {
			return true
		}
	}
	return false
}

// isMember says whether addr is in the latest topology.
func (p *placement) isMember(addr string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.members {
		if m.Address() == addr {
			return true
		}
	}
	return false
}

// Owner is where identity of kind lives (grain.Owners).
func (p *placement) Owner(kind, identity string) string { return p.rdv.Load().owner(kind, identity) }

// Predecessor implements grain.Claimer.
func (p *placement) Predecessor(kind, identity string) string {
	return p.rdv.Load().ownerWithout(kind, identity, p.c.ActorSystem.Address())
}

// claimWait bounds a claim's round trip: the grain's input waits for it.
const claimWait = 2 * time.Second

// Claim implements grain.Claimer: it asks every other member that hosts
// kind, since the one that holds the grain need not be the Predecessor
// when several members came and went. A member that does not answer and
// has left the cluster since holds none.
func (p *placement) Claim(kind, identity string) (bool, error) {
	r, self := p.rdv.Load(), p.c.ActorSystem.Address()
	base, _ := grain.StandbyOf(kind)
	type asked struct {
		addr string
		f    *actor.Future
	}
	var all []asked
	for _, m := range r.members {
		if m.addr != self && hasKind(m.kinds, base) {
			all = append(all, asked{m.addr, p.c.ActorSystem.Root.RequestFuture(actor.NewPID(m.addr, placementActorName),
				&pcluster.ActivationRequest{ClusterIdentity: pcluster.NewClusterIdentity(identity, kind), RequestId: grain.ClaimRequest}, claimWait)})
		}
	}
	moving, prev := false, r.ownerWithout(kind, identity, self)
	var failed error
	for _, a := range all {
		res, err := a.f.Result()
		switch {
		case err != nil && !p.rdv.Load().has(a.addr): // it left meanwhile (died): it holds nothing now
		case err != nil && a.addr == prev: // the likeliest holder: its answer is awaited
			failed = fmt.Errorf("claiming %s from %s: %w", identity, a.addr, err)
		case err != nil: // another rarely holds one: one slow member must not hold every task's input
			p.c.Logger().Warn("placement: a claim went unanswered", slog.String("identity", identity), slog.String("member", a.addr), slog.Any("error", err))
		default:
			r, ok := res.(*pcluster.ActivationResponse)
			moving = moving || ok && r.Pid != nil
		}
	}
	if moving {
		return true, nil
	}
	return false, failed
}

func hasKind(kinds []string, k string) bool {
	for _, x := range kinds {
		if x == k {
			return true
		}
	}
	return false
}

func fnv64(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}

// placed is a grain this member activated.
type placed struct {
	id      *pcluster.ClusterIdentity
	pid     *actor.PID
	movedTo string // the member it moved to; it only passes messages on now
}

// placementActor spawns the grains this member owns and moves those a
// topology change gives to another member.
type placementActor struct {
	p       *placement
	grains  map[string]placed // by ClusterIdentity.AsKey()
	left    map[string]placed // by PID.Id: moved-off activations of grains that came back since
	leaving *rendezvous       // the members but this one, once it evacuates
}

func (a *placementActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *pcluster.ActivationRequest:
		a.activate(ctx, m)
	case *actor.Terminated:
		a.terminated(m.Who)
	case *pcluster.ClusterTopology:
		a.rebalance(ctx, m)
	case *evacuate:
		a.evacuate(ctx, m)
	case *messages.MemberEvacuated: // from a member that leaves (placement.tellEvacuated)
		ctx.ActorSystem().EventStream.Publish(m)
		ctx.Respond(m)
	case *actor.Stopping:
		for _, g := range a.grains {
			if g.movedTo == "" { // forwarders pass messages on until the member's endpoint closes
				_ = ctx.PoisonFuture(g.pid).Wait()
			}
		}
	}
}

func (a *placementActor) activate(ctx actor.Context, m *pcluster.ActivationRequest) {
	key := m.ClusterIdentity.AsKey()
	g, ok := a.grains[key]
	if ok && g.movedTo != "" && a.leaving == nil && m.RequestId == grain.MovedRequest {
		// It moved off and now moves back (members came and went): a new
		// activation takes it, where forwarding would send the request to
		// the member that moves it here, maybe before this member has seen
		// why (a member that evacuates moves its grains first and tells the
		// others after). The old one passes on its stragglers until it
		// stops. Only a move says so: the old one may still work if its
		// move failed, and a call must not start a second one beside it.
		a.left[g.pid.Id] = g
		delete(a.grains, key)
		g, ok = placed{}, false
	}
	if ok && g.movedTo != "" && a.leaving == nil && !a.p.isMember(g.movedTo) {
		// It moved to a member that has left since: what is forwarded there
		// is lost (a standby that stays for its task's takeover, and a
		// forwarder, keep the entry for seconds). A new activation takes it
		// here, as one would on the member that owns it after a death.
		a.left[g.pid.Id] = g
		delete(a.grains, key)
		g, ok = placed{}, false
	}
	switch {
	case m.RequestId == grain.ClaimRequest:
		a.claimed(ctx, key, g, ok)
		return
	case ok && g.movedTo != "": // asked by a member that has not seen the move
		ctx.Forward(actor.NewPID(g.movedTo, placementActorName))
		return
	case ok:
		if m.RequestId == grain.MovedRequest { // activated by another's request first: the state still follows
			ctx.Send(g.pid, &grain.Incoming{})
		}
		ctx.Respond(&pcluster.ActivationResponse{Pid: g.pid})
		return
	case a.leaving != nil:
		if owner := a.leaving.owner(m.ClusterIdentity.Kind, m.ClusterIdentity.Identity); owner != "" {
			ctx.Forward(actor.NewPID(owner, placementActorName))
			return
		}
	}
	kind := a.p.c.GetClusterKind(m.ClusterIdentity.Kind)
	if kind == nil {
		ctx.Logger().Error("placement: unknown kind", slog.String("kind", m.ClusterIdentity.Kind))
		ctx.Respond(&pcluster.ActivationResponse{Failed: true})
		return
	}
	pid := ctx.SpawnPrefix(pcluster.WithClusterIdentity(kind.Props, m.ClusterIdentity), m.ClusterIdentity.Identity)
	if m.RequestId == grain.MovedRequest { // before anyone has its PID: the grain's first message
		ctx.Send(pid, &grain.Incoming{})
	}
	kind.Inc()
	a.grains[key] = placed{id: m.ClusterIdentity, pid: pid}
	ctx.Respond(&pcluster.ActivationResponse{Pid: pid})
}

// claimed answers a claim from a member that activated the grain at key
// before this one learned it joined: the activation here (g, if ok) moves
// there at once, so that only one takes input; Failed when none is here,
// or when it goes to another member.
func (a *placementActor) claimed(ctx actor.Context, key string, g placed, ok bool) {
	claimer := ""
	if ctx.Sender() != nil {
		claimer = ctx.Sender().Address
	}
	r := a.p.rdv.Load()
	switch {
	case !ok || claimer == "" || claimer == a.p.c.ActorSystem.Address() || (g.movedTo != "" && g.movedTo != claimer):
		ctx.Respond(&pcluster.ActivationResponse{Failed: true})
		return
	case g.movedTo == "" && r.has(claimer) && r.owner(g.id.Kind, g.id.Identity) != claimer:
		// This member knows the claimer and gives the grain to another: the
		// claimer's view is behind, and the grain would only come back.
		ctx.Respond(&pcluster.ActivationResponse{Failed: true})
		return
	case g.movedTo == "":
		a.move(ctx, key, g, claimer, nil)
	}
	ctx.Respond(&pcluster.ActivationResponse{Pid: g.pid})
}

func (a *placementActor) terminated(who *actor.PID) {
	if g, ok := a.left[who.Id]; ok && g.pid.Equal(who) {
		delete(a.left, who.Id)
		if kind := a.p.c.GetClusterKind(g.id.Kind); kind != nil {
			kind.Dec()
		}
		a.p.c.MemberList.BroadcastEvent(&pcluster.ActivationTerminated{Pid: who, ClusterIdentity: g.id}, true)
		return
	}
	for key, g := range a.grains {
		if g.pid.Equal(who) {
			if kind := a.p.c.GetClusterKind(g.id.Kind); kind != nil {
				kind.Dec()
			}
			a.p.c.MemberList.BroadcastEvent(&pcluster.ActivationTerminated{Pid: who, ClusterIdentity: g.id}, true)
			delete(a.grains, key)
			return
		}
	}
}

func (a *placementActor) rebalance(ctx actor.Context, _ *pcluster.ClusterTopology) {
	if a.leaving != nil {
		return // everything has moved already
	}
	// The subscription updated the owners before it passed t on.
	r := a.p.rdv.Load()
	me := a.p.c.ActorSystem.Address()
	for key, g := range a.grains {
		if owner := r.owner(g.id.Kind, g.id.Identity); owner != me && g.movedTo == "" && owner != "" {
			a.move(ctx, key, g, owner, nil)
		}
	}
}

// move tells a grain that owner holds its identity now.
func (a *placementActor) move(ctx actor.Context, key string, g placed, owner string, done func()) {
	g.movedTo = owner
	a.grains[key] = g
	root, id := a.p.c.ActorSystem.Root, g.id
	activate := func() (*actor.PID, error) {
		res, err := root.RequestFuture(actor.NewPID(owner, placementActorName),
			&pcluster.ActivationRequest{ClusterIdentity: id, RequestId: grain.MovedRequest}, 5*time.Second).Result()
		if err != nil {
			return nil, err
		}
		r, ok := res.(*pcluster.ActivationResponse)
		if !ok || r.Pid == nil {
			return nil, fmt.Errorf("activating %s on %s: %v", id.Identity, owner, res)
		}
		return r.Pid, nil
	}
	ctx.Send(g.pid, &grain.Moved{Activate: activate, Done: done})
	// Its PID only passes messages on now: every member's cache drops it.
	a.p.c.MemberList.BroadcastEvent(&pcluster.ActivationTerminated{Pid: g.pid, ClusterIdentity: g.id}, true)
}

// evacuate moves every grain to the member that owns it without this one.
func (a *placementActor) evacuate(ctx actor.Context, e *evacuate) {
	a.p.mu.Lock()
	a.leaving = newRendezvous(a.p.eligible(a.p.c.MemberList.Members().Members(), a.p.c.ActorSystem.Address()), a.p.deal...)
	a.p.mu.Unlock()
	var wg sync.WaitGroup
	for key, g := range a.grains {
		owner := a.leaving.owner(g.id.Kind, g.id.Identity)
		if g.movedTo != "" || owner == "" {
			continue // moved already; or no other member hosts its kind
		}
		wg.Add(1)
		var once sync.Once
		a.move(ctx, key, g, owner, func() { once.Do(wg.Done) })
	}
	go func() {
		defer close(e.done)
		waited := make(chan struct{})
		go func() { wg.Wait(); close(waited) }()
		select {
		case <-waited:
		case <-time.After(evacuateWait):
			a.p.c.Logger().Warn("placement: grains still moving after the wait; leaving anyway")
		}
	}()
}

// Owner is the address of the member that owns identity of kind as this
// member's placement sees the cluster now (without the members that
// evacuated); "" when no member hosts kind, or c places grains otherwise.
// Every member computes the same owner once their views of the membership
// agree, which makes it an election: the owner of a fixed identity leads.
func Owner(c *pcluster.Cluster, kind, identity string) string {
	p, ok := c.IdentityLookup.(*placement)
	if !ok {
		return ""
	}
	return p.Owner(kind, identity)
}

// JobKind is the kind a member that carries job registers (never
// activated): the members' kinds tell who carries which job.
func JobKind(job string) string { return "job-" + job }

// JobOf is the job a member carries, from its kinds; "" for none.
func JobOf(m *pcluster.Member) string {
	for _, k := range m.Kinds {
		if j, ok := strings.CutPrefix(k, "job-"); ok {
			return j
		}
	}
	return ""
}

// LastDeath implements grain.Deaths.
func (p *placement) LastDeath() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.diedAt
}

// evacuatedFor is how long a member that evacuated is remembered after it
// left: a leave is told from a death for that long.
const evacuatedFor = time.Minute

// Died implements grain.Deaths: the member at addr, which left the
// cluster, did not evacuate its grains first (as this member's placement
// heard, within the last minute).
func (p *placement) Died(addr string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, left := p.evacuated[addr]
	return !left && addr != p.c.ActorSystem.Address()
}
