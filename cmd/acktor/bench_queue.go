package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"

	"github.com/acktor/acktor/actors"
	"github.com/acktor/acktor/cluster"
	"github.com/acktor/acktor/source"
)

// benchQueueFlags are the flags of bench queue.
type benchQueueFlags struct {
	loads    string
	service  time.Duration
	servers  int
	duration time.Duration
	seed     uint64
}

func newBenchQueue(log *logrus.Logger) *cobra.Command {
	var f benchQueueFlags
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "Put the M/M/c model of each stage beside the measured queue, for a few loads",
		Long: `Runs a topology whose processor stage is a textbook M/M/c queue: a spout
emits one tuple at a time at exponentially distributed intervals (Poisson
arrivals) to --servers processor tasks that each work an exponentially
distributed time (mean --service, busy, not asleep). For each load ρ of
--loads it sets the arrival rate to ρ·servers/service, runs for --duration
and prints what the runtime measured of the processor stage (arrival rate
λ, service rate μ, the messages in the stage and the time spent there)
beside what the M/M/c model predicts from the measured λ and μ.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			loads, err := parseLoads(f.loads)
			if err != nil {
				return usageError("%v", err)
			}
			switch {
			case f.service < 10*time.Microsecond || f.service > time.Second:
				return usageError("--service %v: want 10µs..1s", f.service)
			case f.servers < 1 || f.servers > 64:
				return usageError("--servers %d: want 1..64", f.servers)
			case f.duration < time.Second || f.duration > time.Hour:
				return usageError("--duration %v: want 1s..1h", f.duration)
			}
			return benchQueue(cmd.Context(), cmd.OutOrStdout(), log, f, loads)
		},
	}
	cmd.Flags().StringVar(&f.loads, "loads", "0.3,0.5,0.7,0.9", "target utilisations, comma-separated, each in (0, 1)")
	cmd.Flags().DurationVar(&f.service, "service", 200*time.Microsecond, "mean service time of a processor task")
	cmd.Flags().IntVar(&f.servers, "servers", 1, "processor tasks (the c of M/M/c)")
	cmd.Flags().DurationVar(&f.duration, "duration", 4*time.Second, "how long each load runs")
	cmd.Flags().Uint64Var(&f.seed, "seed", 1, "seed of arrivals and service times")
	return cmd
}

func parseLoads(s string) ([]float64, error) {
	var out []float64
	for _, part := range strings.Split(s, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(part), 64)
		if err != nil || !(x > 0 && x < 1) {
			return nil, fmt.Errorf("--loads: %q: want numbers in (0, 1)", part)
		}
		out = append(out, x)
	}
	return out, nil
}

func benchQueue(ctx context.Context, out io.Writer, log *logrus.Logger, f benchQueueFlags, loads []float64) error {
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "target ρ\tλ/s\tμ/s\tρ\tin stage: M/M/%d\t%d×M/M/1\tmeasured\ttime in stage: M/M/%d\t%d×M/M/1\tmeasured\t\n",
		f.servers, f.servers, f.servers, f.servers)
	var behind []string
	for i, rho := range loads {
		st, err := queueRun(ctx, log, f, rho, f.seed+uint64(i))
		if err != nil {
			return err
		}
		model, wait := inStage(st.Model)
		split, splitWait := inStage(st.Split)
		fmt.Fprintf(tw, "%.2f\t%.0f\t%.0f\t%.2f\t%s\t%s\t%.2f\t%s\t%s\t%s\t\n", rho, st.Arrivals, st.Service, st.Model.Rho,
			model, split, st.L, wait, splitWait, st.W.Round(time.Microsecond))
		if st.Model != (actors.MMc{}) && !st.Model.Stable && st.Service < 0.95/f.service.Seconds() {
			behind = append(behind, fmt.Sprintf("%.2f", rho))
		}
		log.Infof("bench queue: load %.2f done", rho)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(behind) > 0 {
		_, err := fmt.Fprintf(out, "\nAt target ρ %s the tasks served slower than --service %v (measured μ per task below %.0f/s): this machine could not keep up, "+
			"so ρ reached 1 and the models have no steady state (unstable, ∞). Run again on a quieter machine, or with lower --loads or a longer --service.\n",
			strings.Join(behind, ", "), f.service, 1/f.service.Seconds())
		return err
	}
	return nil
}

// queueRun runs the queue topology at load rho and returns its processor
// stage as the runtime measured it at the end.
func queueRun(ctx context.Context, log *logrus.Logger, f benchQueueFlags, rho float64, seed uint64) (actors.Stage, error) {
	lambda := rho * float64(f.servers) / f.service.Seconds()
	var b actors.Builder
	b.Spout("arrivals", 1, func(int, int) (source.Source, error) {
		return &poisson{rate: lambda, rng: rand.New(rand.NewPCG(seed, 1))}, nil
	})
	b.Processor("work", f.servers, func(ti actors.TaskInfo) (actors.Processor, error) {
		return &exponentialWork{mean: f.service, rng: rand.New(rand.NewPCG(seed, 2+uint64(ti.Index)))}, nil
	}).Shuffle("arrivals")
	topo, err := b.Build()
	if err != nil {
		return actors.Stage{}, err
	}
	cfg := actors.DefaultConfig()
	// One tuple per message, sent within 50 µs (the shortest idle wait)
	// of when it is due: the stage sees single arrivals, as the model has
	// them, a little late at most.
	cfg.BatchSize, cfg.IdleWait, cfg.Log, cfg.MaxPending = 1, 50*time.Microsecond, log, 1<<16
	rt, err := actors.New(topo, cfg)
	if err != nil {
		return actors.Stage{}, err
	}
	node, err := cluster.StartEmbedded("bench-queue", rt.Kinds(), log)
	if err != nil {
		return actors.Stage{}, err
	}
	defer node.Stop()
	rctx, cancel := context.WithTimeout(ctx, f.duration)
	defer cancel()
	var last actors.Stage
	_, err = rt.Run(rctx, node.Cluster, func(actors.Progress) {
		for _, st := range rt.Stages() {
			if st.Name == actors.KindProcessor {
				last = st
			}
		}
	})
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return actors.Stage{}, err
	}
	return last, nil
}

// poisson yields roots at exponentially distributed intervals, forever.
type poisson struct {
	rate float64
	rng  *rand.Rand
	due  time.Time
	n    uint64
}

func (p *poisson) Next() (source.Root, error) {
	now := time.Now()
	if p.due.IsZero() {
		p.due = now
	}
	if now.Before(p.due) {
		return source.Root{}, source.ErrNotReady
	}
	p.due = p.due.Add(time.Duration(p.rng.ExpFloat64() / p.rate * float64(time.Second)))
	p.n++
	return source.Root{ID: p.n, Payload: "x"}, nil
}

func (p *poisson) Replay(uint64) (string, error) { return "x", nil }
func (p *poisson) Done(uint64)                   {}
func (p *poisson) Total() int64                  { return -1 }
func (p *poisson) Close() error                  { return nil }

// exponentialWork keeps its task busy for an exponentially distributed time
// per tuple, then acks it.
type exponentialWork struct {
	mean time.Duration
	rng  *rand.Rand
}

func (w *exponentialWork) Process(t *actors.Tuple, c *actors.Collector) {
	end := time.Now().Add(time.Duration(w.rng.ExpFloat64() * float64(w.mean)))
	for time.Now().Before(end) {
	}
	c.Ack(t)
}
