package cluster

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acktor/acktor/cluster/grain"
	"github.com/acktor/acktor/internal/mix"
	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/asynkron/protoactor-go/remote"
)

// spread is the largest member's share over the mean.
func spread(counts map[string]int, members int) float64 {
	total, most := 0, 0
	for _, n := range counts {
		total += n
		most = max(most, n)
	}
	return float64(most) * float64(members) / float64(total)
}

// TestPlacementShare: three members on sequential ports, the identities
// acktor gives ackers and tasks. The library's rendezvous gives one member
// half of them; ours keeps every member within 10% of the mean.
func TestPlacementShare(t *testing.T) {
	for _, tc := range []struct {
		kind  string
		ids   func(n int) string
		count int
	}{
		{"acker", func(n int) string { return fmt.Sprintf("acker/%d", n) }, 3000},
		{"spout", func(n int) string { return fmt.Sprintf("lines/%d", n) }, 3000},
		{"processor", func(n int) string { return fmt.Sprintf("split/%d", n) }, 3000},
	} {
		for _, base := range []int32{9100, 7000, 43121} {
			var ms []*pcluster.Member
			for i := range int32(3) {
				ms = append(ms, &pcluster.Member{Host: "127.0.0.1", Port: base + i, Id: fmt.Sprint(i), Kinds: []string{tc.kind}})
			}
			ours, lib := map[string]int{}, map[string]int{}
			r, l := newRendezvous(ms), pcluster.NewRendezvous()
			l.UpdateMembers(ms)
			for n := range tc.count {
				ours[r.owner(tc.kind, tc.ids(n))]++
				lib[l.GetByClusterIdentity(&pcluster.ClusterIdentity{Kind: tc.kind, Identity: tc.ids(n)})]++
			}
			if s := spread(ours, 3); s > 1.1 || len(ours) != 3 {
				t.Errorf("%s, ports %d..: ours %v (max/mean %.3f)", tc.kind, base, ours, s)
			}
			t.Logf("%s, ports %d..%d: max/mean %.3f here, %.3f with disthash", tc.kind, base, base+2, spread(ours, 3), spread(lib, 3))
		}
	}
}

// TestPlacementMovesOnlyTheLeaversGrains: with one member gone, each
// identity changes owner only if the leaver owned it or, for a kind the
// placement deals out, it is among its component's first spreadRounds·m
// (m members that host the kind); always to a member that hosts the kind.
func TestPlacementMovesOnlyTheLeaversGrains(t *testing.T) {
	var ms []*pcluster.Member
	for i := range int32(4) {
		ms = append(ms, &pcluster.Member{Host: "127.0.0.1", Port: 9100 + i, Id: fmt.Sprint(i), Kinds: []string{"k", "dealt"}})
	}
	ms = append(ms, &pcluster.Member{Host: "127.0.0.1", Port: 9200, Id: "other", Kinds: []string{"other"}})
	all, less := newRendezvous(ms, "dealt"), newRendezvous(append(ms[1:4:4], ms[4]), "dealt")
	for _, kind := range []string{"k", "dealt"} {
		for _, ids := range []func(int) string{
			func(n int) string { return fmt.Sprintf("g/%d", n) },
			func(n int) string { return fmt.Sprintf("g-%d", n) }, // not component/index: scores alone
		} {
			dealtMoves := 0
			for n := range 2000 {
				id := ids(n)
				before, after := all.owner(kind, id), less.owner(kind, id)
				if before == "127.0.0.1:9200" || after == "127.0.0.1:9200" {
					t.Fatalf("%s placed on a member without its kind", id)
				}
				if before == after || before == ms[0].Address() {
					continue
				}
				if _, idx, ok := splitIdentity(id); kind != "dealt" || !ok || idx >= spreadRounds*4 {
					t.Fatalf("%s %s moved from %s to %s though %s stayed", kind, id, before, after, before)
				}
				dealtMoves++
			}
			t.Logf("%s %s…: %d of the first %d moved between members that stayed", kind, ids(0), dealtMoves, spreadRounds*4)
		}
	}
}

// TestPlacementSpreadsAComponent: a component of n tasks on m members
// that host its kind, whatever their ports: each member holds n/m of them,
// rounded down or up, while n <= spreadRounds·m. A kind that is not dealt
// (here counter tasks, with their standbys) is placed by scores alone.
func TestPlacementSpreadsAComponent(t *testing.T) {
	for m := 1; m <= 6; m++ {
		for _, base := range []int32{9100, 7000, 43121, 20011} {
			var ms []*pcluster.Member
			for i := range int32(m) {
				ms = append(ms, &pcluster.Member{Host: "127.0.0.1", Port: base + i, Id: fmt.Sprint(i),
					Kinds: []string{"processor", "counter", grain.StandbyKind("counter")}})
			}
			ms = append(ms, &pcluster.Member{Host: "127.0.0.1", Port: base + 50, Id: "client"}) // hosts no kind
			r := newRendezvous(ms, "processor")
			for n := 1; n <= spreadRounds*m; n++ {
				held := map[string]int{}
				for i := range n {
					id := fmt.Sprintf("split/%d", i)
					held[r.owner("processor", id)]++
					best, want := uint64(0), ""
					for _, x := range ms[:m] {
						if s := mix.Splitmix64(fnv64(id) ^ fnv64(x.Address())); want == "" || s > best {
							best, want = s, x.Address()
						}
					}
					if got := r.owner("counter", id); got != want {
						t.Fatalf("%d members from %d: counter %s on %s, its best score on %s", m, base, id, got, want)
					}
				}
				for addr, h := range held {
					if h < n/m || h > (n+m-1)/m || addr == ms[m].Address() {
						t.Fatalf("%d members from %d, %d tasks: %s holds %d (%v)", m, base, n, addr, h, held)
					}
				}
				if len(held) != min(n, m) {
					t.Fatalf("%d members from %d, %d tasks: on %d members (%v)", m, base, n, len(held), held)
				}
			}
		}
	}
}

type echoGrain struct{}

func (echoGrain) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*pcluster.ClusterIdentity); ok {
		ctx.Respond(&pcluster.ClusterIdentity{Identity: ctx.Self().Address})
	}
}

// TestPlacementLive: three in-process members with Placement; grains land
// on the members the rendezvous names, spread over all three, and calls
// from any member reach the same activation.
func TestPlacementLive(t *testing.T) {
	agent := test.NewInMemAgent()
	var cs []*pcluster.Cluster
	var wg sync.WaitGroup
	for range 3 {
		sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
			return slog.New(slog.NewTextHandler(io.Discard, nil))
		}))
		c := pcluster.New(sys, pcluster.Configure("p", test.NewTestProvider(agent), Placement(),
			remote.Configure("127.0.0.1", 0), pcluster.WithKinds(pcluster.NewKind("echo", actor.PropsFromProducer(func() actor.Actor { return echoGrain{} })))))
		cs = append(cs, c)
		wg.Add(1)
		go func() { defer wg.Done(); c.StartMember() }()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range cs {
			wg.Add(1)
			go func() { defer wg.Done(); c.Shutdown(false) }()
		}
		wg.Wait()
	})
	for deadline := time.Now().Add(10 * time.Second); cs[0].MemberList.Members().Len() != 3 || cs[2].MemberList.Members().Len() != 3; {
		if time.Now().After(deadline) {
			t.Fatal("members did not see each other")
		}
		time.Sleep(20 * time.Millisecond)
	}
	hosts := map[string]int{}
	for n := range 60 {
		id := fmt.Sprintf("g/%d", n)
		var where []string
		for _, c := range cs {
			res, err := c.Request(id, "echo", &pcluster.ClusterIdentity{})
			if err != nil {
				t.Fatalf("%s from %s: %v", id, c.ActorSystem.Address(), err)
			}
			where = append(where, res.(*pcluster.ClusterIdentity).Identity)
		}
		if where[0] != where[1] || where[1] != where[2] {
			t.Fatalf("%s answered from %v", id, where)
		}
		hosts[where[0]]++
	}
	if len(hosts) != 3 {
		t.Fatalf("60 grains on %d members: %v", len(hosts), hosts)
	}
}

// probe records the first message each activation hears besides its
// start, and moves by activating its successor and sending it "state".
type probe struct {
	first *sync.Map // address/id → message type
	heard bool
}

func (p *probe) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started, *pcluster.ClusterInit, *actor.Stopping, *actor.Stopped:
		return
	case *grain.Moved:
		if pid, err := m.Activate(); err == nil {
			ctx.Send(pid, &pcluster.ClusterIdentity{Identity: "state"})
		}
		if m.Done != nil {
			m.Done()
		}
		return
	}
	if !p.heard {
		p.heard = true
		p.first.Store(ctx.Self().Address+"/"+ctx.Self().Id, fmt.Sprintf("%T", ctx.Message()))
	}
	if _, ok := ctx.Message().(*pcluster.ClusterIdentity); ok && ctx.Sender() != nil {
		ctx.Respond(&pcluster.ClusterIdentity{Identity: ctx.Self().Address})
	}
}

// probes starts members of one in-memory cluster that host kind "probe"
// (recording in first) and, with a job, carry it.
type probes struct {
	t     *testing.T
	agent *test.InMemAgent
	first sync.Map
	left  sync.Map // the members that left (Leave shut them down)
}

func newProbes(t *testing.T) *probes { return &probes{t: t, agent: test.NewInMemAgent()} }

func (p *probes) start(job string) *pcluster.Cluster {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	kinds := []*pcluster.Kind{pcluster.NewKind("probe", actor.PropsFromProducer(func() actor.Actor { return &probe{first: &p.first} }))}
	if job != "" {
		kinds = append(kinds, pcluster.NewKind(JobKind(job), actor.PropsFromFunc(func(actor.Context) {})))
	}
	c := pcluster.New(sys, pcluster.Configure("p", test.NewTestProvider(p.agent), &placement{job: job},
		remote.Configure("127.0.0.1", 0), pcluster.WithKinds(kinds...)))
	c.StartMember()
	p.t.Cleanup(func() {
		if _, ok := p.left.Load(c); !ok {
			c.Shutdown(false)
		}
	})
	return c
}

// TestPlacementMovedGrainHearsIncomingFirst: a grain activated to take
// over a moved one hears grain.Incoming before anything else (before any
// member has its PID), so that it can hold its input until the old
// activation's state is in; a grain activated by a call does not.
func TestPlacementMovedGrainHearsIncomingFirst(t *testing.T) {
	p := newProbes(t)
	first, start := &p.first, func() *pcluster.Cluster { return p.start("") }
	a, _ := start(), start()
	for deadline := time.Now().Add(10 * time.Second); a.MemberList.Members().Len() != 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("members did not see each other")
		}
	}
	for n := range 60 {
		if _, err := a.Request(fmt.Sprintf("g/%d", n), "probe", &pcluster.ClusterIdentity{}); err != nil {
			t.Fatal(err)
		}
	}
	before := map[any]bool{} // activated by a call
	first.Range(func(k, _ any) bool { before[k] = true; return true })
	joiner := start()
	moved := 0
	for deadline := time.Now().Add(10 * time.Second); moved == 0 || time.Now().Before(deadline.Add(-8*time.Second)); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no grain moved to the member that joined")
		}
		moved = 0
		first.Range(func(k, v any) bool {
			if strings.HasPrefix(k.(string), joiner.ActorSystem.Address()+"/") {
				moved++
			}
			return true
		})
	}
	first.Range(func(k, v any) bool { // a grain moved between the first two is activated by a move too
		if want := map[bool]string{true: "*cluster.ClusterIdentity", false: "*grain.Incoming"}[before[k]]; v != want {
			t.Errorf("%s heard %s first, want %s", k, v, want)
		}
		return true
	})
	t.Logf("%d of 60 grains moved to the member that joined", moved)
}

// TestPlacementGrainComesBack: grains that moved to a member that joined
// move back when it leaves, to members whose placement still holds their
// old activation as a forwarder to it and still counts it a member while
// it evacuates: each is activated anew there (a forwarder would send the
// move back to the leaver, round and round), and answers from the members
// that stay once it has gone.
func TestPlacementGrainComesBack(t *testing.T) {
	p := newProbes(t)
	a, b := p.start(""), p.start("")
	for deadline := time.Now().Add(10 * time.Second); a.MemberList.Members().Len() != 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("members did not see each other")
		}
	}
	const grains = 40
	ask := func(n int) (string, error) {
		res, err := a.Request(fmt.Sprintf("g/%d", n), "probe", &pcluster.ClusterIdentity{}, pcluster.WithTimeout(3*time.Second))
		if err != nil {
			return "", err
		}
		return res.(*pcluster.ClusterIdentity).Identity, nil
	}
	for n := range grains {
		if _, err := ask(n); err != nil {
			t.Fatal(err)
		}
	}
	joiner := p.start("")
	on := func(c *pcluster.Cluster) (k int) {
		for n := range grains {
			if a.IdentityLookup.(*placement).Owner("probe", fmt.Sprintf("g/%d", n)) == c.ActorSystem.Address() {
				k++
			}
		}
		return k
	}
	for deadline := time.Now().Add(10 * time.Second); on(joiner) == 0 || a.MemberList.Members().Len() != 3; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no grain belongs to the member that joined")
		}
	}
	time.Sleep(500 * time.Millisecond) // the moves to it are done
	p.left.Store(joiner, true)
	Leave(joiner, 500*time.Millisecond)
	for deadline := time.Now().Add(10 * time.Second); a.MemberList.Members().Len() != 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the others still count the member that left")
		}
	}
	for n := range grains {
		at, err := ask(n)
		if err != nil || (at != a.ActorSystem.Address() && at != b.ActorSystem.Address()) {
			t.Fatalf("g/%d after the leave: answered from %q, %v", n, at, err)
		}
	}
}

// TestPlacementStandbyIsTheRunnerUp: a standby kind's grain lives on the
// member that owns the grain once its owner is gone, never on the owner;
// a single member has no standby.
func TestPlacementStandbyIsTheRunnerUp(t *testing.T) {
	kinds := []string{"counter", grain.StandbyKind("counter")}
	for members := 1; members <= 5; members++ {
		var ms []*pcluster.Member
		for i := range int32(members) {
			ms = append(ms, &pcluster.Member{Host: "127.0.0.1", Port: 9100 + i, Id: fmt.Sprint(i), Kinds: kinds})
		}
		r := newRendezvous(ms)
		for n := range 500 {
			id := fmt.Sprintf("zones/%d", n)
			owner, standby := r.owner("counter", id), r.owner(grain.StandbyKind("counter"), id)
			if members == 1 {
				if standby != "" {
					t.Fatalf("one member: standby of %s on %s", id, standby)
				}
				continue
			}
			var rest []*pcluster.Member
			for _, m := range ms {
				if m.Address() != owner {
					rest = append(rest, m)
				}
			}
			if next := newRendezvous(rest).owner("counter", id); standby == owner || standby != next {
				t.Fatalf("%d members: %s owned by %s, standby on %s, owner without it %s", members, id, owner, standby, next)
			}
		}
	}
}

// TestPlacementClaim: a member that claims a grain from the member that
// held it before it joined gets it moved over (it may be moving already),
// and the grain hears Incoming first there; every member's cache forgets
// the old PID. A claim of a grain the other member does not hold activates
// nothing and answers false, as does one the other member gives to a third
// (here, keeps), and one with no other member.
func TestPlacementClaim(t *testing.T) {
	p := newProbes(t)
	a := p.start("")
	cl := a.IdentityLookup.(grain.Claimer)
	if got := cl.Predecessor("probe", "g/0"); got != "" {
		t.Fatalf("a single member has a predecessor: %q", got)
	}
	if moving, err := cl.Claim("probe", "g/0"); moving || err != nil {
		t.Fatalf("a single member claimed: %v, %v", moving, err)
	}
	for n := range 40 { // on a, alone
		if _, err := a.Request(fmt.Sprintf("g/%d", n), "probe", &pcluster.ClusterIdentity{}); err != nil {
			t.Fatal(err)
		}
	}
	b := p.start("")
	for deadline := time.Now().Add(10 * time.Second); a.MemberList.Members().Len() != 2 || b.MemberList.Members().Len() != 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("members did not see each other")
		}
	}
	var mine, theirs []string // held on a, owned by b; held and owned by a
	for n := range 40 {
		if id := fmt.Sprintf("g/%d", n); Owner(a, "probe", id) == b.ActorSystem.Address() {
			mine = append(mine, id)
		} else {
			theirs = append(theirs, id)
		}
	}
	never := ""
	for n := 40; never == ""; n++ {
		if id := fmt.Sprintf("g/%d", n); Owner(a, "probe", id) == b.ActorSystem.Address() {
			never = id
		}
	}
	if len(mine) == 0 || len(theirs) == 0 {
		t.Fatalf("40 grains: %d go to b, %d stay on a", len(mine), len(theirs))
	}
	claimer := b.IdentityLookup.(grain.Claimer)
	if got := claimer.Predecessor("probe", mine[0]); got != a.ActorSystem.Address() {
		t.Fatalf("b's predecessor for %s: %q, want a, %s", mine[0], got, a.ActorSystem.Address())
	}
	old, _ := a.PidCache.Get(mine[0], "probe")
	for _, tc := range []struct {
		id     string
		moving bool
	}{{mine[0], true}, {never, false}, {theirs[0], false}} {
		if moving, err := claimer.Claim("probe", tc.id); moving != tc.moving || err != nil {
			t.Fatalf("claimed %s: %v, %v; want %v", tc.id, moving, err, tc.moving)
		}
	}
	if n := a.GetClusterKind("probe").Count(); n > 40 {
		t.Fatalf("a has %d probes after claims, more than the 40 it was asked for", n)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var v any // what the grain's activation on b heard first
		ok := false
		p.first.Range(func(k, val any) bool {
			if strings.HasPrefix(k.(string), b.ActorSystem.Address()+"/") && strings.Contains(k.(string), "/"+mine[0]+"$") {
				v, ok = val, true
			}
			return !ok
		})
		if ok && v == "*grain.Incoming" {
			break
		}
		if time.Now().After(deadline) || ok {
			t.Fatalf("%s on b heard first %v, want *grain.Incoming", mine[0], v)
		}
	}
	// The old PID, a forwarder now, leaves the caches, and calls reach
	// the grain on b; the one b could not claim stays on a.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if pid, ok := a.PidCache.Get(mine[0], "probe"); old == nil || !ok || !pid.Equal(old) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a still has the moved grain's old PID %v cached", old)
		}
	}
	for id, want := range map[string]string{mine[0]: b.ActorSystem.Address(), theirs[0]: a.ActorSystem.Address()} {
		res, err := b.Request(id, "probe", &pcluster.ClusterIdentity{})
		if err != nil || res.(*pcluster.ClusterIdentity).Identity != want {
			t.Fatalf("%s answered from %v (%v), want %s", id, res, err, want)
		}
	}
}

// TestPlacementOtherJobGetsNoGrain: a member that carries another job
// joins the cluster (it is refused only later) and is given none of the
// grains of the members already there, not even by a move.
func TestPlacementOtherJobGetsNoGrain(t *testing.T) {
	p := newProbes(t)
	start := p.start
	a, b := start("x"), start("x")
	for deadline := time.Now().Add(10 * time.Second); a.MemberList.Members().Len() != 2 || b.MemberList.Members().Len() != 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("members did not see each other")
		}
	}
	for n := range 60 {
		if _, err := a.Request(fmt.Sprintf("g/%d", n), "probe", &pcluster.ClusterIdentity{}); err != nil {
			t.Fatal(err)
		}
	}
	other := start("y")
	for deadline := time.Now().Add(10 * time.Second); a.MemberList.Members().Len() != 3 || b.MemberList.Members().Len() != 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the other job's member did not join")
		}
	}
	time.Sleep(time.Second) // a move would have begun by now
	for n := range 60 {
		if _, err := b.Request(fmt.Sprintf("g/%d", n), "probe", &pcluster.ClusterIdentity{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := other.GetClusterKind("probe").Count(); n != 0 {
		t.Fatalf("the member with another job holds %d of the job's grains, want 0", n)
	}
}

// TestEvacuateTellsEveryMember: when Evacuate returns, every other member
// has heard that the member evacuated, so none takes its leave for a
// death (grain.Deaths: its spout tasks would replay every root in flight);
// so has one that joins after.
func TestEvacuateTellsEveryMember(t *testing.T) {
	p := newProbes(t)
	leaver, b, c := p.start(""), p.start(""), p.start("")
	for deadline := time.Now().Add(10 * time.Second); b.MemberList.Members().Len() != 3 || leaver.MemberList.Members().Len() != 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("members did not see each other")
		}
	}
	addr := leaver.ActorSystem.Address()
	for _, m := range []*pcluster.Cluster{b, c} {
		if !m.IdentityLookup.(grain.Deaths).Died(addr) {
			t.Fatalf("%s takes %s for evacuated before it evacuated", m.ActorSystem.Address(), addr)
		}
	}
	began := time.Now()
	Evacuate(leaver)
	if took := time.Since(began); took > 2*time.Second { // every member answered: it waited out no timeout
		t.Errorf("Evacuate took %v", took)
	}
	for _, m := range []*pcluster.Cluster{b, c} {
		if m.IdentityLookup.(grain.Deaths).Died(addr) {
			t.Errorf("%s had not heard of the evacuation when Evacuate returned", m.ActorSystem.Address())
		}
		if pl := leaver.IdentityLookup.(*placement); !pl.told[m.ActorSystem.Address()] {
			t.Errorf("%s did not confirm it heard", m.ActorSystem.Address())
		}
	}
	// A member that joins while the leaver waits out its grace hears it
	// before the provider learns of the leave (Leave tells it).
	joiner := p.start("")
	for deadline := time.Now().Add(10 * time.Second); leaver.MemberList.Members().Len() != 4; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the leaver did not see the member that joined")
		}
	}
	if !joiner.IdentityLookup.(grain.Deaths).Died(addr) {
		t.Fatal("the member that joined heard of the evacuation before it was told")
	}
	leaver.IdentityLookup.(*placement).tellEvacuated(evacuateWait)
	if joiner.IdentityLookup.(grain.Deaths).Died(addr) {
		t.Errorf("the member that joined had not heard of the evacuation")
	}
}

// TestPlacementGrainMovedToADeadMember: a member whose grain moved to a
// member that has died since activates the grain afresh when asked, where
// it forwarded the request to the dead member (its old activation, here a
// probe that never stops, keeps the entry).
func TestPlacementGrainMovedToADeadMember(t *testing.T) {
	p := newProbes(t)
	a := p.start("")
	for n := range 40 { // on a, alone
		if _, err := a.Request(fmt.Sprintf("g/%d", n), "probe", &pcluster.ClusterIdentity{}); err != nil {
			t.Fatal(err)
		}
	}
	b := p.start("")
	var moved string
	for deadline := time.Now().Add(10 * time.Second); moved == ""; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no grain moved to the member that joined")
		}
		p.first.Range(func(k, _ any) bool {
			key := k.(string)
			if strings.HasPrefix(key, b.ActorSystem.Address()+"/") {
				for n := range 40 {
					if id := fmt.Sprintf("g/%d", n); strings.Contains(key, "/"+id+"$") {
						moved = id
					}
				}
			}
			return moved == ""
		})
	}
	p.left.Store(b, true)
	b.Shutdown(true) // leaves without handing its grains back: as if it died
	for deadline := time.Now().Add(10 * time.Second); a.MemberList.Members().Len() != 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a did not see b go")
		}
	}
	res, err := a.Request(moved, "probe", &pcluster.ClusterIdentity{}, pcluster.WithTimeout(3*time.Second))
	if err != nil || res.(*pcluster.ClusterIdentity).Identity != a.ActorSystem.Address() {
		t.Fatalf("%s, moved to b, which died: answered %v (%v), want an answer from a", moved, res, err)
	}
}
