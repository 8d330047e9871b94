package actors

import (
	"context"
	"io"
	"log/slog"
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
	"github.com/sirupsen/logrus"

	"github.com/acktor/acktor/actors/source"
)

// memSource yields fixed lines; it remembers what it was told.
type memSource struct {
	lines []string
	next  int
	mu    *sync.Mutex
	done  map[uint64]int
}

func (m *memSource) Next() (source.Root, error) {
	if m.next >= len(m.lines) {
		return source.Root{}, io.EOF
	}
	m.next++
	return source.Root{ID: uint64(m.next - 1), Payload: m.lines[m.next-1]}, nil
}
func (m *memSource) Replay(id uint64) (string, error) { return m.lines[id], nil }
func (m *memSource) Done(id uint64) {
	m.mu.Lock()
	m.done[id]++
	m.mu.Unlock()
}
func (m *memSource) Total() int64 { return int64(len(m.lines)) }
func (m *memSource) Close() error { return nil }

// words is a split + count topology whose processors fail or drop tuples at
// the given rates.
type words struct {
	mu      sync.Mutex
	counts  map[string]int64
	fail    float64
	drop    float64
	seed    uint64
	doneIDs map[uint64]int
}

type splitter struct {
	w   *words
	rng *rand.Rand
}

func (s *splitter) Process(t *Tuple, c *Collector) {
	if x := s.rng.Float64(); x < s.w.fail {
		c.Fail(t)
		return
	} else if x < s.w.fail+s.w.drop {
		return
	}
	for _, w := range strings.Fields(t.Values[0]) {
		if err := c.Emit([]*Tuple{t}, w); err != nil {
			panic(err)
		}
	}
	c.Ack(t)
}

type counter struct {
	w      *words
	rng    *rand.Rand
	counts map[string]int64
}

func (k *counter) Process(t *Tuple, c *Collector) {
	if x := k.rng.Float64(); x < k.w.fail {
		c.Fail(t)
		return
	} else if x < k.w.fail+k.w.drop {
		return
	}
	k.counts[t.Values[0]]++
	c.Ack(t)
}

func (k *counter) Finish(*Collector) {
	k.w.mu.Lock()
	defer k.w.mu.Unlock()
	for w, n := range k.counts {
		k.w.counts[w] += n
	}
}

func (w *words) topology(t *testing.T, lines []string, spouts int) *Topology {
	var b Builder
	b.Spout("lines", spouts, func(task, tasks int) (source.Source, error) {
		var mine []string
		for i := task; i < len(lines); i += tasks {
			mine = append(mine, lines[i])
		}
		return &memSource{lines: mine, mu: &w.mu, done: w.doneIDs}, nil
	})
	b.Processor("split", 3, func(ti TaskInfo) (Processor, error) {
		return &splitter{w: w, rng: rand.New(rand.NewPCG(w.seed, uint64(ti.Task)))}, nil
	}).Shuffle("lines")
	b.Processor("count", 2, func(ti TaskInfo) (Processor, error) {
		return &counter{w: w, rng: rand.New(rand.NewPCG(w.seed, uint64(ti.Task))), counts: map[string]int64{}}, nil
	}).Fields("split", 0)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func quietLog() *logrus.Logger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

// startMember starts a single-member in-memory cluster for rt.
func startMember(t testing.TB, rt *Runtime) *cluster.Cluster {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	c := cluster.New(sys, cluster.Configure("t", test.NewTestProvider(test.NewInMemAgent()), disthash.New(),
		remote.Configure("127.0.0.1", 0), cluster.WithKinds(rt.Kinds()...)))
	c.StartMember()
	t.Cleanup(func() { c.Shutdown(false) })
	return c
}

func TestRunWordCount(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	vocab := []string{"a", "b", "c", "d", "e", "f", "g"}
	var lines []string
	truth := map[string]int64{}
	for range 3000 {
		var ws []string
		for range 1 + rng.IntN(8) {
			w := vocab[rng.IntN(len(vocab))]
			ws = append(ws, w)
			truth[w]++
		}
		lines = append(lines, strings.Join(ws, " "))
	}
	for _, tc := range []struct {
		name       string
		ackers     int
		fail, drop float64
	}{
		{"exact", 2, 0, 0},
		{"untracked", 0, 0, 0},
		{"fail and drop replay", 3, 0.02, 0.01},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &words{counts: map[string]int64{}, fail: tc.fail, drop: tc.drop, seed: 9, doneIDs: map[uint64]int{}}
			cfg := DefaultConfig()
			cfg.Ackers = tc.ackers
			cfg.MaxPending = 256
			cfg.BatchSize = 64
			cfg.Timeout = 300 * time.Millisecond
			cfg.MaxReplays = 50
			cfg.Log = quietLog()
			rt, err := New(w.topology(t, lines, 2), cfg)
			if err != nil {
				t.Fatal(err)
			}
			c := startMember(t, rt)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			st, err := rt.Run(ctx, c, nil)
			if err != nil {
				t.Fatal(err)
			}
			if st.Roots != uint64(len(lines)) || st.Completed != st.Roots || st.DeadLettered != 0 || st.InFlight != 0 {
				t.Fatalf("stats %+v", st.Progress)
			}
			for word, n := range truth {
				got := w.counts[word]
				if (tc.fail == 0 && tc.drop == 0 && got != n) || got < n {
					t.Errorf("%s: counted %d, truth %d", word, got, n)
				}
			}
			if tc.fail > 0 && (st.Replayed == 0 || st.TimedOut == 0) {
				t.Errorf("no replays or no timeouts with fail and drop rates: %+v", st.Progress)
			}
			if tc.ackers > 0 {
				var tracked uint64
				for _, a := range st.Ackers {
					tracked += a.Tracked
				}
				if tracked != st.Roots+st.Replayed {
					t.Errorf("ackers tracked %d roots, spouts emitted %d", tracked, st.Roots+st.Replayed)
				}
			}
		})
	}
}
