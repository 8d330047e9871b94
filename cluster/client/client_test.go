package client

import (
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/sirupsen/logrus"

	"github.com/acktor/acktor/actors"
	"github.com/acktor/acktor/cluster"
	"github.com/acktor/acktor/source"
)

type idle struct{}

func (idle) Next() (source.Root, error)    { return source.Root{}, io.EOF }
func (idle) Replay(uint64) (string, error) { return "", io.EOF }
func (idle) Done(uint64)                   {}
func (idle) Total() int64                  { return 0 }
func (idle) Close() error                  { return nil }

func quietSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
}

// ackers starts a member hosting 3 ackers (of a topology with nothing
// else to do) and a client joined to it from an actor system of its own,
// so that every message crosses a process boundary's encoding.
func ackers(t *testing.T, timeout time.Duration) *Client {
	return clients(t, timeout, Options{Ackers: 3}, 1)[0]
}

// clients starts the member of ackers and n clients with options o, each
// in an actor system of its own.
func clients(t *testing.T, timeout time.Duration, o Options, n int) []*Client {
	t.Helper()
	var b actors.Builder
	b.Spout("s", 1, func(int, int) (source.Source, error) { return idle{}, nil })
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	cfg := actors.DefaultConfig()
	cfg.Ackers, cfg.Timeout = 3, timeout
	l := logrus.New()
	l.SetOutput(io.Discard)
	cfg.Log = l
	rt, err := actors.New(topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	agent := test.NewInMemAgent()
	member := pcluster.New(quietSystem(), pcluster.Configure("c", test.NewTestProvider(agent), cluster.Placement(),
		remote.Configure("127.0.0.1", 0), pcluster.WithKinds(rt.WorkerKinds()...)))
	member.StartMember()
	systems := []*pcluster.Cluster{member}
	var out []*Client
	t.Cleanup(func() {
		for _, cl := range out {
			_ = cl.Close()
		}
		var wg sync.WaitGroup
		for _, c := range systems {
			wg.Go(func() { c.Shutdown(false) })
		}
		wg.Wait()
	})
	for range n {
		// The test provider's StartClient is broken in this Proto.Actor
		// version (a nil cluster in its status callback): join as a member
		// without kinds, which hosts no grains either.
		c := pcluster.New(quietSystem(), pcluster.Configure("c", test.NewTestProvider(agent), cluster.Placement(),
			remote.Configure("127.0.0.1", 0)))
		c.StartMember()
		systems = append(systems, c)
		cl, err := New(c, o)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, cl)
	}
	return out
}

// next waits for n events.
func next(t *testing.T, cl *Client, n int) map[uint64]Event {
	t.Helper()
	got := map[uint64]Event{}
	timeout := time.After(20 * time.Second)
	for len(got) < n {
		select {
		case e := <-cl.Events():
			if _, dup := got[e.SpringID]; dup {
				t.Fatalf("two events for root %x", e.SpringID)
			}
			got[e.SpringID] = e
		case <-timeout:
			t.Fatalf("%d of %d events", len(got), n)
		}
	}
	return got
}

// TestTrees: roots whose trees a client builds and acks in random order
// complete; a failed root fails; one never acked times out.
func TestTrees(t *testing.T) {
	cl := ackers(t, 300*time.Millisecond)
	rng := rand.New(rand.NewPCG(1, 1))
	type tree struct {
		id      uint64
		pending []uint64 // tuple ids still to ack
	}
	var trees []*tree
	for range 500 {
		tr := &tree{}
		init := uint64(0)
		for range 1 + rng.IntN(5) {
			e := cl.TupleID()
			tr.pending = append(tr.pending, e)
			init ^= e
		}
		id, err := cl.Begin(init)
		if err != nil {
			t.Fatal(err)
		}
		tr.id = id
		trees = append(trees, tr)
	}
	// Ack tuple by tuple, in a shuffled order over all trees; each handled
	// tuple sometimes gives rise to a child that is acked later.
	for {
		var open []*tree
		for _, tr := range trees {
			if len(tr.pending) > 0 {
				open = append(open, tr)
			}
		}
		if len(open) == 0 {
			break
		}
		tr := open[rng.IntN(len(open))]
		e := tr.pending[len(tr.pending)-1]
		tr.pending = tr.pending[:len(tr.pending)-1]
		delta := e
		if rng.IntN(3) == 0 {
			child := cl.TupleID()
			tr.pending = append(tr.pending, child)
			delta ^= child
		}
		if err := cl.Ack(tr.id, delta); err != nil {
			t.Fatal(err)
		}
	}
	events := next(t, cl, len(trees))
	for _, tr := range trees {
		if e := events[tr.id]; !e.Completed {
			t.Fatalf("root %x: %+v", tr.id, e)
		}
	}

	failed, _ := cl.Begin(cl.TupleID())
	_ = cl.Fail(failed)
	silent, _ := cl.Begin(cl.TupleID())
	events = next(t, cl, 2)
	if e := events[failed]; e.Completed || e.Reason != "failed" {
		t.Fatalf("failed root: %+v", e)
	}
	if e := events[silent]; e.Completed || e.Reason != "timed out" {
		t.Fatalf("root never acked: %+v", e)
	}
}

func TestOptions(t *testing.T) {
	for _, o := range []Options{{Ackers: 0}, {Ackers: 5000}, {Ackers: 1, Replicas: -1}} {
		if _, err := New(nil, o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

// TestClientDeadline: roots whose ackers never answer — here they refuse
// the client, whose task id another live client holds — are reported timed
// out at the client by their deadline, once each.
func TestClientDeadline(t *testing.T) {
	cls := clients(t, 300*time.Millisecond, Options{Ackers: 3, Timeout: time.Second}, 2)
	a, b := cls[0], cls[1]
	b.task = a.task // a 1-in-2^23 collision of random task ids, forced
	begin := func(cl *Client, n int) {
		for range n {
			if _, err := cl.Begin(cl.TupleID()); err != nil {
				t.Fatal(err)
			}
		}
	}
	// a's roots reach all three ackers (but once in 10^10 runs), so a
	// holds the task id at every acker before b begins.
	begin(a, 60)
	time.Sleep(100 * time.Millisecond)
	begin(b, 10)
	for id, e := range next(t, a, 60) {
		if e.Reason != "timed out" {
			t.Fatalf("client a, root %x: %+v, want timed out at its acker", id, e)
		}
	}
	for id, e := range next(t, b, 10) {
		if e.Reason != "timed out at the client" {
			t.Fatalf("client b, root %x: %+v, want timed out at the client", id, e)
		}
	}
	select {
	case e := <-b.Events():
		t.Fatalf("a second word on a root: %+v", e)
	case <-time.After(300 * time.Millisecond):
	}
}

// TestClientMaxPending: Begin refuses a root past MaxPending open ones, and
// takes one again once a root is reported.
func TestClientMaxPending(t *testing.T) {
	cl := clients(t, 200*time.Millisecond, Options{Ackers: 3, MaxPending: 2}, 1)[0]
	for i := range 3 {
		_, err := cl.Begin(cl.TupleID())
		if want := i == 2; errors.Is(err, ErrFull) != want {
			t.Fatalf("Begin #%d: %v, want ErrFull %v", i+1, err, want)
		}
	}
	next(t, cl, 2) // they time out at their ackers
	if _, err := cl.Begin(cl.TupleID()); err != nil {
		t.Fatalf("Begin after the roots were reported: %v", err)
	}
}

// TestCloseWithFullEvents: Close returns while reports wait on a full
// Events channel, and closes it.
func TestCloseWithFullEvents(t *testing.T) {
	cl := clients(t, 100*time.Millisecond, Options{Ackers: 3, Events: 1}, 1)[0]
	for range 20 {
		if _, err := cl.Begin(cl.TupleID()); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second) // all time out; one fits in Events
	closed := make(chan struct{})
	go func() { _ = cl.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return with Events full")
	}
	n := 0
	for range cl.Events() {
		n++
	}
	if n != 1 {
		t.Fatalf("%d events left in a channel of 1 after Close", n)
	}
}
