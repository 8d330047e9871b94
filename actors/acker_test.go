package actors

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/acktor/acktor/messages"
	"github.com/acktor/acktor/source"
	"github.com/acktor/acktor/tracker"
	"github.com/acktor/acktor/tracker/ledger"
)

// listener stands in for a remote client: it notes the springIds it is
// told about.
type listener struct {
	pid       *actor.PID
	mu        sync.Mutex
	completed map[uint64]int
	failed    map[uint64]int
}

func listen(c *cluster.Cluster) *listener {
	l := &listener{completed: map[uint64]int{}, failed: map[uint64]int{}}
	l.pid = c.ActorSystem.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		l.mu.Lock()
		defer l.mu.Unlock()
		switch m := ctx.Message().(type) {
		case *messages.Completed:
			for _, id := range m.SpringIds {
				l.completed[id]++
			}
		case *messages.Failed:
			for _, id := range m.SpringIds {
				l.failed[id]++
			}
		}
	}))
	return l
}

func (l *listener) notify() *messages.Pid { return &messages.Pid{Address: l.pid.Address, Id: l.pid.Id} }

// told is how many springIds the listener heard completed and failed.
func (l *listener) told() (completed, failed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.completed), len(l.failed)
}

func (l *listener) heard(id uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.completed[id] > 0 || l.failed[id] > 0
}

// eventually polls cond for up to 10 seconds and says whether it held.
func eventually(cond func() bool) bool {
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			return false
		}
	}
	return true
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !eventually(cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

func ackerStats(t *testing.T, c *cluster.Cluster) *messages.AckerStats {
	t.Helper()
	res, err := c.Request(tracker.AckerIdentity(0), KindAcker, &messages.AckerStatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return res.(*messages.AckerStats)
}

// TestOutboxDrainSurvivesPanickingSend: a send that panics loses only its
// own task's ids; the tasks queued after it go out at the next drain, and
// the panicking task's next ids go out too. (The drain used to keep its
// list of tasks when a send panicked, so every later drain panicked at the
// same entry and nothing was ever sent again.)
func TestOutboxDrainSurvivesPanickingSend(t *testing.T) {
	for _, tc := range []struct {
		name  string
		adds  []uint32 // a task per id; ids are 1, 2, ...
		panic uint32   // the task whose first send panics
	}{
		{"first spout task", []uint32{0, 1, 2, 0}, 0},
		{"middle spout task", []uint32{0, 1, 2, 1}, 1},
		{"last spout task", []uint32{0, 1, 2}, 2},
		{"client task", []uint32{1, tracker.ClientTasks + 3, 2, tracker.ClientTasks + 3}, tracker.ClientTasks + 3},
		{"past the spout tasks", []uint32{0, 5, 1}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOutbox(3)
			want := map[uint32][]uint64{}
			for i, task := range tc.adds {
				o.add(task, uint64(i+1))
				if task != tc.panic {
					want[task] = append(want[task], uint64(i+1))
				}
			}
			got := map[uint32][]uint64{}
			panics := 0
			send := func(task uint32, ids []uint64) []uint64 {
				if task == tc.panic && ids[0] <= uint64(len(tc.adds)) { // these ids always make it panic
					panics++
					panic("send")
				}
				got[task] = append(got[task], ids...)
				return nil
			}
			drain := func() {
				defer func() { _ = recover() }()
				o.drain(send)
			}
			drain()
			drain() // what the panic held up
			next := uint64(len(tc.adds) + 1)
			o.add(tc.panic, next)
			want[tc.panic] = []uint64{next}
			drain()
			if panics != 1 {
				t.Fatalf("send panicked %d times, want once", panics)
			}
			if !maps.EqualFunc(got, want, slices.Equal) || !o.empty() {
				t.Fatalf("sent %v, want %v; outbox empty %v", got, want, o.empty())
			}
		})
	}
}

// TestToSpoutChecksTheTask: a notification for a task that is no spout task
// of the topology nor a known client is logged and counted, not sent (the
// task's identity used to index past the topology's tasks and panic).
func TestToSpoutChecksTheTask(t *testing.T) {
	topo := sinkTopology(t, nil, nopProc)
	p, _ := topo.Component("p")
	a := &ackerTask{env: &env{topo: topo, log: quietLog()}, id: "acker/0"}
	for _, task := range []uint32{uint32(topo.Tasks()), p.FirstTask, tracker.ClientTasks - 1, tracker.ClientTasks, ledger.MaxTask, ledger.MaxTask + 1, 1 << 31} {
		t.Run(fmt.Sprint(task), func(t *testing.T) {
			before := a.bad
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("toSpout(%d) panicked: %v", task, r)
					}
				}()
				a.toSpout(task, &messages.Completed{SpringIds: []uint64{1}})
			}()
			if a.bad != before+1 {
				t.Fatalf("bad messages %d, want %d", a.bad, before+1)
			}
		})
	}
}

// TestAckerAdoptChecksTasks: a Handover whose record names a task the acker
// cannot tell (no spout task, no client whose address it has) loses that
// record, counted, and nothing else: the rest of the Handover is adopted,
// and a run afterwards completes every root. (One such record used to stop
// the acker from telling any spout anything again: "roots 100 completed 0".)
func TestAckerAdoptChecksTasks(t *testing.T) {
	const (
		client = tracker.ClientTasks + 7
		other  = tracker.ClientTasks + 1              // a client whose record is well formed
		bad    = uint64(client) << tracker.SpringBits // no spout's springIds
		good   = uint64(other) << tracker.SpringBits
		mine   = bad | 1
	)
	for _, tc := range []struct {
		name    string
		task    func(topo *Topology) uint32
		carry   bool // the Handover carries client's address
		nilPid  bool // ... as an empty Pid
		known   int  // client tracked a root here first: 1 at the listener's address, 2 at another
		bad     uint64
		refused uint64
		told    bool // the listener hears that bad completed
	}{
		{name: "past the last task", task: func(topo *Topology) uint32 { return uint32(topo.Tasks()) }, bad: 1},
		{name: "last task below clients", task: func(*Topology) uint32 { return tracker.ClientTasks - 1 }, bad: 1},
		{name: "a processor task", task: func(topo *Topology) uint32 { p, _ := topo.Component("p"); return p.FirstTask }, bad: 1},
		{name: "client without address", task: func(*Topology) uint32 { return client }, bad: 1},
		{name: "client with an empty address", task: func(*Topology) uint32 { return client }, carry: true, nilPid: true, bad: 1},
		{name: "above MaxTask", task: func(*Topology) uint32 { return ledger.MaxTask + 1 }, bad: 1},
		{name: "far above MaxTask", task: func(*Topology) uint32 { return 1<<31 | 5 }, carry: true, bad: 1},
		{name: "client address carried", task: func(*Topology) uint32 { return client }, carry: true, told: true},
		{name: "client known here", task: func(*Topology) uint32 { return client }, known: 1, told: true},
		{name: "client known at another address", task: func(*Topology) uint32 { return client }, carry: true, known: 2, bad: 1, refused: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := numbered(100, nil)
			topo := sinkTopology(t, lines, func(TaskInfo) (Processor, error) {
				return procFunc(func(tu *Tuple, c *Collector) { c.Ack(tu) }), nil
			})
			rt, err := New(topo, testConfig(1))
			if err != nil {
				t.Fatal(err)
			}
			c := startMember(t, rt)
			lis, elsewhere := listen(c), listen(c)
			p := c.Get(tracker.AckerIdentity(0), KindAcker)
			switch tc.known {
			case 1:
				c.ActorSystem.Root.Send(p, &messages.Track{Task: client, SpringIds: []uint64{mine}, InitXors: []uint64{1}, Notify: lis.notify()})
			case 2:
				c.ActorSystem.Root.Send(p, &messages.Track{Task: client, SpringIds: []uint64{mine}, InitXors: []uint64{1}, Notify: elsewhere.notify()})
			}
			task := tc.task(topo)
			h := &messages.Handover{SpringIds: []uint64{bad, good}, CheckValues: []uint64{5, 9}, Tasks: []uint32{task, other},
				Flags: []uint32{1, 1}, Clients: map[uint32]*messages.Pid{other: lis.notify()}}
			if tc.carry {
				h.Clients[task] = lis.notify()
				if tc.nilPid {
					h.Clients[task] = &messages.Pid{}
				}
			}
			c.ActorSystem.Root.Send(p, h)
			c.ActorSystem.Root.Send(p, &messages.AckBatch{SpringIds: []uint64{bad, good}, XorDeltas: []uint64{5, 9}})
			if !eventually(func() bool { return lis.heard(good) }) {
				t.Errorf("the well-formed record of the Handover never completed")
			}
			st := ackerStats(t, c)
			if st.BadMessages != tc.bad || st.ClientsRefused != tc.refused || lis.heard(bad) != tc.told || elsewhere.heard(bad) {
				t.Errorf("bad messages %d, clients refused %d, told %v (elsewhere %v); want %d, %d, %v",
					st.BadMessages, st.ClientsRefused, lis.heard(bad), elsewhere.heard(bad), tc.bad, tc.refused, tc.told)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			rs, err := rt.Run(ctx, c, nil)
			if err != nil {
				t.Fatal(err)
			}
			if rs.Completed != uint64(len(lines)) || rs.DeadLettered != 0 {
				t.Fatalf("roots %d completed %d dead-lettered %d", rs.Roots, rs.Completed, rs.DeadLettered)
			}
			if len(rs.Ackers) != 1 || rs.Ackers[0].BadMessages != tc.bad || rs.Ackers[0].ClientsRefused != tc.refused {
				t.Fatalf("run's acker stats %+v, want %d bad messages and %d clients refused", rs.Ackers, tc.bad, tc.refused)
			}
		})
	}
}

// TestAckerForgetsClients: an acker forgets a remote client once no record
// of it can be left, so that client sessions beyond maxClients over time
// are all served; it refuses (counted) new clients past maxClients at once,
// and a client whose task id another client with records here holds. (It
// used to remember every client for good, refusing all after maxClients,
// and to point a task's notifications at whichever client came last.)
func TestAckerForgetsClients(t *testing.T) {
	start := func(t *testing.T) (*cluster.Cluster, *actor.PID, Config) {
		var b Builder
		b.Spout("s", 1, func(int, int) (source.Source, error) { return idleSource{}, nil })
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(1)
		rt, err := New(topo, cfg)
		if err != nil {
			t.Fatal(err)
		}
		c := startMember(t, rt)
		return c, c.Get(tracker.AckerIdentity(0), KindAcker), cfg
	}
	// forgotten waits until the acker has forgotten the clients it knows.
	forgotten := func(cfg Config) { time.Sleep(time.Duration(cfg.Generations+2) * cfg.rotateEvery()) }
	track := func(c *cluster.Cluster, p *actor.PID, task uint32, id, init uint64, l *listener) {
		c.ActorSystem.Root.Send(p, &messages.Track{Task: task, SpringIds: []uint64{id}, InitXors: []uint64{init}, Notify: l.notify()})
	}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, c *cluster.Cluster, p *actor.PID, cfg Config) (refused uint64)
	}{
		{"sessions beyond the bound over time", func(t *testing.T, c *cluster.Cluster, p *actor.PID, cfg Config) uint64 {
			l := listen(c)
			for wave := range 3 {
				for i := range maxClients {
					task := uint32(tracker.ClientTasks + wave*maxClients + i)
					track(c, p, task, uint64(task)<<20, 0, l)
				}
				waitFor(t, fmt.Sprintf("wave %d's completions", wave), func() bool { n, _ := l.told(); return n == (wave+1)*maxClients })
				forgotten(cfg)
			}
			return 0
		}},
		{"beyond the bound at once", func(t *testing.T, c *cluster.Cluster, p *actor.PID, cfg Config) uint64 {
			l := listen(c)
			const over = 5
			for i := range maxClients + over {
				task := uint32(tracker.ClientTasks + i)
				track(c, p, task, uint64(task)<<20, 0, l)
			}
			waitFor(t, "the admitted clients' completions", func() bool { n, _ := l.told(); return n == maxClients })
			for i := range over {
				if id := uint64(tracker.ClientTasks+maxClients+i) << 20; l.heard(id) {
					t.Fatalf("refused client %d was told about springId %x", maxClients+i, id)
				}
			}
			forgotten(cfg)
			task := uint32(tracker.ClientTasks + 2*maxClients)
			track(c, p, task, 1, 0, l)
			waitFor(t, "a new client's completion", func() bool { return l.heard(1) })
			return over
		}},
		{"open roots keep their clients until they time out", func(t *testing.T, c *cluster.Cluster, p *actor.PID, cfg Config) uint64 {
			l := listen(c)
			const clients = 100
			for i := range clients {
				task := uint32(tracker.ClientTasks + i)
				track(c, p, task, uint64(task)<<20, 1, l)
			}
			waitFor(t, "the roots to time out", func() bool { _, n := l.told(); return n == clients })
			return 0
		}},
		{"a task id another client holds", func(t *testing.T, c *cluster.Cluster, p *actor.PID, cfg Config) uint64 {
			first, second := listen(c), listen(c)
			track(c, p, tracker.ClientTasks+9, 1, 7, first)
			track(c, p, tracker.ClientTasks+9, 2, 0, second) // refused: springId 1 is first's
			c.ActorSystem.Root.Send(p, &messages.AckBatch{SpringIds: []uint64{1}, XorDeltas: []uint64{7}})
			waitFor(t, "the first client's completion", func() bool { return first.heard(1) })
			if second.heard(1) || second.heard(2) || first.heard(2) {
				t.Fatalf("the second client was served while the first held the task id")
			}
			forgotten(cfg)
			track(c, p, tracker.ClientTasks+9, 3, 0, second)
			waitFor(t, "the second client's completion", func() bool { return second.heard(3) })
			return 1
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, p, cfg := start(t)
			refused := tc.run(t, c, p, cfg)
			if st := ackerStats(t, c); st.ClientsRefused != refused || st.BadMessages != 0 {
				t.Fatalf("clients refused %d, bad messages %d; want %d and 0", st.ClientsRefused, st.BadMessages, refused)
			}
		})
	}
}
