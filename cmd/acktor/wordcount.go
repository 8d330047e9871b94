package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/acktor/acktor/actors"
	"github.com/acktor/acktor/cluster"
	"github.com/acktor/acktor/source"
	"github.com/acktor/acktor/topologies/wordcount"
	"github.com/acktor/acktor/window"
)

type wordcountFlags struct {
	input, output, stats      string
	generate                  int64
	ackers, spouts, splitters int
	counters, maxPending      int
	maxReplays, batch         int
	timeout, ackDelay         time.Duration
	window, pane, eventStep   time.Duration
	exactlyOnce               bool
	failRate, dropRate        float64
	seed                      uint64
	progress                  string
	// src, if set, is the source instead of --input or --generate (a
	// node's ingest log).
	src source.Factory
}

func newWordcount(log *logrus.Logger) *cobra.Command {
	var f wordcountFlags
	cmd := &cobra.Command{
		Use:   "wordcount --input FILE",
		Short: "Count the words of a text with every line tracked as a root tuple (the paper's experiment 4)",
		Long: `Counts the words of a text file (or stdin, or a generated Zipf stream) on an
embedded single-member cluster. Each line is a root tuple; a split processor
emits one tuple per word anchored to it; windowed counter actors (fields
grouping on the word) count and ack. Ackers fold every tuple id into a 20-byte
record per line with XOR and tell the spout when a line's tree is done; failed
or timed out lines are replayed (at least once). With --exactly-once the
counters drop what a replay brings again, so the counts are exact.

With --window and --pane the counts are those of a sliding window over the
lines' times (when the spout first read them, or --event-step for generated
lines): the window that ends with the newest pane once every line is done.

Output: word<TAB>count per line, sorted bytewise by word. Exit status 0 only
when every line finished (none lost, none dead-lettered).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runWordcount(cmd.Context(), f, log) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.input, "input", "", "text file to count, one root tuple per line; - for stdin")
	fl.Int64Var(&f.generate, "generate", 0, "instead of --input, count N generated lines of Zipf-distributed words (seeded by --seed)")
	fl.StringVar(&f.output, "output", "", "where to write word<TAB>count lines (default stdout)")
	fl.StringVar(&f.stats, "stats", "", "write run statistics as JSON to this file")
	def := actors.DefaultConfig() // the tracker's defaults, defined once
	fl.IntVar(&f.ackers, "ackers", def.Ackers, "acker actors; 0 turns tracking off (a line counts as done once emitted)")
	fl.IntVar(&f.spouts, "spouts", 1, "spout tasks reading the input (stdin allows 1)")
	fl.IntVar(&f.splitters, "splitters", 2, "split processor tasks")
	fl.IntVar(&f.counters, "counters", 2, "count processor tasks")
	fl.IntVar(&f.maxPending, "max-pending", def.MaxPending, "lines in flight per spout task before it stops reading (backpressure)")
	fl.DurationVar(&f.timeout, "timeout", def.Timeout, "a line not finished after this long is failed and replayed")
	fl.IntVar(&f.maxReplays, "max-replays", def.MaxReplays, "replays of a line before it is dead-lettered")
	fl.IntVar(&f.batch, "batch", def.BatchSize, "tuples per batch between tasks, and roots per acker message")
	fl.DurationVar(&f.ackDelay, "ack-delay", def.AckDelay, "how long a processor may hold acks to fold them into fewer messages; 0 sends them after every input batch (best at high rates), a few ms helps when input batches are small")
	fl.DurationVar(&f.window, "window", 0, "count over a sliding window of this span (a multiple of --pane); 0 counts the whole input")
	fl.DurationVar(&f.pane, "pane", 0, "the window's pane: its resolution and the step it slides by (default: --window, a tumbling window)")
	fl.DurationVar(&f.eventStep, "event-step", 0, "with --generate: line j gets the event time j*step after 2026-01-01 UTC instead of the time it is read")
	fl.BoolVar(&f.exactlyOnce, "exactly-once", false, "counters drop updates they already applied (by content id), so replays never count twice; each counter task remembers up to 8M ids (those of the window, or of the whole input without --window)")
	fl.Float64Var(&f.failRate, "fail-rate", 0, "share of tuples the processors fail on purpose (0..1)")
	fl.Float64Var(&f.dropRate, "drop-rate", 0, "share of tuples the processors drop without acking, found only by the timeout (0..1)")
	fl.Uint64Var(&f.seed, "seed", def.Seed, "seed of tuple ids, fail/drop decisions and --generate")
	fl.StringVar(&f.progress, "progress", "auto", "progress on stderr: auto (a bar on a terminal, log lines otherwise), bar, log, none")
	return cmd
}

// sourceFor picks the source the flags name.
func sourceFor(f wordcountFlags) (source.Factory, error) {
	switch {
	case f.src != nil:
		return f.src, nil
	case f.generate < 0:
		return nil, optionError(2, "Generate", fmt.Sprintf(" %d: want a number of lines, >= 1", f.generate))
	case f.input != "" && f.generate > 0:
		return nil, optionError(2, "Input", " and --generate: give one")
	case f.generate > 0:
		return source.Generator(generatorConfig(f))
	case f.eventStep != 0:
		return nil, optionError(2, "EventStep", ": only with --generate")
	case f.input == "-":
		if f.spouts != 1 {
			return nil, optionError(2, "Spouts", fmt.Sprintf(" %d: stdin is read by one spout task", f.spouts))
		}
		return source.Reader(os.Stdin, "stdin"), nil
	case f.input != "":
		st, err := os.Stat(f.input)
		if err != nil {
			return nil, optionError(2, "Input", ": "+err.Error())
		}
		if st.IsDir() {
			return nil, optionError(2, "Input", fmt.Sprintf(" %s: is a directory", f.input))
		}
		return source.File(f.input), nil
	}
	return nil, optionError(2, "Input", " FILE (or --generate N) is required")
}

// generatorConfig is the stream of --generate.
func generatorConfig(f wordcountFlags) source.GeneratorConfig {
	return source.GeneratorConfig{Lines: f.generate, WordsPerLine: 10, Vocabulary: 50_000, Skew: 1.1, Seed: f.seed,
		EventStep: f.eventStep, EventStart: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// windowOf is the window the flags ask for; the zero Config counts it all.
func windowOf(f wordcountFlags) (window.Config, error) {
	switch {
	case f.window == 0 && f.pane == 0:
		return window.Config{}, nil
	case f.window <= 0:
		return window.Config{}, optionError(2, "WindowSize", fmt.Sprintf(" %v: want > 0 when a pane is given", f.window))
	case f.pane == 0:
		f.pane = f.window
	}
	w := window.Config{Size: f.window, Pane: f.pane}
	if err := w.Validate(); err != nil {
		return w, optionError(2, "Window", fmt.Sprintf(" %v/%v: %v", f.window, f.pane, err))
	}
	return w, nil
}

func runWordcount(ctx context.Context, f wordcountFlags, log *logrus.Logger) error {
	job, err := newWordcountJob(f, log, true)
	if err != nil {
		return err
	}
	node, err := cluster.StartEmbedded("acktor-wordcount", job.rt.Kinds(), log)
	if err != nil {
		return err
	}
	defer node.Stop()
	return job.run(ctx, node.Cluster)
}

// wordcountJob is a word count ready to run on a cluster member: the
// embedded one, or a node of a multi-machine cluster.
type wordcountJob struct {
	f    wordcountFlags
	win  window.Config
	rt   *actors.Runtime
	dead *deadLetters
	log  *logrus.Logger
}

// newWordcountJob checks the flags and builds the topology and runtime; a
// driver (the member that runs the job and writes its results) also checks
// that the output and the stats file can be written, before the run.
func newWordcountJob(f wordcountFlags, log *logrus.Logger, driver bool) (*wordcountJob, error) {
	switch f.progress {
	case "auto", "bar", "log", "none":
	default:
		return nil, optionError(2, "Progress", fmt.Sprintf(" %q: want auto, bar, log or none", f.progress))
	}
	win, err := windowOf(f)
	if err != nil {
		return nil, err
	}
	src, err := sourceFor(f)
	if err != nil {
		return nil, err
	}
	topo, err := wordcount.Build(src, wordcount.Options{Spouts: f.spouts, Splitters: f.splitters,
		Counters: f.counters, FailRate: f.failRate, DropRate: f.dropRate, Seed: f.seed,
		Window: win, ExactlyOnce: f.exactlyOnce})
	if err != nil {
		return nil, flagError(err)
	}
	j := &wordcountJob{f: f, win: win, dead: &deadLetters{}, log: log}
	cfg := actors.DefaultConfig()
	cfg.Ackers, cfg.MaxPending, cfg.Timeout, cfg.MaxReplays = f.ackers, f.maxPending, f.timeout, f.maxReplays
	cfg.BatchSize, cfg.AckDelay, cfg.Seed, cfg.Log, cfg.DeadLetters = f.batch, f.ackDelay, f.seed, log, j.dead
	if j.rt, err = actors.New(topo, cfg); err != nil {
		return nil, flagError(err)
	}
	if !driver {
		return j, nil
	}
	if err := checkWritable(f.output); err != nil { // written when the run ends, atomically
		return nil, optionError(2, "Output", ": "+err.Error())
	}
	if f.stats != "" { // find out now, not after the run, that it cannot be written
		fh, err := os.OpenFile(f.stats, os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			return nil, optionError(2, "Stats", ": "+err.Error())
		}
		_ = fh.Close()
	}
	return j, nil
}

// run runs the job from this member, writes the counts and the stats, and
// says whether every line finished.
func (j *wordcountJob) run(ctx context.Context, c *pcluster.Cluster) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	show := newProgress(j.f.progress)
	st, err := j.rt.Run(ctx, c, show.update)
	show.end()
	if err != nil {
		return &exitError{code: 1, msg: err.Error()}
	}
	// Written whole or not at all: a run that fails leaves the last counts.
	if err := writeAtomic(j.f.output, func(w io.Writer) error { return writeCounts(w, wordcount.Counts(st)) }); err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	if j.f.stats != "" {
		if err := writeStats(j.f.stats, st, j.win); err != nil {
			return fmt.Errorf("--stats: %w", err)
		}
	}
	return j.outcome(st, "lines")
}

// outcome is the exit of a run: an error unless every root (of what:
// lines, records) finished without a dead letter.
func (j *wordcountJob) outcome(st *actors.RunStats, what string) error {
	if st.Roots == 0 && j.log != nil {
		j.log.Warnf("no %s to count: the input is empty", what) // a run of nothing is no failure, but likely a mistake
	}
	switch {
	case st.DeadLettered > 0:
		return &exitError{code: 1, msg: fmt.Sprintf("%d of %d %s dead-lettered (first: %s)",
			st.DeadLettered, st.Roots, what, j.dead.first())}
	case st.Completed != st.Roots:
		return &exitError{code: 1, msg: fmt.Sprintf("%d of %d %s finished", st.Completed, st.Roots, what)}
	}
	return nil
}

// option is a setting of the word count: its flag in acktor wordcount and
// its key in acktor node's config ("" where the config has none).
type option struct{ flag, key string }

// options are the word count's settings by name: for those a library checks,
// the Go field its *actors.FieldError names.
var options = map[string]option{
	"Ackers": {"--ackers", "tracker.ackers"}, "MaxPending": {"--max-pending", "tracker.max_pending"},
	"Timeout": {"--timeout", "tracker.timeout"}, "MaxReplays": {"--max-replays", "tracker.max_replays"},
	"BatchSize": {"--batch", "tracker.batch"}, "AckDelay": {"--ack-delay", "tracker.ack_delay"},
	"Progress": {"--progress", "tracker.progress"},
	"Spouts":   {"--spouts", "job.spouts"}, "Splitters": {"--splitters", "job.splitters"}, "Counters": {"--counters", "job.counters"},
	"Window": {"--window/--pane", "job.window/job.pane"}, "WindowSize": {"--window", "job.window"},
	"Input":  {"--input", "job.input"},
	"Output": {"--output", "job.output"}, "Stats": {"--stats", "job.stats"},
	"FailRate": {"--fail-rate", ""}, "DropRate": {"--drop-rate", ""}, "EventStep": {"--event-step", ""},
	"Generate": {"--generate", ""},
}

// optionError is an error about the option name, rest being what follows
// its name: on the command line "--ackers -1, want 0..4096".
func optionError(code int, name, rest string) *exitError {
	return &exitError{code: code, msg: options[name].flag + rest, option: name, rest: rest}
}

// flagError turns a library's validation error into a usage error that
// names the flag.
func flagError(err error) error {
	var fe *actors.FieldError
	if errors.As(err, &fe) {
		if _, ok := options[fe.Field]; ok {
			return optionError(2, fe.Field, fmt.Sprintf(" %v, want %s", fe.Value, fe.Want))
		}
	}
	return &exitError{code: 2, msg: err.Error()}
}

func writeCounts(w io.Writer, counts map[string]int64) error {
	words := make([]string, 0, len(counts))
	for w := range counts {
		words = append(words, w)
	}
	slices.Sort(words) // bytewise
	bw := bufio.NewWriterSize(w, 1<<16)
	for _, word := range words {
		fmt.Fprintf(bw, "%s\t%d\n", word, counts[word])
	}
	return bw.Flush()
}

// statsJSON is the --stats file.
type statsJSON struct {
	Roots          uint64              `json:"roots"`
	Completed      uint64              `json:"completed"`
	Failed         uint64              `json:"failed"`
	Replayed       uint64              `json:"replayed"`
	TimedOut       uint64              `json:"timed_out"`
	DeadLettered   uint64              `json:"dead_lettered"`
	Tuples         uint64              `json:"tuples"`
	PeakInFlight   uint64              `json:"peak_in_flight"`
	ElapsedSeconds float64             `json:"elapsed_seconds"`
	TuplesPerSec   float64             `json:"tuples_per_second"`
	Ackers         []actors.AckerStats `json:"ackers"`
	Counted        uint64              `json:"counted"`    // word tuples folded into the counters
	Duplicates     uint64              `json:"duplicates"` // dropped by --exactly-once
	Late           uint64              `json:"late"`       // older than the window when they arrived
	Refused        uint64              `json:"refused"`    // refused by a counter limit: failed, replayed
	Window         *windowJSON         `json:"window,omitempty"`
}

// windowJSON is the window the counts cover.
type windowJSON struct {
	Start       time.Time `json:"start"`
	End         time.Time `json:"end"`
	SizeSeconds float64   `json:"size_seconds"`
	PaneSeconds float64   `json:"pane_seconds"`
}

func writeStats(path string, st *actors.RunStats, win window.Config) error {
	s := statsJSON{Roots: st.Roots, Completed: st.Completed, Failed: st.Failed, Replayed: st.Replayed,
		TimedOut: st.TimedOut, DeadLettered: st.DeadLettered, Tuples: st.Tuples, PeakInFlight: st.PeakInFlight,
		ElapsedSeconds: st.Elapsed.Seconds(), Ackers: st.Ackers}
	if c := st.Counters[wordcount.CountComponent]; c != nil {
		s.Counted, s.Duplicates, s.Late, s.Refused = c.Applied, c.Duplicates, c.Late, c.Refused
		if win != (window.Config{}) && c.HasWindow {
			s.Window = &windowJSON{Start: time.Unix(0, c.Start).UTC(), End: time.Unix(0, c.End).UTC(),
				SizeSeconds: win.Size.Seconds(), PaneSeconds: win.Pane.Seconds()}
		}
	}
	if s.Ackers == nil {
		s.Ackers = []actors.AckerStats{}
	}
	if st.Elapsed > 0 {
		s.TuplesPerSec = float64(st.Tuples) / st.Elapsed.Seconds()
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// deadLetters remembers the first dead letter for the exit message.
type deadLetters struct {
	mu      sync.Mutex
	n       int
	firstDL *actors.DeadLetter
}

func (d *deadLetters) DeadLetter(l actors.DeadLetter) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.n++
	if d.firstDL == nil {
		d.firstDL = &l
	}
}

func (d *deadLetters) first() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.firstDL == nil {
		return "none"
	}
	return fmt.Sprintf("root %d of %s: %s", d.firstDL.RootID, d.firstDL.Component, d.firstDL.Reason)
}

// progress shows a run on stderr: a one-line bar on a terminal, log lines
// otherwise. Rates are over the last second or more, so that the reports of
// many tasks arriving unevenly do not make them jump.
type progress struct {
	mode       string
	prev       actors.Progress // where the current rate window started
	rate       float64
	last       actors.Progress
	logged     actors.Progress // the last one a log line showed
	loggedRate float64         // ... and the rate it showed
}

func newProgress(mode string) *progress {
	p := &progress{mode: mode}
	if mode == "auto" {
		p.mode = "log"
		if term.IsTerminal(int(os.Stderr.Fd())) {
			p.mode = "bar"
		}
	}
	return p
}

func (p *progress) update(pr actors.Progress) {
	p.last = pr
	dt := (pr.Elapsed - p.prev.Elapsed).Seconds()
	if dt < 1 {
		if p.mode == "bar" {
			p.draw(pr)
		}
		return
	}
	p.rate = float64(pr.Tuples-p.prev.Tuples) / dt
	p.prev = pr
	switch p.mode {
	case "bar":
		p.draw(pr)
	case "log":
		if idle(p.logged, pr) && p.loggedRate == 0 { // an idle run (an ingest node waiting for records) logs once at 0/s, then nothing
			return
		}
		p.logged, p.loggedRate = pr, p.rate
		fmt.Fprintf(os.Stderr, "%s progress: roots %d/%s, %.0f tuples/s, in flight %d, replays %d, dead-lettered %d\n",
			time.Now().Format(time.TimeOnly), pr.Completed, total(pr), p.rate, pr.InFlight, pr.Replayed, pr.DeadLettered)
	}
}

// idle says whether nothing a progress line shows moved from a to b.
func idle(a, b actors.Progress) bool {
	return a.Roots == b.Roots && a.Completed == b.Completed && a.Tuples == b.Tuples && a.InFlight == b.InFlight &&
		a.Replayed == b.Replayed && a.DeadLettered == b.DeadLettered && a.Failed == b.Failed && a.Total == b.Total
}

func (p *progress) draw(pr actors.Progress) {
	fmt.Fprintf(os.Stderr, "\r%s roots %d/%s | %.2fM tuples/s | in flight %d | replays %d | dead %d   ",
		bar(pr.Completed, pr.Total), pr.Completed, total(pr), p.rate/1e6, pr.InFlight, pr.Replayed, pr.DeadLettered)
}

// end closes the bar with the whole run's average rate.
func (p *progress) end() {
	if p.mode != "bar" || p.last.Elapsed == 0 {
		return
	}
	p.rate = float64(p.last.Tuples) / p.last.Elapsed.Seconds()
	p.draw(p.last)
	fmt.Fprintln(os.Stderr, "(average)")
}

func total(pr actors.Progress) string {
	if pr.Total < 0 {
		return "?"
	}
	return fmt.Sprint(pr.Total)
}

func bar(done uint64, total int64) string {
	const width = 20
	if total <= 0 {
		return "[" + strings.Repeat("?", width) + "]"
	}
	n := min(int(done*width/uint64(total)), width)
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}
