package wordcount

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/sirupsen/logrus"

	"github.com/acktor/acktor/actors"
	"github.com/acktor/acktor/cluster"
	"github.com/acktor/acktor/internal/testserver"
	"github.com/acktor/acktor/source"
	jssource "github.com/acktor/acktor/source/jetstream"
	"github.com/acktor/acktor/window"
)

func quiet() *logrus.Logger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

// run counts the words of src on an embedded cluster.
func run(tb testing.TB, src source.Factory, o Options, cfg actors.Config) (map[string]int64, *actors.RunStats) {
	tb.Helper()
	topo, err := Build(src, o)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.Log = quiet()
	rt, err := actors.New(topo, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	node, err := cluster.StartEmbedded("wc", rt.Kinds(), quiet())
	if err != nil {
		tb.Fatal(err)
	}
	defer node.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := rt.Run(ctx, node.Cluster, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return Counts(st), st
}

func fileTruth(t *testing.T, path string) map[string]int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	truth := map[string]int64{}
	for _, w := range strings.Fields(string(b)) {
		truth[w]++
	}
	return truth
}

// TestOpticks is the paper's experiment 4 on the text shipped with the
// example: exact counts without failures, at least the truth with them.
func TestOpticks(t *testing.T) {
	truth := fileTruth(t, "opticks.txt")
	for _, tc := range []struct {
		name       string
		ackers     int
		fail, drop float64
	}{
		{"tracked", 2, 0, 0},
		{"untracked", 0, 0, 0},
		{"fail and drop", 3, 0.01, 0.005},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := actors.DefaultConfig()
			cfg.Ackers, cfg.Timeout, cfg.MaxReplays, cfg.MaxPending = tc.ackers, 500*time.Millisecond, 20, 1024
			counts, st := run(t, source.File("opticks.txt"), Options{Spouts: 2, Splitters: 2, Counters: 3,
				FailRate: tc.fail, DropRate: tc.drop, Seed: 3}, cfg)
			if st.Completed != st.Roots || st.DeadLettered != 0 {
				t.Fatalf("%d of %d roots completed, %d dead-lettered", st.Completed, st.Roots, st.DeadLettered)
			}
			exact := tc.fail == 0 && tc.drop == 0
			for w, n := range truth {
				if got := counts[w]; got < n || (exact && got != n) {
					t.Fatalf("%q counted %d, truth %d", w, got, n)
				}
			}
			if len(counts) != len(truth) {
				t.Fatalf("%d words counted, %d in the text", len(counts), len(truth))
			}
			if !exact && st.Replayed == 0 {
				t.Fatal("failures caused no replays")
			}
		})
	}
}

// TestExactlyOnce: with fail and drop rates, replays bring words again,
// and the counters drop them: the counts are exactly the truth.
func TestExactlyOnce(t *testing.T) {
	truth := fileTruth(t, "opticks.txt")
	cfg := actors.DefaultConfig()
	cfg.Ackers, cfg.Timeout, cfg.MaxReplays, cfg.MaxPending = 3, 500*time.Millisecond, 20, 1024
	counts, st := run(t, source.File("opticks.txt"), Options{Spouts: 2, Splitters: 2, Counters: 3,
		FailRate: 0.01, DropRate: 0.005, Seed: 3, ExactlyOnce: true}, cfg)
	if st.Completed != st.Roots || st.DeadLettered != 0 || st.Replayed == 0 {
		t.Fatalf("%d of %d roots completed, %d dead-lettered, %d replayed", st.Completed, st.Roots, st.DeadLettered, st.Replayed)
	}
	if c := st.Counters[CountComponent]; c.Duplicates == 0 {
		t.Fatalf("replays brought no duplicates: %+v", c)
	}
	if len(counts) != len(truth) {
		t.Fatalf("%d words counted, %d in the text", len(counts), len(truth))
	}
	for w, n := range truth {
		if counts[w] != n {
			t.Fatalf("%q counted %d, truth %d", w, counts[w], n)
		}
	}
}

// TestExactlyOnceJetStream: two spout tasks share a JetStream consumer,
// and a failed line's Nak brings it back through either of them. Every
// line is still one root, and its words count once: content ids derive
// from the spout component for a broker's source, not from the task.
func TestExactlyOnceJetStream(t *testing.T) {
	srv, stop := testserver.JetStream(t)
	defer stop()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "L", Subjects: []string{"l"}, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	truth := map[string]int64{}
	for i := range 2000 {
		line := fmt.Sprintf("a%d b%d c%d d%d e%d", i%50, i%70, i%90, i%110, i%130)
		for _, w := range strings.Fields(line) {
			truth[w]++
		}
		if _, err := js.Publish(ctx, "l", []byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := actors.DefaultConfig()
	cfg.Ackers, cfg.Timeout, cfg.MaxReplays, cfg.MaxPending = 2, 2*time.Second, 50, 256
	src := jssource.New(jssource.Config{URL: srv.ClientURL(), Stream: "L", Consumer: "wc", StopAtEnd: true,
		Backoff: []time.Duration{5 * time.Millisecond}, Fetch: 32})
	counts, st := run(t, src, Options{Spouts: 2, Splitters: 2, Counters: 2, FailRate: 0.02, Seed: 3, ExactlyOnce: true}, cfg)
	if st.Roots != 2000 || st.Completed != st.Roots || st.DeadLettered != 0 || st.Replayed == 0 {
		t.Fatalf("%d roots, %d completed, %d dead-lettered, %d replayed; want 2000 completed after replays",
			st.Roots, st.Completed, st.DeadLettered, st.Replayed)
	}
	if c := st.Counters[CountComponent]; c.Duplicates == 0 {
		t.Fatalf("replays brought no duplicates: %+v", c)
	}
	for w, n := range truth {
		if counts[w] != n {
			t.Fatalf("%q counted %d, truth %d", w, counts[w], n)
		}
	}
}

// TestWindow: generated lines with event times 1 ms apart, a 2 s window of
// 250 ms panes: the counts are those of the lines in the last window, with
// failures and exactly once.
func TestWindow(t *testing.T) {
	gc := source.GeneratorConfig{Lines: 6000, WordsPerLine: 4, Vocabulary: 300, Skew: 1.2, Seed: 7,
		EventStep: time.Millisecond, EventStart: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	gen, err := source.Generator(gc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := actors.DefaultConfig()
	cfg.Ackers, cfg.Timeout, cfg.MaxReplays, cfg.MaxPending = 2, 300*time.Millisecond, 20, 256
	counts, st := run(t, gen, Options{Spouts: 2, Splitters: 2, Counters: 2, FailRate: 0.01, Seed: 5,
		Window: window.Config{Size: 2 * time.Second, Pane: 250 * time.Millisecond}, ExactlyOnce: true}, cfg)
	c := st.Counters[CountComponent]
	start := time.Unix(0, c.Start).Sub(gc.EventStart)
	if !c.HasWindow || start != 4*time.Second || time.Duration(c.End-c.Start) != 2*time.Second {
		t.Fatalf("window [%v, +%v), want [4s, +2s)", start, time.Duration(c.End-c.Start))
	}
	truth, err := source.GeneratorTruthLines(gc, 4000, 6000) // times 4.000 .. 5.999 s
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != len(truth) {
		t.Fatalf("%d words in the window, truth %d", len(counts), len(truth))
	}
	for w, n := range truth {
		if counts[w] != n {
			t.Fatalf("%q counted %d in the window, truth %d", w, counts[w], n)
		}
	}
}

// childEnv makes the test binary run one word count and print its stats:
// BenchmarkWordcount measures each run in a fresh process, as a user runs
// the command, so that one run's heap and goroutines do not weigh on the
// next. It holds the acker count; childInput the file to count.
const (
	childEnv   = "ACKTOR_WORDCOUNT_BENCH_ACKERS"
	childInput = "ACKTOR_WORDCOUNT_BENCH_INPUT"
)

func TestMain(m *testing.M) {
	if v := os.Getenv(childEnv); v != "" {
		os.Exit(benchChild(v, os.Getenv(childInput)))
	}
	os.Exit(m.Run())
}

const benchLines = 1_000_000

// benchInput writes the benchmark's text once: 1M generated lines of ten
// Zipf-distributed words from a vocabulary of 50 000.
func benchInput(b *testing.B) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "lines.txt")
	gen, err := source.Generator(source.GeneratorConfig{Lines: benchLines, WordsPerLine: 10, Vocabulary: 50_000, Skew: 1.1, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	src, err := gen(0, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for {
		r, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		w.WriteString(r.Payload)
		w.WriteByte('\n')
	}
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		b.Fatal(err)
	}
	return path
}

func benchChild(ackers, input string) int {
	n, err := strconv.Atoi(ackers)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg := actors.DefaultConfig()
	cfg.Ackers = n
	tb := &testing.B{}
	counts, st := run(tb, source.File(input), Options{Spouts: 1, Splitters: 2, Counters: 2}, cfg)
	if st.Completed != st.Roots || st.Roots != benchLines {
		fmt.Fprintf(os.Stderr, "%d of %d roots completed\n", st.Completed, st.Roots)
		return 1
	}
	words := int64(0)
	for _, c := range counts {
		words += c
	}
	fmt.Printf("%d %d %d\n", st.Tuples, words, st.Elapsed.Nanoseconds())
	return 0
}

// selfCPU is the CPU time this process has used so far.
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// bareCount is the yardstick: a plain single-goroutine Go word count of
// path (bufio.Scanner, strings.Fields, a map, the counts written sorted).
// It returns the words counted and the time taken.
func bareCount(b *testing.B, path string) (int64, time.Duration) {
	b.Helper()
	start := time.Now()
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	counts := map[string]int{}
	words := int64(0)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		for _, w := range strings.Fields(sc.Text()) {
			counts[w]++
			words++
		}
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	keys := slices.Sorted(maps.Keys(counts))
	out := bufio.NewWriter(io.Discard)
	for _, k := range keys {
		fmt.Fprintf(out, "%s\t%d\n", k, counts[k])
	}
	if err := out.Flush(); err != nil {
		b.Fatal(err)
	}
	return words, time.Since(start)
}

// BenchmarkWordcount measures the word count end to end on one machine, on
// 1M generated lines (~11M tuples) in a file: with tracking on (2, 4 and 8
// ackers) and off (--ackers 0), each run in a fresh process, alternating
// which goes first; only the runs are timed (not process or member start).
// In the same iterations the parent counts the same file with a bare
// single-goroutine Go word count. "overhead-%" is what tracking costs in
// throughput; "x-bare" is tracked words/s over the bare count's.
func BenchmarkWordcount(b *testing.B) {
	input := benchInput(b)
	for _, ackers := range []int{2, 4, 8} {
		b.Run(fmt.Sprintf("ackers=%d", ackers), func(b *testing.B) {
			var tuples, words [2]int64
			var elapsed, cpu [2]time.Duration
			var bareWords int64
			var bare, bareCPU time.Duration
			for i := range b.N {
				for k := range 2 {
					j := (i + k) % 2 // alternate which goes first
					cmd := exec.Command(os.Args[0], "-test.run=^$")
					cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", childEnv, []int{ackers, 0}[j]), childInput+"="+input)
					cmd.Stderr = os.Stderr
					out, err := cmd.Output()
					if err != nil {
						b.Fatalf("word count child: %v", err)
					}
					var n, w, ns int64
					if _, err := fmt.Sscan(string(out), &n, &w, &ns); err != nil {
						b.Fatalf("word count child printed %q: %v", out, err)
					}
					tuples[j] += n
					words[j] += w
					elapsed[j] += time.Duration(ns)
					cpu[j] += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
				}
				before := selfCPU(b)
				w, d := bareCount(b, input)
				bareWords, bare, bareCPU = bareWords+w, bare+d, bareCPU+selfCPU(b)-before
			}
			if words[0] != bareWords {
				b.Fatalf("tracked runs counted %d words, the bare count %d", words[0], bareWords)
			}
			tracked := float64(tuples[0]) / elapsed[0].Seconds()
			untracked := float64(tuples[1]) / elapsed[1].Seconds()
			trackedWords := float64(words[0]) / elapsed[0].Seconds()
			bareRate := float64(bareWords) / bare.Seconds()
			b.ReportMetric(tracked, "tracked-tuples/s")
			b.ReportMetric(untracked, "untracked-tuples/s")
			b.ReportMetric(100*(1-tracked/untracked), "overhead-%")
			b.ReportMetric(trackedWords, "tracked-words/s")
			b.ReportMetric(bareRate, "bare-words/s")
			b.ReportMetric(trackedWords/bareRate, "x-bare")
			// CPU time leaves out what the machine's other tenants take
			// (steal), which moves the rates above from run to run.
			perWord := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(words[0]) }
			b.ReportMetric(perWord(cpu[0]), "tracked-cpu-ns/word")
			b.ReportMetric(perWord(cpu[1]), "untracked-cpu-ns/word")
			b.ReportMetric(perWord(bareCPU), "bare-cpu-ns/word")
			b.ReportMetric(100*(float64(cpu[0])/float64(cpu[1])-1), "cpu-overhead-%")
		})
	}
}
