package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/sirupsen/logrus"

	"github.com/acktor/acktor/actors"
	"github.com/acktor/acktor/source"
)

func quietSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
}

func quietLogrus() *logrus.Logger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

// moveTopology is generated lines -> split -> a counter component; the
// spouts' sources end only once held is closed.
func moveTopology(t *testing.T, gc source.GeneratorConfig, held <-chan struct{}) *actors.Topology {
	gen, err := source.Generator(gc)
	if err != nil {
		t.Fatal(err)
	}
	var b actors.Builder
	b.Spout("lines", 3, func(task, tasks int) (source.Source, error) {
		src, err := gen(task, tasks)
		if err != nil {
			return nil, err
		}
		return heldEnd{src.(seekingSource), held}, nil
	})
	b.Processor("split", 4, func(actors.TaskInfo) (actors.Processor, error) {
		return splitWords{}, nil
	}).Shuffle("lines")
	b.Counter("count", 2, actors.CounterOptions{Value: -1}, nil).Fields("split", 0)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// seekingSource is a source whose spout task can move.
type seekingSource interface {
	source.Source
	source.Seeker
}

// heldEnd is a source that is not ready, rather than at its end, until
// held is closed: the run cannot end before the members' changes are done,
// however fast the machine (1.5M lines took 2 s, less than a join and a
// leave, once the tracker got faster).
type heldEnd struct {
	seekingSource
	held <-chan struct{}
}

func (h heldEnd) Next() (source.Root, error) {
	r, err := h.seekingSource.Next()
	if errors.Is(err, io.EOF) {
		select {
		case <-h.held:
		default:
			return r, source.ErrNotReady
		}
	}
	return r, err
}

type splitWords struct{}

func (splitWords) Process(t *actors.Tuple, c *actors.Collector) {
	for _, w := range strings.Fields(t.Values()[0]) {
		_ = c.Emit([]*actors.Tuple{t}, w)
	}
	c.Ack(t)
}

// TestJoinAndLeaveMoveTasks runs a word count on three members; mid-run a
// fourth joins and then one of the workers leaves gracefully. Spout tasks,
// processor tasks and ackers move with their state each time, so not one
// line fails or replays and the counts are exact: with the counters on the
// driver alone, and with counters on every member (a service's), whose
// windows move too.
func TestJoinAndLeaveMoveTasks(t *testing.T) {
	for _, everywhere := range []bool{false, true} {
		t.Run(fmt.Sprintf("counters everywhere=%v", everywhere), func(t *testing.T) { joinAndLeave(t, everywhere) })
	}
}

func joinAndLeave(t *testing.T, everywhere bool) {
	gc := source.GeneratorConfig{Lines: 1_500_000, WordsPerLine: 4, Vocabulary: 500, Skew: 1.2, Seed: 4}
	truth, err := source.GeneratorTruth(gc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := actors.DefaultConfig()
	// A record a move loses never completes, whatever the timeout; 20 s
	// keeps a machine that other tests starve from timing out live ones
	// (5 s did once, with 1653 roots, beside the member tests).
	cfg.Ackers, cfg.Timeout, cfg.Log, cfg.MaxPending = 4, 20*time.Second, quietLogrus(), 1024
	agent := test.NewInMemAgent()
	changed := make(chan struct{}) // the join and the leave are done
	start := func(driver bool) (*pcluster.Cluster, *actors.Runtime) {
		rt, err := actors.New(moveTopology(t, gc, changed), cfg)
		if err != nil {
			t.Fatal(err)
		}
		kinds := rt.WorkerKinds()
		if driver || everywhere {
			kinds = rt.Kinds()
		}
		c := pcluster.New(quietSystem(), pcluster.Configure("mv", test.NewTestProvider(agent), Placement(actors.KindSpout, actors.KindProcessor, actors.KindAcker),
			remote.Configure("127.0.0.1", 0), pcluster.WithKinds(kinds...)))
		c.StartMember()
		return c, rt
	}
	driver, rt := start(true) // hosts the counters and runs the job
	w1, _ := start(false)
	w2, _ := start(false)
	var mu sync.Mutex
	var joiner *pcluster.Cluster
	t.Cleanup(func() {
		var wg sync.WaitGroup
		mu.Lock()
		defer mu.Unlock()
		for _, c := range []*pcluster.Cluster{driver, w2, joiner} {
			if c != nil {
				wg.Add(1)
				go func() { defer wg.Done(); c.Shutdown(false) }()
			}
		}
		wg.Wait()
	})
	for deadline := time.Now().Add(10 * time.Second); driver.MemberList.Members().Len() != 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("members did not see each other")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var joined, left sync.Once
	var changes sync.WaitGroup
	var joinedAt, leftAt time.Time
	joinDone := make(chan struct{})
	st, err := rt.Run(ctx, driver, func(p actors.Progress) {
		if p.Completed > uint64(gc.Lines)/100 {
			joined.Do(func() { // a fourth member joins: some tasks move to it
				changes.Add(1)
				go func() {
					defer changes.Done()
					c, _ := start(false)
					mu.Lock()
					joiner, joinedAt = c, time.Now()
					mu.Unlock()
					close(joinDone)
				}()
			})
		}
		select {
		case <-joinDone:
		default:
			return
		}
		if p.Completed > uint64(gc.Lines)*2/5 {
			left.Do(func() { // then a worker leaves: its tasks move off it
				changes.Add(1)
				go func() {
					defer changes.Done()
					Evacuate(w1)
					mu.Lock()
					leftAt = time.Now()
					mu.Unlock()
					close(changed)
					Leave(w1, time.Second) // evacuates nothing more
				}()
			})
		}
	})
	end := time.Now()
	changes.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if joinedAt.IsZero() || leftAt.IsZero() || !joinedAt.Before(end) || !leftAt.Before(end) {
		t.Fatalf("the join (%v) or the leave (%v) came after the run ended (%v): nothing moved mid-run", joinedAt, leftAt, end)
	}
	if st.Completed != uint64(gc.Lines) || st.Failed != 0 || st.Replayed != 0 || st.DeadLettered != 0 {
		t.Fatalf("%d of %d lines completed, %d failed (%d timed out), %d replayed", st.Completed, gc.Lines, st.Failed, st.TimedOut, st.Replayed)
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
	t.Logf("%d lines in %v", st.Completed, st.Elapsed)
}
