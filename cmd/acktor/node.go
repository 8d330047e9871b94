package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go.opentelemetry.io/otel"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/acktor/acktor/cluster"
	"github.com/acktor/acktor/gateway"
)

// nodeConfig is the file `acktor node --config` reads.
type nodeConfig struct {
	Cluster cluster.Config `yaml:"cluster"`
	Tracker trackerConfig  `yaml:"tracker"`
	Job     jobConfig      `yaml:"job"`
	Gateway gateway.Config `yaml:"gateway"`
}

// trackerConfig is the runtime's side of the file.
type trackerConfig struct {
	Ackers      int           `yaml:"ackers"`
	Timeout     time.Duration `yaml:"timeout"`
	MaxPending  int           `yaml:"max_pending"`
	MaxReplays  int           `yaml:"max_replays"`
	Batch       int           `yaml:"batch"`
	Seed        uint64        `yaml:"seed"`
	AckDelay    time.Duration `yaml:"ack_delay"`
	Progress    string        `yaml:"progress"`
	WaitMembers time.Duration `yaml:"wait_members"`
}

// jobConfig says which topology the cluster runs; every member must carry
// the same one. The driver runs it once the members are up and writes its
// results; the other members host its tasks until they are stopped.
type jobConfig struct {
	Topology    string        `yaml:"topology"`
	Driver      bool          `yaml:"driver"`
	Members     int           `yaml:"members"`
	Input       string        `yaml:"input"`
	Output      string        `yaml:"output"`
	Stats       string        `yaml:"stats"`
	Spouts      int           `yaml:"spouts"`
	Splitters   int           `yaml:"splitters"`
	Counters    int           `yaml:"counters"`
	ExactlyOnce bool          `yaml:"exactly_once"`
	Window      time.Duration `yaml:"window"`
	Pane        time.Duration `yaml:"pane"`
}

func defaultNodeConfig() nodeConfig {
	return nodeConfig{
		Cluster: cluster.DefaultConfig(),
		Tracker: trackerConfig{Ackers: 2, Timeout: 30 * time.Second, MaxPending: 2048, MaxReplays: 5, Batch: 512,
			Seed: 1, Progress: "log", WaitMembers: time.Minute},
		Job: jobConfig{Topology: "wordcount", Members: 1, Spouts: 1, Splitters: 2, Counters: 2},
	}
}

// loadNodeConfig reads path over the defaults; unknown fields are errors.
func loadNodeConfig(path string) (nodeConfig, error) {
	cfg := defaultNodeConfig()
	b, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("--config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return cfg, fmt.Errorf("--config %s: %w", path, err)
	}
	if err := cfg.validate(); err != nil {
		return cfg, fmt.Errorf("--config %s: %w", path, err)
	}
	return cfg, nil
}

func (c nodeConfig) validate() error {
	if err := c.Cluster.Validate(); err != nil {
		return err
	}
	switch {
	case c.Job.Topology != "wordcount":
		return fmt.Errorf("job.topology %q: want wordcount", c.Job.Topology)
	case c.Job.Input == "":
		return errors.New("job.input: empty; name the text file every member reads")
	case c.Job.Members < 1:
		return fmt.Errorf("job.members %d: want >= 1", c.Job.Members)
	case c.Tracker.WaitMembers <= 0:
		return fmt.Errorf("tracker.wait_members %v: want > 0", c.Tracker.WaitMembers)
	case c.Gateway.Address != "":
		if _, _, err := net.SplitHostPort(c.Gateway.Address); err != nil {
			return fmt.Errorf("gateway.address %q: want host:port", c.Gateway.Address)
		}
	}
	if _, err := c.Gateway.Secret(os.Getenv); err != nil {
		return err
	}
	return nil
}

// flags is the job as the word count's flags say it.
func (c nodeConfig) flags() wordcountFlags {
	j, t := c.Job, c.Tracker
	f := wordcountFlags{input: j.Input, output: j.Output, stats: j.Stats, spouts: j.Spouts, splitters: j.Splitters,
		counters: j.Counters, exactlyOnce: j.ExactlyOnce, window: j.Window, pane: j.Pane,
		ackers: t.Ackers, timeout: t.Timeout, maxPending: t.MaxPending, maxReplays: t.MaxReplays,
		batch: t.Batch, seed: t.Seed, ackDelay: t.AckDelay, progress: t.Progress}
	return f
}

func newNode(log *logrus.Logger) *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "node --config FILE",
		Short: "Run one member of a multi-machine acktor cluster",
		Long: `Starts one cluster member as the config file describes: where it listens,
how it finds the other members, the tracker's settings and the job (topology)
the cluster runs. Every member carries the same job. The member with
job.driver: true waits for job.members members, runs the job and writes its
results, then leaves; the others host the job's spout tasks, processor tasks
and ackers until they are stopped (SIGINT or SIGTERM: they leave gracefully).
The driver alone hosts the counters, whose state is the result.

A member that dies mid-run loses what it held: its spout tasks start again on
another member and re-read their input, the roots its processors and ackers
held replay after their timeout, so every line is still processed (at least
once).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadNodeConfig(path)
			if err != nil {
				return &exitError{code: 2, msg: err.Error()}
			}
			return runNode(cmd.Context(), cfg, log)
		},
	}
	cmd.Flags().StringVar(&path, "config", "acktor.yaml", "the node's YAML config file")
	return cmd
}

func runNode(ctx context.Context, cfg nodeConfig, log *logrus.Logger) error {
	job, err := newWordcountJob(cfg.flags(), log, cfg.Job.Driver)
	if err != nil {
		return configError(err)
	}
	defer job.close()
	kinds := job.rt.WorkerKinds()
	if cfg.Job.Driver {
		kinds = job.rt.Kinds()
	}
	var metrics *gateway.Metrics
	if cfg.Gateway.Address != "" {
		if metrics, err = gateway.NewMetrics(); err != nil {
			return err
		}
		defer metrics.Close(context.Background())
		// Proto.Actor records into the global otel meter only; this
		// process has one node, so the global provider is its registry.
		otel.SetMeterProvider(metrics.MeterProvider)
		cfg.Cluster.Metrics = metrics.MeterProvider
	}
	node, err := cluster.StartNode(cfg.Cluster, kinds, log)
	if err != nil {
		return err
	}
	// Not node.Leave: moving a leaving member's tasks off it works on the
	// in-process provider (cluster.TestJoinAndLeaveMoveTasks) but stalled a
	// run over automanaged processes; a member that leaves drops its tasks'
	// state and their roots replay (at least once), as after a crash.
	defer node.Cluster.Shutdown(true)
	log.Infof("node: member %s at %s of cluster %q", node.System.ID, node.System.Address(), cfg.Cluster.Name)
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.Gateway.Address != "" {
		token, _ := cfg.Gateway.Secret(os.Getenv) // checked by validate
		switch {
		case !cfg.Job.Driver:
			token = "" // the acker set changes where the run is driven
		case token == "":
			log.Warnf("gateway: admin endpoints off: no gateway.token, and gateway.token_env %q is unset", cfg.Gateway.TokenEnv)
		}
		l, err := net.Listen("tcp", cfg.Gateway.Address)
		if err != nil {
			return fmt.Errorf("gateway.address: %w", err)
		}
		gctx, stopGateway := context.WithCancel(ctx)
		defer stopGateway()
		go func() {
			if err := gateway.New(job.rt, node.Cluster, token, log, gateway.WithMetrics(metrics)).ServeListener(gctx, l); err != nil {
				log.WithError(err).Error("node: gateway stopped")
			}
		}()
	}
	if !cfg.Job.Driver {
		<-ctx.Done()
		log.Info("node: leaving")
		return nil
	}
	if err := waitMembers(ctx, node, cfg.Job.Members, cfg.Tracker.WaitMembers); err != nil {
		return &exitError{code: 1, msg: err.Error()}
	}
	return job.run(ctx, node.Cluster)
}

// waitMembers waits until the cluster has n members.
func waitMembers(ctx context.Context, node *cluster.Node, n int, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		have := node.Cluster.MemberList.Members().Len()
		if have >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("job.members: %d members after %v, want %d", have, wait, n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// configError names config fields where the word count names flags.
func configError(err error) error {
	code := 1
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	r := strings.NewReplacer("--ackers", "tracker.ackers", "--max-pending", "tracker.max_pending",
		"--timeout", "tracker.timeout", "--max-replays", "tracker.max_replays", "--batch", "tracker.batch",
		"--spouts", "job.spouts", "--splitters", "job.splitters", "--counters", "job.counters",
		"--window/--pane", "job.window/job.pane", "--window", "job.window", "--input", "job.input",
		"--output", "job.output", "--stats", "job.stats", "--progress", "tracker.progress", "--ack-delay", "tracker.ack_delay")
	return &exitError{code: code, msg: r.Replace(err.Error())}
}
