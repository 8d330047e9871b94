package actors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	acluster "github.com/acktor/acktor/cluster"
	"github.com/acktor/acktor/messages"
	"google.golang.org/protobuf/proto"

	"github.com/asynkron/protoactor-go/cluster"
	"github.com/sirupsen/logrus"

	"github.com/acktor/acktor/source"
	"github.com/acktor/acktor/tracker"
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
	for _, w := range strings.Fields(t.Values()[0]) {
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
	k.counts[t.Values()[0]]++
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

// startMember starts a single-member in-memory cluster for rt, the
// embedded member acktor runs by default.
func startMember(t testing.TB, rt *Runtime) *cluster.Cluster {
	t.Helper()
	n, err := acluster.StartEmbedded("t", rt.Kinds(), quietLog())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	return n.Cluster
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
		ackDelay   time.Duration
	}{
		{"exact", 2, 0, 0, 0},
		{"untracked", 0, 0, 0, 0},
		{"fail and drop replay", 3, 0.02, 0.01, 0},
		{"acks held by a timer", 2, 0.01, 0, 5 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &words{counts: map[string]int64{}, fail: tc.fail, drop: tc.drop, seed: 9, doneIDs: map[uint64]int{}}
			cfg := DefaultConfig()
			cfg.Ackers = tc.ackers
			cfg.MaxPending = 256
			cfg.BatchSize = 64
			cfg.Timeout = 300 * time.Millisecond
			cfg.MaxReplays = 50
			cfg.AckDelay = tc.ackDelay
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
			if tc.fail > 0 && tc.drop > 0 && (st.Replayed == 0 || st.TimedOut == 0) {
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

// sinkTopology is lines -> one processor component running proc.
func sinkTopology(t *testing.T, lines []string, proc func(TaskInfo) (Processor, error)) *Topology {
	t.Helper()
	var b Builder
	var mu sync.Mutex
	b.Spout("lines", 1, func(task, tasks int) (source.Source, error) {
		return &memSource{lines: lines, mu: &mu, done: map[uint64]int{}}, nil
	})
	b.Processor("p", 2, proc).Shuffle("lines")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// runTopology runs topo on a fresh member, for at most 30 seconds.
func runTopology(t *testing.T, topo *Topology, cfg Config) *RunStats {
	t.Helper()
	st, err := tryTopology(t, topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// tryTopology is runTopology that returns the error Run ends with.
func tryTopology(t *testing.T, topo *Topology, cfg Config) (*RunStats, error) {
	t.Helper()
	rt, err := New(topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return rt.Run(ctx, startMember(t, rt), nil)
}

// procFunc adapts a function to Processor.
type procFunc func(t *Tuple, c *Collector)

func (f procFunc) Process(t *Tuple, c *Collector) { f(t, c) }

type sinkRecorder struct {
	mu  sync.Mutex
	got []DeadLetter
}

func (s *sinkRecorder) DeadLetter(d DeadLetter) {
	s.mu.Lock()
	s.got = append(s.got, d)
	s.mu.Unlock()
}

func testConfig(ackers int) Config {
	cfg := DefaultConfig()
	cfg.Ackers, cfg.MaxPending, cfg.BatchSize = ackers, 64, 16
	cfg.Timeout, cfg.ReportEvery, cfg.Log = 300*time.Millisecond, 20*time.Millisecond, quietLog()
	return cfg
}

func numbered(n int, special map[int]string) []string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf("line %d", i)
		if s, ok := special[i]; ok {
			lines[i] = s
		}
	}
	return lines
}

// TestPoisonRootIsDeadLettered: a root that always fails is replayed
// MaxReplays times, then handed to the dead-letter sink with its reason;
// every other root completes (Storm's STORM-618 loops forever instead).
func TestPoisonRootIsDeadLettered(t *testing.T) {
	lines := numbered(500, map[int]string{123: "poison"})
	topo := sinkTopology(t, lines, func(TaskInfo) (Processor, error) {
		return procFunc(func(tu *Tuple, c *Collector) {
			if tu.Values()[0] == "poison" {
				c.Fail(tu)
				return
			}
			c.Ack(tu)
		}), nil
	})
	sink := &sinkRecorder{}
	cfg := testConfig(2)
	cfg.MaxReplays, cfg.DeadLetters = 2, sink
	st := runTopology(t, topo, cfg)
	if st.Completed != 499 || st.DeadLettered != 1 || st.Replayed != 2 || st.Failed != 3 {
		t.Fatalf("stats %+v", st.Progress)
	}
	if len(sink.got) != 1 || sink.got[0].RootID != 123 || sink.got[0].Attempts != 3 ||
		sink.got[0].Payload != "poison" || !strings.Contains(sink.got[0].Reason, "failed by a processor after 2 replays") {
		t.Fatalf("dead letters %+v", sink.got)
	}
}

// TestRejectDeadLettersAtOnce: a root a processor rejects is dead-lettered
// at once with the processor's reason, not replayed; its child tuples in
// flight elsewhere change nothing, and every other root completes.
func TestRejectDeadLettersAtOnce(t *testing.T) {
	lines := numbered(500, map[int]string{123: "poison", 321: "poison"})
	topo := sinkTopology(t, lines, func(TaskInfo) (Processor, error) {
		return procFunc(func(tu *Tuple, c *Collector) {
			if tu.Values()[0] == "poison" {
				c.Reject(tu, "poison is no number")
				c.Reject(tu, "twice") // a second word on a done tuple changes nothing
				return
			}
			c.Ack(tu)
		}), nil
	})
	sink := &sinkRecorder{}
	cfg := testConfig(2)
	cfg.MaxReplays, cfg.DeadLetters = 5, sink
	st := runTopology(t, topo, cfg)
	if st.Completed != 498 || st.DeadLettered != 2 || st.Replayed != 0 || st.Failed != 2 {
		t.Fatalf("stats %+v", st.Progress)
	}
	for _, d := range sink.got {
		if (d.RootID != 123 && d.RootID != 321) || d.Attempts != 1 || d.Payload != "poison" || d.Reason != "rejected by p: poison is no number" {
			t.Fatalf("dead letters %+v", sink.got)
		}
	}
	if len(sink.got) != 2 {
		t.Fatalf("%d dead letters, want 2", len(sink.got))
	}
}

// TestLateAckOfEarlierAttempt: a processor holds the first attempt of a
// root past its timeout and acks it only after the replay arrived; the late
// ack completes nothing and the replay completes once.
func TestLateAckOfEarlierAttempt(t *testing.T) {
	lines := numbered(200, map[int]string{50: "slow"})
	var mu sync.Mutex
	var held *Tuple
	topo := sinkTopology(t, lines, func(TaskInfo) (Processor, error) {
		return procFunc(func(tu *Tuple, c *Collector) {
			if tu.Values()[0] != "slow" {
				c.Ack(tu)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if held == nil {
				held = tu // first attempt: keep it, unacked
				return
			}
			c.Ack(tu)
			c.Ack(held) // late: its root was failed and replayed since
		}), nil
	})
	cfg := testConfig(1)
	st := runTopology(t, topo, cfg)
	if st.Completed != 200 || st.Replayed != 1 || st.TimedOut != 1 || st.DeadLettered != 0 {
		t.Fatalf("stats %+v", st.Progress)
	}
	if st.Ackers[0].Completed != 200 {
		t.Fatalf("acker completed %d records, want 200", st.Ackers[0].Completed)
	}
}

// TestSpoutDeadlineReplaysWhenAckerDies stops an acker mid-run: its records
// are gone, and the re-activated acker never sees those inits, so only the
// spout's own deadline can replay those roots. Every root still completes.
func TestSpoutDeadlineReplaysWhenAckerDies(t *testing.T) {
	lines := numbered(2000, nil)
	topo := sinkTopology(t, lines, func(TaskInfo) (Processor, error) {
		return procFunc(func(tu *Tuple, c *Collector) {
			time.Sleep(200 * time.Microsecond)
			c.Ack(tu)
		}), nil
	})
	cfg := testConfig(2)
	rt, err := New(topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := startMember(t, rt)
	killed := false
	st, err := rt.Run(context.Background(), c, func(p Progress) {
		if !killed && p.Completed > 200 {
			killed = true
			c.ActorSystem.Root.Stop(c.Get(tracker.AckerIdentity(0), KindAcker))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !killed {
		t.Fatal("the run ended before the acker could be stopped")
	}
	if st.Completed != 2000 || st.DeadLettered != 0 || st.TimedOut == 0 || st.Replayed == 0 {
		t.Fatalf("stats %+v", st.Progress)
	}
}

// TestEveryRootDeadLettered: when every root fails for good the spout keeps
// pulling (dead letters free room under max pending) and the run ends.
func TestEveryRootDeadLettered(t *testing.T) {
	topo := sinkTopology(t, numbered(100, nil), func(TaskInfo) (Processor, error) {
		return procFunc(func(tu *Tuple, c *Collector) { c.Fail(tu) }), nil
	})
	sink := &sinkRecorder{}
	cfg := testConfig(1)
	cfg.MaxPending, cfg.MaxReplays, cfg.DeadLetters = 4, 1, sink
	st := runTopology(t, topo, cfg)
	if st.DeadLettered != 100 || st.Completed != 0 || st.Replayed != 100 || len(sink.got) != 100 {
		t.Fatalf("stats %+v, %d dead letters", st.Progress, len(sink.got))
	}
}

// panicSource panics when asked for its sixth root.
type panicSource struct{ memSource }

func (p *panicSource) Next() (source.Root, error) {
	if p.next == 5 {
		panic("source broke")
	}
	return p.memSource.Next()
}

type finishPanics struct{ procFunc }

func (finishPanics) Finish(*Collector) { panic("finish broke") }

// TestPanicsOutsideProcessEndTheRun: a panic in a source or in Finish is the
// run's error, not a silent hang.
func TestPanicsOutsideProcessEndTheRun(t *testing.T) {
	ack := procFunc(func(tu *Tuple, c *Collector) { c.Ack(tu) })
	for _, tc := range []struct {
		name string
		src  source.Factory
		proc Processor
		want string
	}{
		{"source", func(int, int) (source.Source, error) {
			return &panicSource{memSource{lines: numbered(20, nil), mu: &sync.Mutex{}, done: map[uint64]int{}}}, nil
		}, ack, "source broke"},
		{"finish", func(int, int) (source.Source, error) {
			return &memSource{lines: numbered(20, nil), mu: &sync.Mutex{}, done: map[uint64]int{}}, nil
		}, finishPanics{ack}, "finish broke"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b Builder
			b.Spout("lines", 1, tc.src)
			b.Processor("p", 1, func(TaskInfo) (Processor, error) { return tc.proc, nil }).Shuffle("lines")
			topo, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tryTopology(t, topo, testConfig(1)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run() = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// brokerSource is a memSource whose lines starting with "bad" are
// undecodable records and whose failed roots come back through Next, as
// from a broker that redelivers (a JetStream Nak).
type brokerSource struct {
	memSource
	again      []source.Root
	redelivers map[uint64][]int32
}

func (b *brokerSource) Next() (source.Root, error) {
	if len(b.again) > 0 {
		r := b.again[0]
		b.again = b.again[1:]
		return r, nil
	}
	r, err := b.memSource.Next()
	if err == nil && strings.HasPrefix(r.Payload, "bad") {
		return source.Root{}, &source.BadRecord{ID: r.ID, Payload: r.Payload, Reason: "not UTF-8"}
	}
	return r, err
}

func (b *brokerSource) Redeliver(id uint64, attempt int32) error {
	b.redelivers[id] = append(b.redelivers[id], attempt)
	b.again = append(b.again, source.Root{ID: id, Payload: b.lines[id], Attempt: attempt + 1})
	return nil
}

// brokerTopology is a spout over a brokerSource of lines and a processor
// of n tasks that fails each tuple fail says so of (under the source's
// lock) and acks the others.
func brokerTopology(t *testing.T, lines []string, n int, fail func(value string) bool) (*brokerSource, *Topology) {
	t.Helper()
	var mu sync.Mutex
	src := &brokerSource{memSource: memSource{lines: lines, mu: &mu, done: map[uint64]int{}}, redelivers: map[uint64][]int32{}}
	var b Builder
	b.Spout("lines", 1, func(int, int) (source.Source, error) { return src, nil })
	b.Processor("p", n, func(TaskInfo) (Processor, error) {
		return procFunc(func(tu *Tuple, c *Collector) {
			mu.Lock()
			defer mu.Unlock()
			if fail(tu.Values()[0]) {
				c.Fail(tu)
			} else {
				c.Ack(tu)
			}
		}), nil
	}).Shuffle("lines")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return src, topo
}

// TestBadRecordsAndRedelivery: a bad record is dead-lettered with its reason
// and the source goes on; a failing root goes back to its broker (not to
// Replay) with the attempt that failed, until it runs out of replays.
func TestBadRecordsAndRedelivery(t *testing.T) {
	lines := numbered(300, map[int]string{7: "bad one", 200: "bad two", 50: "flaky", 60: "poison"})
	flaky := 0
	src, topo := brokerTopology(t, lines, 2, func(v string) bool {
		switch {
		case v == "poison":
			return true
		case v == "flaky" && flaky < 2:
			flaky++
			return true
		}
		return false
	})
	sink := &sinkRecorder{}
	cfg := testConfig(1)
	cfg.MaxReplays, cfg.DeadLetters = 3, sink
	st := runTopology(t, topo, cfg)
	if st.Roots != 300 || st.Completed != 297 || st.DeadLettered != 3 || st.Replayed != 5 {
		t.Fatalf("stats %+v", st.Progress)
	}
	if st.LatencyP50 <= 0 || st.LatencyP99 < st.LatencyP50 || st.LatencyP99 > 10*time.Second {
		t.Fatalf("complete latency p50 %v p99 %v", st.LatencyP50, st.LatencyP99)
	}
	if got := fmt.Sprint(src.redelivers[50], src.redelivers[60]); got != "[0 1] [0 1 2]" {
		t.Fatalf("redelivered attempts (flaky, poison) = %s", got)
	}
	reasons := map[uint64]string{}
	for _, d := range sink.got {
		reasons[d.RootID] = d.Reason
	}
	if reasons[7] != "not UTF-8" || reasons[200] != "not UTF-8" || !strings.Contains(reasons[60], "after 3 replays") {
		t.Fatalf("dead letters %+v", sink.got)
	}
	if src.done[7] != 1 || src.done[60] != 1 || src.done[50] != 1 {
		t.Fatalf("done %v %v %v", src.done[7], src.done[60], src.done[50])
	}
}

// TestRedeliveryAfterTheEnd: a root that fails after its source has
// answered io.EOF goes back to its broker and is pulled again, not lost
// when the spout sees nothing pending.
func TestRedeliveryAfterTheEnd(t *testing.T) {
	failed := false
	src, topo := brokerTopology(t, []string{"once"}, 1, func(string) bool {
		if !failed { // by now the spout has read the end of its one line
			failed = true
			return true
		}
		return false
	})
	st := runTopology(t, topo, testConfig(1))
	if st.Roots != 1 || st.Completed != 1 || st.Replayed != 1 || st.DeadLettered != 0 {
		t.Fatalf("stats %+v", st.Progress)
	}
	if got := fmt.Sprint(src.redelivers[0]); got != "[0]" || src.done[0] != 1 {
		t.Fatalf("redelivered attempts %s, done %d", got, src.done[0])
	}
}

// backlogSource tells how many of its lines are still to come.
type backlogSource struct{ memSource }

func (b *backlogSource) Backlog() int64 { return int64(len(b.lines) - b.next) }

// TestStagesShowTheSource: with a source that tells its backlog, the stages
// start with the source's queue; without one they do not.
func TestStagesShowTheSource(t *testing.T) {
	var mu sync.Mutex
	lines := numbered(200_000, nil) // ~0.2 s: progress (every 20 ms) sees it
	var b Builder
	b.Spout("lines", 1, func(int, int) (source.Source, error) {
		return &backlogSource{memSource{lines: lines, mu: &mu, done: map[uint64]int{}}}, nil
	})
	b.Processor("p", 2, func(TaskInfo) (Processor, error) {
		return procFunc(func(tu *Tuple, c *Collector) { c.Ack(tu) }), nil
	}).Shuffle("lines")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(2)
	cfg.MaxPending = 64 // a backlog that lasts a while
	rt, err := New(topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sawSource := false
	if _, err := rt.Run(context.Background(), startMember(t, rt), func(Progress) {
		if st := rt.Stages(); st[0].Name == "source" && st[0].Queued > 0 && len(st) == 5 {
			sawSource = true
		}
	}); err != nil {
		t.Fatal(err)
	}
	if !sawSource {
		t.Fatal("no source stage with a backlog during the run")
	}
	if st := rt.Stages(); st[0].Name == "source" {
		t.Fatalf("a source stage after the run: %+v", st[0])
	}
}

// TestHeldTuplesKeepTheirValues: a processor that is no Reuser acks each
// tuple at once but keeps it, and reads it again in its next call; the
// counter downstream has its batches reused all the while, so a batch of
// the holder's reused too would show another root's values.
func TestHeldTuplesKeepTheirValues(t *testing.T) {
	lines := numbered(3000, nil)
	var b Builder
	var mu sync.Mutex
	b.Spout("lines", 1, func(task, tasks int) (source.Source, error) {
		return &memSource{lines: lines, mu: &mu, done: map[uint64]int{}}, nil
	})
	var bad []string
	b.Processor("hold", 1, func(TaskInfo) (Processor, error) {
		var held *Tuple
		var value string
		return procFunc(func(tu *Tuple, c *Collector) {
			if held != nil && held.Values()[0] != value {
				bad = append(bad, fmt.Sprintf("held %q reads %q", value, held.Values()[0]))
			}
			if err := c.Emit([]*Tuple{tu}, tu.Values()[0]); err != nil {
				t.Error(err)
			}
			c.Ack(tu)
			held, value = tu, tu.Values()[0]
		}), nil
	}).Shuffle("lines")
	b.Counter("count", 1, CounterOptions{Value: -1}, nil).Fields("hold", 0)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	st := runTopology(t, topo, testConfig(1))
	if len(bad) > 0 {
		t.Fatalf("%d held tuples changed, first: %s", len(bad), bad[0])
	}
	if st.Completed != 3000 || st.Counters["count"].Applied < 3000 {
		t.Fatalf("stats %+v, counter %+v", st.Progress, st.Counters["count"])
	}
}

// sharedBroker hands its lines out to two spout tasks from one cursor, as
// a broker's shared consumer does, and a root one task gives back
// (Redeliver) to the other task. It answers io.EOF only once every root is
// done: until then a redelivery may still come.
type sharedBroker struct {
	mu          sync.Mutex
	lines       []string
	next        int
	again       [2][]source.Root
	outstanding map[uint64]bool
	done        map[uint64]int
	nakFails    bool // Redeliver answers an error, and the root comes back anyway (at its ack wait)
}

// brokerTask is one task's view of a sharedBroker.
type brokerTask struct {
	b    *sharedBroker
	task int
}

func (s *brokerTask) GlobalIDs() {}

func (s *brokerTask) Next() (source.Root, error) {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case len(b.again[s.task]) > 0:
		r := b.again[s.task][0]
		b.again[s.task] = b.again[s.task][1:]
		return r, nil
	case b.next < len(b.lines):
		b.next++
		b.outstanding[uint64(b.next-1)] = true
		return source.Root{ID: uint64(b.next - 1), Payload: b.lines[b.next-1]}, nil
	case len(b.outstanding) > 0:
		return source.Root{}, source.ErrNotReady
	}
	return source.Root{}, io.EOF
}

func (s *brokerTask) Redeliver(id uint64, attempt int32) error {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	other := 1 - s.task
	b.again[other] = append(b.again[other], source.Root{ID: id, Payload: b.lines[id], Attempt: attempt + 1})
	if b.nakFails {
		return errors.New("nak: no such message held")
	}
	return nil
}

func (s *brokerTask) Replay(id uint64) (string, error) { return s.b.lines[id], nil }
func (s *brokerTask) Done(id uint64) {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	delete(s.b.outstanding, id)
	s.b.done[id]++
}
func (s *brokerTask) Total() int64 { return -1 }
func (s *brokerTask) Close() error { return nil }

// TestRedeliveryToAnotherTask: a root whose first attempt failed after
// some of its words were counted comes back through the other spout task;
// it is one root of the run, not two, and under exactly-once its words
// count once (its content ids derive from the spout, not the task, for a
// source with GlobalIDs). So too when the Nak fails and the broker hands the
// root out again after its ack wait.
func TestRedeliveryToAnotherTask(t *testing.T) {
	for _, nakFails := range []bool{false, true} {
		t.Run(fmt.Sprintf("nak fails=%v", nakFails), func(t *testing.T) { redeliveryToAnotherTask(t, nakFails) })
	}
}

func redeliveryToAnotherTask(t *testing.T, nakFails bool) {
	lines := make([]string, 200)
	truth := map[string]int64{}
	for i := range lines {
		lines[i] = fmt.Sprintf("w%d w%d n%d", i%7, i%5, i)
		for _, w := range strings.Fields(lines[i]) {
			truth[w]++
		}
	}
	b := &sharedBroker{lines: lines, outstanding: map[uint64]bool{}, done: map[uint64]int{}, nakFails: nakFails}
	var bld Builder
	bld.Spout("lines", 2, func(task, _ int) (source.Source, error) { return &brokerTask{b: b, task: task}, nil })
	var mu sync.Mutex
	failed := map[string]bool{}
	bld.Processor("split", 2, func(TaskInfo) (Processor, error) {
		return procFunc(func(tu *Tuple, c *Collector) {
			line := tu.Values()[0]
			for _, w := range strings.Fields(line) {
				_ = c.Emit([]*Tuple{tu}, w)
			}
			mu.Lock()
			first := !failed[line] && len(line)%3 == 0
			failed[line] = true
			mu.Unlock()
			if first { // after its words went out: they count
				c.Fail(tu)
				return
			}
			c.Ack(tu)
		}), nil
	}).Shuffle("lines")
	bld.Counter("count", 2, CounterOptions{Value: -1, ExactlyOnce: true}, nil).Fields("split", 0)
	topo, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(1)
	cfg.MaxReplays = 3
	st := runTopology(t, topo, cfg)
	if st.Roots != uint64(len(lines)) || st.Completed != st.Roots || st.Replayed == 0 || st.DeadLettered != 0 {
		t.Fatalf("stats %+v", st.Progress)
	}
	got := map[string]int64{}
	for _, e := range st.Counters["count"].Top {
		got[e.Key] = int64(e.Count)
	}
	if !maps.Equal(got, truth) {
		t.Fatalf("counts %v, truth %v (%d replayed, %d duplicates dropped)", got, truth, st.Replayed, st.Counters["count"].Duplicates)
	}
}

// TestProgressWhileIdle: once the input goes idle, the run's progress
// catches up with what the processors emitted (they reported only while
// handling batches, so the last burst's tuples stayed unreported).
func TestProgressWhileIdle(t *testing.T) {
	lines := numbered(300, nil)
	release := make(chan struct{})
	defer close(release)
	var b Builder
	b.Spout("lines", 1, func(int, int) (source.Source, error) {
		return &holdSource{lines: lines, released: release}, nil
	})
	b.Processor("split", 2, func(TaskInfo) (Processor, error) {
		return procFunc(func(tu *Tuple, c *Collector) {
			_ = c.Emit([]*Tuple{tu}, "x")
			c.Ack(tu)
		}), nil
	}).Shuffle("lines")
	b.Processor("sink", 1, func(TaskInfo) (Processor, error) {
		return procFunc(func(tu *Tuple, c *Collector) { c.Ack(tu) }), nil
	}).Shuffle("split")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(1)
	cfg.ReportEvery = 200 * time.Millisecond // longer than the burst takes
	rt, err := New(topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := startMember(t, rt)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _, _ = rt.Run(ctx, c, nil) }()
	defer func() { cancel(); <-done }()
	want := uint64(2 * len(lines)) // a root and a word per line
	waitFor(t, "the progress to count every tuple while the input is idle", func() bool {
		p, ok := rt.Progress()
		return ok && p.Completed == uint64(len(lines)) && p.Tuples == want
	})
}

// waitFor polls cond for up to 10 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestReporterKeepsAWholeSpoutState: a spout task's checkpoint or moved
// state that is malformed is refused and logged; the one before stays, so
// the task starts again from there (re-reading a little more) rather than
// from its source's start.
func TestReporterKeepsAWholeSpoutState(t *testing.T) {
	whole := &messages.SpoutState{Position: 40, SpringIds: []uint64{1}, RootIds: []uint64{7}, Times: []int64{1},
		Deadlines: []int64{2}, Attempts: []int32{0}, Checkpoint: true}
	for _, tc := range []struct {
		name string
		bad  func(st *messages.SpoutState) any
	}{
		{"a checkpoint", func(st *messages.SpoutState) any { return &messages.TaskReport{Task: 3, Checkpoint: st} }},
		{"a moved task's state", func(st *messages.SpoutState) any { return &messages.SpoutMoved{Task: 3, State: st} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReporter(splitsTopology(t), false, quietLog())
			r.receive(&standbyContext{msg: &messages.TaskReport{Task: 3, Checkpoint: proto.Clone(whole).(*messages.SpoutState)}})
			bad := proto.Clone(whole).(*messages.SpoutState)
			bad.Position, bad.SpringIds = 90, []uint64{1, 2}
			r.receive(&standbyContext{msg: tc.bad(bad)})
			if got := r.states[3]; got == nil || got.Position != 40 {
				t.Fatalf("after a malformed state the reporter holds %v, want the whole one at position 40", got)
			}
		})
	}
}

// TestReporterTuplesDoNotGoDown: a processor task that starts again after
// its member died reports its emissions from zero; the run's tuples (a
// Prometheus counter, and the progress line's rate) hold at their highest
// until the tasks pass it, rather than going down.
func TestReporterTuplesDoNotGoDown(t *testing.T) {
	r := newReporter(splitsTopology(t), false, quietLog())
	for _, tc := range []struct {
		task, emitted uint32
		want          uint64
	}{
		{7, 100, 100},
		{8, 50, 150},
		{7, 10, 150}, // task 7 started again
		{7, 90, 150},
		{7, 120, 170},
		{8, 60, 180},
	} {
		r.receive(&standbyContext{msg: &messages.TaskReport{Task: tc.task, Emitted: uint64(tc.emitted)}})
		if got := r.progress().Tuples; got != tc.want {
			t.Fatalf("task %d reported %d emitted: tuples %d, want %d", tc.task, tc.emitted, got, tc.want)
		}
	}
}

// splitsTopology has a spout of one task (task 0), a spout of three
// (tasks 1–3), a spout of three (4–6) and a processor of three (7–9).
func splitsTopology(t *testing.T) *Topology {
	var b Builder
	none := func(task, tasks int) (source.Source, error) { return &memSource{mu: &sync.Mutex{}}, nil }
	b.Spout("one", 1, none)
	b.Spout("lines", 3, none)
	b.Processor("p", 3, func(TaskInfo) (Processor, error) { return procFunc(func(*Tuple, *Collector) {}), nil }).Shuffle("lines")
	b.Spout("more", 3, none)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	for name, first := range map[string]uint32{"one": 0, "lines": 1, "more": 4, "p": 7} {
		if c := topo.byName[name]; c.FirstTask != first {
			t.Fatalf("%s's first task is %d, the test wants %d", name, c.FirstTask, first)
		}
	}
	return topo
}

// TestReporterGrantsSplits: each split of a spout component is granted to
// one task, in order, the first splits being the tasks' own; a task that
// asks again after a split it was granted more after (it started again
// from an older state) is granted the same again; requests that do not
// match the topology, or a source with another number of splits, are
// refused, and another component has its own splits.
func TestReporterGrantsSplits(t *testing.T) {
	req := func(task, first uint32, last int32) *messages.SplitRequest {
		return &messages.SplitRequest{Task: task, FirstTask: first, Parallel: 3, Splits: 6, Last: last}
	}
	r := newReporter(splitsTopology(t), true, quietLog())
	for i, step := range []struct {
		m    *messages.SplitRequest
		want int32
		ok   bool
	}{
		{req(2, 1, 1), 3, true},   // task 2 (index 1) after its first split
		{req(1, 1, 0), 4, true},   // task 1 after its first
		{req(2, 1, 3), 5, true},   // task 2 again
		{req(2, 1, 1), 3, true},   // task 2 started again from before split 3
		{req(2, 1, 3), 5, true},   // and then from before split 5
		{req(2, 1, 5), -1, true},  // none left
		{req(3, 1, 2), -1, true},  // none left for task 3 either
		{req(1, 1, 4), -1, true},  //
		{req(1, 1, 0), 4, true},   // task 1 still gets split 4 again after its first
		{req(4, 4, 0), 3, true},   // another component
		{req(7, 1, 0), 0, false},  // a processor's task
		{req(10, 1, 0), 0, false}, // no such task
		{req(5, 1, 0), 0, false},  // another component's task
		{req(1, 1, 6), 0, false},  // no such split
		{req(1, 1, -1), 0, false}, // no such split
		{&messages.SplitRequest{Task: 1, FirstTask: 1, Parallel: 2, Splits: 6, Last: 0}, 0, false}, // not its parallelism
		{&messages.SplitRequest{Task: 1, FirstTask: 1, Parallel: 3, Splits: 2, Last: 0}, 0, false}, // fewer splits than tasks
		{&messages.SplitRequest{Task: 1, FirstTask: 1, Parallel: 3, Splits: 9, Last: 0}, 0, false}, // another build's splits
	} {
		got, err := r.grant(step.m)
		if (err == nil) != step.ok || (err == nil && got != step.want) {
			t.Errorf("step %d: grant(task %d after %d) = %d, %v; want %d, ok %v", i, step.m.Task, step.m.Last, got, err, step.want, step.ok)
		}
	}
}

// TestReporterAnswersSplitRequests: the answer goes to the request's
// sender and names the split it follows; a refusal says why, and a
// request that names no sender is dropped.
func TestReporterAnswersSplitRequests(t *testing.T) {
	r := newReporter(splitsTopology(t), true, quietLog())
	from := &messages.Pid{Address: "nonhost", Id: "spout"}
	for _, tc := range []struct {
		m      *messages.SplitRequest
		answer *messages.SplitGrant
	}{
		{&messages.SplitRequest{Task: 2, FirstTask: 1, Parallel: 3, Splits: 6, Last: 1, From: from}, &messages.SplitGrant{Split: 3, After: 1}},
		{&messages.SplitRequest{Task: 7, FirstTask: 1, Parallel: 3, Splits: 6, Last: 1, From: from},
			&messages.SplitGrant{After: 1, Error: "spout task 7's split request: task 7 is no spout task of the topology"}},
		{&messages.SplitRequest{Task: 2, FirstTask: 1, Parallel: 3, Splits: 6, Last: 3}, nil},
		{&messages.SplitRequest{Task: 2, FirstTask: 1, Parallel: 3, Splits: 6, Last: 3, From: &messages.Pid{Address: "nonhost"}}, nil},
	} {
		ctx := &standbyContext{msg: tc.m}
		r.receive(ctx)
		switch {
		case tc.answer == nil && len(ctx.sent) != 0:
			t.Errorf("%v: answered %v, want nothing", tc.m, ctx.sent)
		case tc.answer != nil && (len(ctx.sent) != 1 || !proto.Equal(ctx.sent[0].msg.(proto.Message), tc.answer) || ctx.sent[0].to.Id != "spout"):
			t.Errorf("%v: answered %v, want %v to the sender", tc.m, ctx.sent, tc.answer)
		}
	}
}
