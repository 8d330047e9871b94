package cluster

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/asynkron/protoactor-go/remote"

	"github.com/acktor/acktor/actors"
	"github.com/acktor/acktor/source"
)

// TestChurn runs a word count while members join and leave gracefully,
// eight times, one after another, each leaving member often one that
// joined a second before: no member is taken for dead and no running spout
// task starts again from a checkpoint (either fails roots outright), every
// line completes, and the counts are exact. A root may still replay after
// a short deadline when a lookup finds no member for a moment: then the
// counts are at least the truth, and exact with exactly-once counters,
// whose standbys take their ids, 12 M here, at each change (a sync that
// once gave up under this load and began again, over and over; see
// docs/cluster.md).
func TestChurn(t *testing.T) {
	if testing.Short() {
		t.Skip("runs five members")
	}
	for _, tc := range []struct {
		name        string
		exactlyOnce bool
	}{{"at-least-once", false}, {"exactly-once", true}} {
		t.Run(tc.name, func(t *testing.T) { churn(t, tc.exactlyOnce) })
	}
}

// churn is TestChurn's run, its counters exactly-once or not.
func churn(t *testing.T, exactlyOnce bool) {
	gc := source.GeneratorConfig{Lines: 3_000_000, WordsPerLine: 4, Vocabulary: 500, Skew: 1.2, Seed: 5}
	truth, err := source.GeneratorTruth(gc)
	if err != nil {
		t.Fatal(err)
	}
	gen, err := source.Generator(gc)
	if err != nil {
		t.Fatal(err)
	}
	var b actors.Builder
	b.Spout("lines", 3, gen)
	b.Processor("split", 4, func(actors.TaskInfo) (actors.Processor, error) { return splitWords{}, nil }).Shuffle("lines")
	b.Counter("count", 2, actors.CounterOptions{Value: -1, ExactlyOnce: exactlyOnce}, nil).Fields("split", 0)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	cfg := actors.DefaultConfig()
	cfg.Ackers, cfg.Timeout, cfg.Log, cfg.MaxPending = 4, 20*time.Second, warnings(t), 1024
	agent := test.NewInMemAgent()
	var mu sync.Mutex
	var members []*pcluster.Cluster // the workers, oldest first
	start := func() (*pcluster.Cluster, *actors.Runtime) {
		rt, err := actors.New(topo, cfg)
		if err != nil {
			t.Error(err)
			return nil, nil
		}
		c := pcluster.New(quietSystem(), pcluster.Configure("churn", test.NewTestProvider(agent), Placement(actors.KindSpout, actors.KindProcessor, actors.KindAcker),
			remote.Configure("127.0.0.1", 0), pcluster.WithKinds(rt.Kinds()...)))
		c.StartMember()
		return c, rt
	}
	worker := func() *pcluster.Cluster { c, _ := start(); return c }
	driver, rt := start()
	if driver == nil {
		t.FailNow()
	}
	members = append(members, worker(), worker())
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range append(members, driver) {
			c.Shutdown(false)
		}
	})
	for deadline := time.Now().Add(10 * time.Second); driver.MemberList.Members().Len() != 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("members did not see each other")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var changes sync.WaitGroup
	step := 0
	st, err := rt.Run(ctx, driver, func(p actors.Progress) {
		if step >= 8 || p.Completed < uint64(gc.Lines)*uint64(step+1)/10 {
			return
		}
		join := step%2 == 0
		step++
		changes.Add(1)
		go func() {
			defer changes.Done()
			if join {
				c := worker()
				if c == nil {
					return
				}
				mu.Lock()
				members = append(members, c)
				mu.Unlock()
				return
			}
			mu.Lock()
			w := members[0]
			members = members[1:]
			mu.Unlock()
			left := time.Now()
			Leave(w, time.Second)
			t.Logf("a leave took %v", time.Since(left).Round(time.Millisecond))
		}()
	})
	changes.Wait()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d changes; %d lines in %v; %d timed out and replayed", step, st.Completed, st.Elapsed, st.TimedOut)
	if step < 8 {
		t.Fatalf("the run ended after %d of 8 changes", step)
	}
	if st.Completed != uint64(gc.Lines) || st.Failed != st.TimedOut || st.DeadLettered != 0 {
		t.Fatalf("%d of %d lines completed, %d failed (%d timed out), %d replayed, %d dead-lettered",
			st.Completed, gc.Lines, st.Failed, st.TimedOut, st.Replayed, st.DeadLettered)
	}
	got := map[string]int64{}
	for _, e := range st.Counters["count"].Top {
		got[e.Key] = int64(e.Count)
	}
	for w, n := range truth {
		if got[w] < n || ((st.Replayed == 0 || exactlyOnce) && got[w] != n) {
			t.Fatalf("%s counted %d, truth %d (%d roots replayed)", w, got[w], n, st.Replayed)
		}
	}
}

// warnings is a logger that keeps the runtime's warnings and errors, and
// shows the last 100 lines if t fails: the run's own account of what went
// wrong in a churn that cannot be replayed at will.
func warnings(t *testing.T) *logrus.Logger {
	var mu sync.Mutex
	var lines []string
	l := logrus.New()
	l.SetLevel(logrus.WarnLevel)
	l.SetOutput(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		if lines = append(lines, strings.TrimSuffix(string(p), "\n")); len(lines) > 100 {
			lines = lines[1:]
		}
		return len(p), nil
	}))
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if t.Failed() {
			t.Logf("the members' last %d warnings:\n%s", len(lines), strings.Join(lines, "\n"))
		}
	})
	return l
}

// writerFunc is an io.Writer.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
