package main

import (
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"

	"github.com/acktor/acktor/actors"
	"github.com/acktor/acktor/member"
	"github.com/acktor/acktor/topologies/wordcount"
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
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := wordcountConfig(f)
			if err != nil {
				return err
			}
			return exitOf(member.Run(cmd.Context(), cfg, log, wordcount.Topology()), wordcountFlagOf)
		},
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
	fl.DurationVar(&f.ackDelay, "ack-delay", def.AckDelay, "how long a processor may hold acks to fold them into fewer messages; 0 holds them over at most 4 input batches, less when the task goes idle (best at high rates); a few ms helps when input batches are small")
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

// wordcountFlagOf is the flag of each key of a member's config the flags
// set.
var wordcountFlagOf = map[string]string{
	"tracker.ackers": "--ackers", "tracker.max_pending": "--max-pending", "tracker.timeout": "--timeout",
	"tracker.max_replays": "--max-replays", "tracker.batch": "--batch", "tracker.ack_delay": "--ack-delay",
	"tracker.progress": "--progress", "tracker.seed": "--seed",
	"job.spouts": "--spouts", "job.splitters": "--splitters", "job.counters": "--counters",
	"job.fail_rate": "--fail-rate", "job.drop_rate": "--drop-rate",
	"job.window": "--window", "job.pane": "--pane", "job.window/job.pane": "--window/--pane",
	"job.exactly_once": "--exactly-once", "job.input": "--input", "job.lines": "--generate",
	"job.event_step": "--event-step", "job.output": "--output", "job.stats": "--stats",
}

// wordcountConfig is the config of an embedded member that runs the word
// count the flags describe.
func wordcountConfig(f wordcountFlags) (member.Config, error) {
	usage := func(msg string) error { return &exitError{code: 2, msg: msg} }
	cfg := member.Default()
	cfg.Cluster.Name, cfg.Cluster.Provider = "acktor-wordcount", "embedded"
	cfg.Tracker = member.TrackerConfig{Ackers: f.ackers, Timeout: f.timeout, MaxPending: f.maxPending, MaxReplays: f.maxReplays,
		Batch: f.batch, Seed: f.seed, AckDelay: f.ackDelay, Progress: f.progress, WaitMembers: cfg.Tracker.WaitMembers}
	j := &cfg.Job
	j.Driver, j.Input, j.Output, j.Stats, j.Spouts = true, f.input, f.output, f.stats, f.spouts
	j.ExactlyOnce, j.Window, j.Pane = f.exactlyOnce, f.window, f.pane
	switch {
	case f.generate < 0:
		return cfg, usage(fmt.Sprintf("--generate %d: want a number of lines, >= 1", f.generate))
	case f.input != "" && f.generate != 0:
		return cfg, usage("--input and --generate: give one")
	case f.generate != 0:
		j.Source, j.Lines, j.EventStep = "generator", f.generate, f.eventStep
	case f.eventStep != 0:
		return cfg, usage("--event-step: only with --generate")
	case f.input == "":
		return cfg, usage("--input FILE (or --generate N) is required")
	}
	for key, v := range map[string]any{"splitters": f.splitters, "counters": f.counters, "fail_rate": f.failRate, "drop_rate": f.dropRate} {
		if err := j.Set(key, v); err != nil {
			return cfg, usage(err.Error())
		}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, exitOf(err, wordcountFlagOf)
	}
	return cfg, nil
}
