package client

import (
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
	"github.com/acktor/acktor/actors/source"
	"github.com/acktor/acktor/cluster"
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
	// The test provider's StartClient is broken in this Proto.Actor version
	// (a nil cluster in its status callback): join as a member without
	// kinds, which hosts no grains either.
	client := pcluster.New(quietSystem(), pcluster.Configure("c", test.NewTestProvider(agent), cluster.Placement(),
		remote.Configure("127.0.0.1", 0)))
	client.StartMember()
	cl, err := New(client, Options{Ackers: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cl.Close()
		var wg sync.WaitGroup
		for _, c := range []*pcluster.Cluster{client, member} {
			wg.Add(1)
			go func() { defer wg.Done(); c.Shutdown(false) }()
		}
		wg.Wait()
	})
	return cl
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
