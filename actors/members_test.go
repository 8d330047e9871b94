package actors

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"

	"github.com/acktor/acktor/messages"
	"github.com/acktor/acktor/source"
	"github.com/acktor/acktor/window"
)

// member is one in-process cluster member with its own runtime.
type member struct {
	rt *Runtime
	c  *cluster.Cluster
}

// startMembers starts n members on one in-memory agent, each with a runtime
// of its own over build(); member 0 hosts every kind (it keeps the
// counters), the others the worker kinds.
func startMembers(t *testing.T, n int, cfg Config, build func() *Topology) (*test.InMemAgent, []member) {
	t.Helper()
	agent := test.NewInMemAgent()
	ms := make([]member, n)
	var wg sync.WaitGroup
	for i := range ms {
		ms[i] = newMember(t, agent, cfg, build, i == 0)
		wg.Go(ms[i].c.StartMember)
	}
	wg.Wait()
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, m := range ms {
			if agentHas(agent, m.c) { // a killed member is shut down already
				wg.Go(func() { m.c.Shutdown(false) })
			}
		}
		wg.Wait()
	})
	waitMembers(t, ms)
	return agent, ms
}

// newMember makes a member on agent, not started yet: with every kind or
// the worker kinds.
func newMember(t *testing.T, agent *test.InMemAgent, cfg Config, build func() *Topology, all bool) member {
	t.Helper()
	rt, err := New(build(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	kinds := rt.WorkerKinds()
	if all {
		kinds = rt.Kinds()
	}
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	c := cluster.New(sys, cluster.Configure("m", test.NewTestProvider(agent), disthash.New(),
		remote.Configure("127.0.0.1", 0), cluster.WithKinds(kinds...)))
	return member{rt, c}
}

// join starts a worker member on agent, shut down when the test ends.
func join(t *testing.T, agent *test.InMemAgent, cfg Config, build func() *Topology) member {
	t.Helper()
	m := newMember(t, agent, cfg, build, false)
	m.c.StartMember()
	t.Cleanup(func() { m.c.Shutdown(false) })
	return m
}

// waitMembers waits until every member sees all of them.
func waitMembers(t *testing.T, ms []member) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, m := range ms {
		for m.c.MemberList.Members().Len() != len(ms) {
			if time.Now().After(deadline) {
				t.Fatalf("members did not see each other")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func agentHas(agent *test.InMemAgent, c *cluster.Cluster) bool {
	for _, s := range agent.GetStatusHealth() {
		if s.ID == c.ActorSystem.ID {
			return true
		}
	}
	return false
}

// memberWordCount is lines -> split -> a counter component of 4 tasks.
func memberWordCount(lines []string, count CounterOptions) func() *Topology {
	return func() *Topology {
		var b Builder
		var mu sync.Mutex
		b.Spout("lines", 3, func(task, tasks int) (source.Source, error) {
			var mine []string
			for i := task; i < len(lines); i += tasks {
				mine = append(mine, lines[i])
			}
			return &memSource{lines: mine, mu: &mu, done: map[uint64]int{}}, nil
		})
		b.Processor("split", 4, func(TaskInfo) (Processor, error) {
			return procFunc(func(t *Tuple, c *Collector) {
				for _, w := range strings.Fields(t.Values()[0]) {
					_ = c.Emit([]*Tuple{t}, w)
				}
				c.Ack(t)
			}), nil
		}).Shuffle("lines")
		b.Counter("count", 4, count, nil).Fields("split", 0)
		topo, err := b.Build()
		if err != nil {
			panic(err)
		}
		return topo
	}
}

// spoutHost is the cluster of the first of candidates that hosts a spout
// task, as the driver sees it, or of the last one: killing it makes a spout
// start again elsewhere.
func spoutHost(driver member, candidates []member) *cluster.Cluster {
	topo := driver.rt.env.topo
	for _, m := range candidates {
		for task := range uint32(topo.Tasks()) {
			if topo.kindOf(task) != KindSpout {
				continue
			}
			if p := driver.c.Get(topo.identity(task), KindSpout); p != nil && p.Address == m.c.ActorSystem.Address() {
				return m.c
			}
		}
	}
	return candidates[len(candidates)-1].c
}

func randomLines(seed uint64, n int) ([]string, map[string]int64) {
	rng := rand.New(rand.NewPCG(seed, seed))
	vocab := strings.Fields("alpha beta gamma delta eps zeta eta theta iota kappa")
	truth := map[string]int64{}
	lines := make([]string, n)
	for i := range lines {
		var ws []string
		for range 1 + rng.IntN(6) {
			w := vocab[rng.IntN(len(vocab))]
			ws = append(ws, w)
			truth[w]++
		}
		lines[i] = strings.Join(ws, " ")
	}
	return lines, truth
}

// TestThreeMembers runs a word count over three members: tasks spread over
// them, messages cross members as protobuf, the counters stay on member 0,
// and the counts are exact.
func TestThreeMembers(t *testing.T) {
	lines, truth := randomLines(4, 20_000)
	cfg := DefaultConfig()
	cfg.Ackers, cfg.Log = 4, quietLog()
	_, ms := startMembers(t, 3, cfg, memberWordCount(lines, CounterOptions{Value: -1}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := ms[0].rt.Run(ctx, ms[0].c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Completed != uint64(len(lines)) || st.Replayed != 0 {
		t.Fatalf("%d of %d lines completed, %d replayed", st.Completed, len(lines), st.Replayed)
	}
	got := map[string]int64{}
	for _, e := range st.Counters["count"].Top {
		got[e.Key] = int64(e.Count)
	}
	for w, n := range truth {
		if got[w] != n {
			t.Fatalf("%s counted %d, truth %d", w, got[w], n)
		}
	}
	hosts := map[string]int{}
	topo := ms[0].rt.env.topo
	for task := range uint32(topo.Tasks()) {
		if p := ms[0].c.Get(topo.identity(task), topo.kindOf(task)); p != nil {
			hosts[p.Address]++
			if topo.kindOf(task) == KindCounter && p.Address != ms[0].c.ActorSystem.Address() {
				t.Errorf("counter task %s placed on %s, not on member 0", topo.identity(task), p.Address)
			}
		}
	}
	if len(hosts) < 2 { // 11 tasks on 3 members: all 3 only ~95% of the time
		t.Errorf("tasks placed on %d members: %v; messages never crossed members", len(hosts), hosts)
	}
}

// TestMemberLost kills a worker member in the middle of a word count: its
// spout tasks start again elsewhere, the roots its processors and ackers
// held replay, and every line completes; the counts are at least the truth,
// and exactly the truth with exactly-once, also in a window, where the
// restarted spouts stamp the lines they read again with new times.
func TestMemberLost(t *testing.T) {
	for _, tc := range []struct {
		name  string
		count CounterOptions
		exact bool
	}{
		{"at least once", CounterOptions{Value: -1}, false},
		{"exactly once in a window", CounterOptions{Value: -1, ExactlyOnce: true,
			Window: window.Config{Size: 10 * time.Minute, Pane: 50 * time.Millisecond}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines, truth := randomLines(5, 200_000)
			cfg := DefaultConfig()
			cfg.Ackers, cfg.Log, cfg.Timeout, cfg.MaxPending, cfg.MaxReplays = 4, quietLog(), time.Second, 512, 20
			agent, ms := startMembers(t, 3, cfg, memberWordCount(lines, tc.count))
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			var once sync.Once
			killed := make(chan struct{})
			st, err := ms[0].rt.Run(ctx, ms[0].c, func(p Progress) {
				if p.Completed > uint64(len(lines))/20 {
					once.Do(func() {
						victim := spoutHost(ms[0], ms[1:])
						agent.DeregisterService(victim.ActorSystem.ID)
						go func() { victim.Shutdown(false); close(killed) }()
					})
				}
			})
			<-killed
			if err != nil {
				t.Fatal(err)
			}
			if st.Completed < uint64(len(lines)) || st.DeadLettered != 0 {
				t.Fatalf("%d of %d lines completed, %d dead-lettered", st.Completed, len(lines), st.DeadLettered)
			}
			got := map[string]int64{}
			for _, e := range st.Counters["count"].Top {
				got[e.Key] = int64(e.Count)
			}
			for w, n := range truth {
				if got[w] < n || (tc.exact && got[w] != n) {
					t.Fatalf("%s counted %d, truth %d (%d duplicates dropped)", w, got[w], n, st.Counters["count"].Duplicates)
				}
			}
			t.Logf("%d lines, %d roots emitted, %d replayed, %d timed out, %d duplicates dropped, in %v",
				len(lines), st.Roots, st.Replayed, st.TimedOut, st.Counters["count"].Duplicates, st.Elapsed)
		})
	}
}

// TestSetAckersThenJoin: the acker set grows from 1 to 8 before the run,
// while members 1 and 2 host no acker (they never hear of it), and a member
// joins with the set of its config. Ackers and tasks on all of them route
// by the new set once the run announces it (and learn it from the first
// message of a member that knows it): no root's record splits between two
// ackers, so nothing times out.
func TestSetAckersThenJoin(t *testing.T) {
	lines, truth, build, cfg := exactWordCount(7, 1)
	agent, ms := startMembers(t, 3, cfg, build)
	if err := ms[0].rt.SetAckers(context.Background(), ms[0].c, 8); err != nil {
		t.Fatal(err)
	}
	joiner := join(t, agent, cfg, build)
	ms = append(ms, joiner)
	waitMembers(t, ms)
	if v, n := joiner.rt.AckerSet(); v != 1 || n != 1 {
		t.Fatalf("the joiner starts with acker set %d of %d ackers, want its config's: 1 of 1", v, n)
	}
	runExact(t, ms, len(lines), truth)
}

// exactWordCount is a word count of 20 000 random lines from seed, with
// its truth, for members of a runtime with the given ackers, a 1 s timeout
// and no failures injected: runExact checks its outcome.
func exactWordCount(seed uint64, ackers int) ([]string, map[string]int64, func() *Topology, Config) {
	lines, truth := randomLines(seed, 20_000)
	cfg := DefaultConfig()
	cfg.Ackers, cfg.Log, cfg.Timeout, cfg.MaxPending, cfg.MaxReplays = ackers, quietLog(), time.Second, 512, 3
	return lines, truth, memberWordCount(lines, CounterOptions{Value: -1}), cfg
}

// runExact runs the word count from member 0, injecting no failure: every
// line completes, none times out, the counts are the truth.
func runExact(t *testing.T, ms []member, lines int, truth map[string]int64) *RunStats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	st, err := ms[0].rt.Run(ctx, ms[0].c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Completed != uint64(lines) || st.TimedOut != 0 || st.DeadLettered != 0 {
		t.Fatalf("no failures injected, yet %d of %d lines completed, %d timed out, %d dead-lettered",
			st.Completed, lines, st.TimedOut, st.DeadLettered)
	}
	got := map[string]int64{}
	for _, e := range st.Counters["count"].Top {
		got[e.Key] = int64(e.Count)
	}
	if !maps.Equal(got, truth) {
		t.Fatalf("counts %v, truth %v", got, truth)
	}
	return st
}

// TestAckerSetsOfOneVersion: two acker sets share a version — a member
// configured with another acker count joins, or two members change the set
// at once — and every member settles on the one with the greater routing,
// where before each passed the other's roots back to it for good (millions
// of forwards a second, roots timed out and dead-lettered).
func TestAckerSetsOfOneVersion(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ackers int
		setup  func(t *testing.T, agent *test.InMemAgent, ms []member, build func() *Topology, cfg Config) []member
	}{
		{"a member configured with another acker count", 8,
			func(t *testing.T, agent *test.InMemAgent, ms []member, build func() *Topology, cfg Config) []member {
				cfg.Ackers = 1
				return append(ms, join(t, agent, cfg, build))
			}},
		{"two members change the set at once", 2,
			func(t *testing.T, _ *test.InMemAgent, ms []member, _ func() *Topology, _ Config) []member {
				var wg sync.WaitGroup
				wg.Go(func() { _ = ms[0].rt.SetAckers(context.Background(), ms[0].c, 8) })
				wg.Go(func() { _ = ms[1].rt.SetAckers(context.Background(), ms[1].c, 3) })
				wg.Wait()
				return ms
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines, truth, build, cfg := exactWordCount(7, tc.ackers)
			agent, ms := startMembers(t, 3, cfg, build)
			ms = tc.setup(t, agent, ms, build, cfg)
			waitMembers(t, ms)
			st := runExact(t, ms, len(lines), truth)
			var forwarded uint64
			for _, a := range st.Ackers {
				forwarded += a.Forwarded
			}
			t.Logf("forwarded %d", forwarded)
			if forwarded > uint64(len(lines)) { // a loop passes millions on
				t.Fatalf("ackers passed %d entries on to each other for %d lines", forwarded, len(lines))
			}
		})
	}
}

// TestDriverAgain: a driver runs the word count, leaves, and a new driver
// runs it again against the same workers: the first run's end stopped its
// tasks everywhere, so the second finds fresh ones (a spout task that has
// run ignores another start, and the second run waited for it for good).
func TestDriverAgain(t *testing.T) {
	lines, truth, build, cfg := exactWordCount(11, 2)
	agent, ms := startMembers(t, 3, cfg, build)
	runExact(t, ms, len(lines), truth)
	agent.DeregisterService(ms[0].c.ActorSystem.ID)
	ms[0].c.Shutdown(false)
	driver := newMember(t, agent, cfg, build, true)
	driver.c.StartMember()
	t.Cleanup(func() { driver.c.Shutdown(false) })
	ms = []member{driver, ms[1], ms[2]}
	waitMembers(t, ms)
	runExact(t, ms, len(lines), truth)
}

// endless hands out "w<i mod 50>" lines forever; it counts what it handed
// out, what was Done and its Closes, over every task of every member.
type endless struct {
	mu                   *sync.Mutex
	next                 uint64
	out, done, closedOut *map[int64]int
	closes               *int
	task                 int64
}

func (e *endless) Next() (source.Root, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.next++
	(*e.out)[e.task]++
	return source.Root{ID: e.next, Payload: fmt.Sprintf("w%d", e.next%50)}, nil
}
func (e *endless) Replay(id uint64) (string, error) { return fmt.Sprintf("w%d", id%50), nil }
func (e *endless) Done(uint64) {
	e.mu.Lock()
	(*e.done)[e.task]++
	e.mu.Unlock()
}
func (e *endless) Total() int64 { return -1 }
func (e *endless) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	*e.closes++
	(*e.closedOut)[e.task] = (*e.out)[e.task] - (*e.done)[e.task] // roots still out at Close
	return nil
}

// TestStopSources: a run over sources that never end stops when asked:
// every spout task, on whichever member, reads no more, finishes its roots
// in flight and closes its source once they are done (so that it commits
// them), and Run returns with every root that was read completed and
// counted.
func TestStopSources(t *testing.T) {
	var mu sync.Mutex
	out, done, closedOut, closes := map[int64]int{}, map[int64]int{}, map[int64]int{}, 0
	build := func() *Topology {
		var b Builder
		b.Spout("lines", 3, func(task, tasks int) (source.Source, error) {
			return &endless{mu: &mu, out: &out, done: &done, closedOut: &closedOut, closes: &closes, task: int64(task)}, nil
		})
		b.Counter("count", 2, CounterOptions{Value: -1}, nil).Fields("lines", 0)
		topo, err := b.Build()
		if err != nil {
			panic(err)
		}
		return topo
	}
	cfg := DefaultConfig()
	cfg.Ackers, cfg.Log, cfg.ReportEvery = 3, quietLog(), 20*time.Millisecond
	_, ms := startMembers(t, 3, cfg, build)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type result struct {
		st  *RunStats
		err error
	}
	ran := make(chan result, 1)
	go func() {
		st, err := ms[0].rt.Run(ctx, ms[0].c, nil)
		ran <- result{st, err}
	}()
	for {
		if p, ok := ms[0].rt.Progress(); ok && p.Completed > 20_000 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := ms[0].rt.StopSources(ms[0].c); err != nil {
		t.Fatal(err)
	}
	r := <-ran
	if r.err != nil {
		t.Fatal(r.err)
	}
	mu.Lock()
	defer mu.Unlock()
	read := 0
	for task, n := range out {
		read += n
		if done[task] != n || closedOut[task] != 0 {
			t.Errorf("spout task %d: %d read, %d done, %d out at its Close", task, n, done[task], closedOut[task])
		}
	}
	var counted uint64
	for _, e := range r.st.Counters["count"].Top {
		counted += e.Count
	}
	if closes != 3 || r.st.Completed != r.st.Roots || int(r.st.Roots) != read || counted != r.st.Roots {
		t.Fatalf("%d closes, %d of %d roots completed, %d read, %d counted", closes, r.st.Completed, r.st.Roots, read, counted)
	}
	if err := ms[0].rt.StopSources(ms[0].c); err == nil {
		t.Fatal("StopSources after the run: no error")
	}
}

// TestServe: a topology served by every member of a cluster, with no
// driver: the lead starts the spout tasks, and counts come out exact. Two
// members that both think they lead (views of the membership differ for a
// moment) start each spout task once all the same: it is one virtual
// actor, which a second start does not restart.
func TestServe(t *testing.T) {
	for _, leads := range [][]bool{{true, false, false}, {true, true, false}} {
		t.Run(fmt.Sprintf("leads=%v", leads), func(t *testing.T) {
			lines, truth := randomLines(9, 6000)
			cfg := DefaultConfig()
			cfg.Ackers, cfg.Log, cfg.ReportEvery = 3, quietLog(), 20*time.Millisecond
			_, ms := startMembers(t, 3, cfg, memberWordCount(lines, CounterOptions{Value: -1}))
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for i, m := range ms {
				wg.Go(func() {
					if err := m.rt.Serve(ctx, m.c, func() string {
						if leads[i] {
							return m.c.ActorSystem.Address()
						}
						return ms[0].c.ActorSystem.Address()
					}); err != nil {
						t.Error(err)
					}
				})
			}
			defer func() { cancel(); wg.Wait() }()
			want := int64(0)
			for _, n := range truth {
				want += n
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				// Any member answers for the counters, wherever they run.
				res, err := ms[2].rt.Query(ctx, ms[2].c, "count", &messages.CounterQuery{All: true})
				if err != nil {
					t.Fatal(err)
				}
				got, total := map[string]int64{}, int64(0)
				for _, e := range res.Top {
					got[e.Key], total = int64(e.Count), total+int64(e.Count)
				}
				if total >= want {
					if !maps.Equal(got, truth) {
						t.Fatalf("counts %v, truth %v", got, truth)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d of %d words counted in 30 s", total, want)
				}
				time.Sleep(20 * time.Millisecond)
			}
			// With one lead every spout task reports to it (with two, to
			// whichever asked it last); a member that does not lead asks it.
			for _, m := range ms {
				for !leads[1] {
					p, ok := m.rt.RunProgress()
					if ok && p.Completed == uint64(len(lines)) && p.Replayed == 0 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("progress %+v (%v), want %d lines completed, none replayed", p, ok, len(lines))
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			if err := ms[0].rt.Serve(ctx, ms[0].c, func() string { return "" }); err == nil {
				t.Fatal("a second Serve: no error")
			}
		})
	}
}
