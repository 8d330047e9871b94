// Package member runs acktor cluster members from a program's own main:
// register topologies by name, then Run starts a member from the config
// that `acktor node` reads (cluster, tracker, job, gateway, ingest), with
// signals, a graceful leave, the gateway and metrics. `acktor node` is one
// such main; a user's program that registers its own topologies takes
// them to a cluster the same way, and with cluster.provider embedded runs
// them in its own process.
package member

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/sirupsen/logrus"
	"go.opentelemetry.io/otel"

	"github.com/acktor/acktor/actors"
	"github.com/acktor/acktor/cluster"
	"github.com/acktor/acktor/gateway"
	"github.com/acktor/acktor/source"
	"github.com/acktor/acktor/wal"
	"github.com/acktor/acktor/window"
)

// Run runs one member as cfg says, with the topology job.topology names
// among topologies, until ctx ends or a signal stops it (SIGINT or SIGTERM;
// a second one aborts what the first lets finish). A batch driver returns
// once its job ended and its results are written; the other members host
// the job's tasks and ackers until stopped, then leave, moving them to the
// members that stay. Errors about a setting are *SettingError. While a
// member of a cluster of processes runs, the collector is paced to run
// about ten times a second at most, letting the heap grow up to 64 MB over
// its live bytes (more than GOGC's default 100 % of a small heap), unless
// the environment sets GOGC (paceGC).
func Run(ctx context.Context, cfg Config, log *logrus.Logger, topologies ...Topology) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	defer paceGC(cfg.Cluster)()
	var topo *Topology
	for i := range topologies {
		if topologies[i].Name == cfg.Job.Topology {
			topo = &topologies[i]
		}
	}
	if topo == nil {
		names := make([]string, len(topologies))
		for i, t := range topologies {
			names[i] = t.Name
		}
		return setting("job.topology", " %q: want one of %v", cfg.Job.Topology, names)
	}
	var in *ingestRun
	if cfg.Ingest.Dir != "" {
		l, err := openIngest(cfg.Ingest, log)
		if err != nil {
			return err
		}
		defer func() {
			if err := l.Close(); err != nil {
				log.WithError(err).Error("ingest: closing the log")
			}
		}()
		in = &ingestRun{log: l}
		if c := cfg.Ingest; cfg.Job.Source != "ingest" && len(l.Readers()) == 0 && c.RetentionBytes == 0 && c.RetentionAge == 0 {
			log.Warnf("ingest: no reader commits (job.source is %s) and no ingest.retention_bytes or ingest.retention_age: the log grows until its device is full", cfg.Job.Source)
		}
	}
	b, err := newBatch(cfg, *topo, in, log)
	if err != nil {
		return err
	}
	kinds := b.rt.WorkerKinds()
	for _, k := range kinds { // stateless: dealt out over the members; counter tasks claim their state
		cfg.Cluster.Deal = append(cfg.Cluster.Deal, k.Kind)
	}
	if cfg.hostsCounters() {
		kinds = b.rt.Kinds()
	}
	var metrics *gateway.Metrics
	if cfg.Gateway.Address != "" {
		if metrics, err = gateway.NewMetrics(); err != nil {
			return err
		}
		defer metrics.Close(context.Background())
		// Proto.Actor records into the global otel meter only; this
		// process has one member, so the global provider is its registry.
		otel.SetMeterProvider(metrics.MeterProvider)
		cfg.Cluster.Metrics = metrics.MeterProvider
	}
	shared := cfg.sharedText()
	if cfg.Cluster.Provider != "embedded" {
		cfg.Cluster.Job = fingerprint(shared)
	}
	node, err := cluster.StartNode(cfg.Cluster, kinds, log)
	if err != nil {
		return err
	}
	left := false
	defer func() {
		if !left {
			node.Stop()
		}
	}()
	if cfg.Cluster.Provider != "embedded" {
		// A member that carries another job than the others gets none of
		// their grains, nor they its: it says which setting differs, and
		// goes before it runs anything.
		if err := serveJob(node.System, shared); err != nil {
			return fmt.Errorf("member: %w", err)
		}
		peers := 0
		if cfg.Cluster.Provider == "automanaged" {
			peers = len(cfg.Cluster.Automanaged.Peers)
		}
		if err := checkJob(ctx, node.Cluster, shared, jobWait(cfg.Cluster), peers); err != nil {
			return err
		}
		defer watchJobs(node.Cluster, shared, log)()
	}
	log.Infof("member: %s at %s of cluster %q", node.System.ID, node.System.Address(), cfg.Cluster.Name)
	// The first SIGINT or SIGTERM stops the member (ctx), a second one
	// aborts what the first lets finish (abortCtx).
	abortCtx, abort := context.WithCancel(ctx)
	defer abort()
	ctx, stop := context.WithCancel(abortCtx)
	defer stop()
	watchSignals(log, stop, abort, abortCtx.Done())
	expelled := watchLost(log, node.Lost, abort, abortCtx.Done())
	if in != nil && cfg.Ingest.RetentionAge > 0 {
		go retainEvery(ctx, in.log, min(max(cfg.Ingest.RetentionAge/10, time.Second), time.Minute), log)
	}
	if cfg.Gateway.Address != "" {
		stopGateway, err := serveGateway(ctx, cfg, b.rt, node.Cluster, metrics, in, log)
		if err != nil {
			return err
		}
		// The gateway stops before the ingest log closes (defers run last
		// in, first out), so no request appends to a closed log.
		defer stopGateway()
	}
	if cfg.Job.Mode == "service" {
		err := serve(ctx, cfg, b.rt, node, log)
		left = true
		if lost := expelled(); lost != nil {
			return lost
		}
		return err
	}
	if !cfg.drives() {
		<-ctx.Done()
		if err := expelled(); err != nil {
			return err
		}
		// A worker that is asked to stop moves its spout tasks, processor
		// tasks and ackers to the other members before it goes: their
		// roots neither fail nor replay.
		log.Info("member: leaving: moving this member's tasks and ackers to the others")
		node.Leave()
		left = true
		log.Info("member: left")
		return nil
	}
	if err := waitMembers(ctx, node, cfg.Cluster.Job, cfg.Job.Members, cfg.Tracker.WaitMembers); err != nil {
		if lost := expelled(); lost != nil {
			err = lost
		}
		return err
	}
	if b.endless {
		err = b.runDrained(ctx, abortCtx, node.Cluster, in, log)
	} else {
		err = b.run(ctx, node.Cluster)
	}
	if lost := expelled(); lost != nil {
		return lost
	}
	return err
}

// drives says whether this member runs a batch job and writes its results
// (the driver, or the one member of an embedded cluster).
func (c Config) drives() bool {
	return c.Job.Mode == "batch" && (c.Job.Driver || c.Cluster.Provider == "embedded")
}

// hostsCounters says whether this member hosts counter tasks: a batch
// job's driver only (its counters are its results), every member of a
// service.
func (c Config) hostsCounters() bool { return c.drives() || c.Job.Mode == "service" }

// serve runs a service on this member until ctx ends, then leaves the
// cluster: every member serves, and the one that owns the service's
// identity leads (starts the spout tasks, restarts those that move or die).
// It keeps serving while it leaves, so that the tasks it moves hand it
// their state if it leads.
func serve(ctx context.Context, cfg Config, rt *actors.Runtime, node *cluster.Node, log *logrus.Logger) error {
	id := "service/" + cfg.Job.Topology
	leader := func() string { return cluster.Owner(node.Cluster, actors.KindSpout, id) }
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- rt.Serve(sctx, node.Cluster, leader) }()
	log.Infof("member: serving %s until stopped", cfg.Job.Topology)
	select {
	case <-ctx.Done():
	case err := <-served: // a task's error
		stop()
		node.Stop()
		return err
	}
	if cfg.Cluster.Provider == "embedded" {
		stop()
		<-served
		node.Stop()
		return nil
	}
	log.Info("member: leaving: moving this member's tasks, ackers and counters to the others")
	node.Leave()
	stop()
	log.Info("member: left")
	return <-served
}

// jobWait is how long a member that starts looks for members that carry
// another job: until the automanaged provider's peers were seen (it checks
// them every refresh), or a second (etcd).
func jobWait(c cluster.Config) time.Duration {
	if c.Provider == "automanaged" {
		if len(c.Automanaged.Peers) <= 1 {
			return 0
		}
		return min(2*c.Automanaged.Refresh+500*time.Millisecond, 3*time.Second)
	}
	return time.Second
}

// serveGateway serves the member's gateway until ctx ends; the function it
// returns stops it and waits.
func serveGateway(ctx context.Context, cfg Config, rt *actors.Runtime, c *pcluster.Cluster, metrics *gateway.Metrics,
	in *ingestRun, log *logrus.Logger) (func(), error) {
	token, _ := cfg.Gateway.Secret(os.Getenv) // checked by Validate
	switch {
	case !cfg.drives() && cfg.Job.Mode == "batch":
		token = "" // the acker set changes where the run is driven
	case token == "":
		log.Infof("gateway: admin endpoints off: no gateway.token, and gateway.token_env %q is unset", cfg.Gateway.TokenEnv)
	}
	l, err := net.Listen("tcp", cfg.Gateway.Address)
	if err != nil {
		return nil, fmt.Errorf("gateway.address: %w", err)
	}
	if cfg.Gateway.Cert != "" {
		tl, err := gateway.TLSListener(l, cfg.Gateway.Cert, cfg.Gateway.Key)
		if err != nil {
			_ = l.Close()
			return nil, setting("gateway.cert", ": %v", err)
		}
		l = tl
	}
	opts := []gateway.Option{gateway.WithMetrics(metrics)}
	if in != nil {
		opts = append(opts, gateway.WithIngest(in.log))
	}
	gctx, stop := context.WithCancel(ctx)
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := gateway.New(rt, c, token, log, opts...).ServeListener(gctx, l); err != nil {
			log.WithError(err).Error("member: gateway stopped")
		}
	}()
	return func() { stop(); <-served }, nil
}

// batch is a batch job ready to run on a member: its runtime, and what its
// driver writes at the end.
type batch struct {
	cfg     JobConfig
	results func(w io.Writer, st *actors.RunStats) error
	win     window.Config
	rt      *actors.Runtime
	dead    *deadLetters
	log     *logrus.Logger
	showing string // tracker.progress
	// endless: the source does not end by itself (the ingest log, a broker
	// without stop_at_end); the job ends when the member is stopped, the
	// roots in flight then having drain to finish.
	endless bool
	drain   time.Duration
}

// newBatch builds the job's topology and runtime over its source; a
// driver also finds out now that its output and stats can be written.
func newBatch(cfg Config, topo Topology, in *ingestRun, log *logrus.Logger) (*batch, error) {
	win, err := windowOf(cfg.Job)
	if err != nil {
		return nil, err
	}
	// The topology is built first, so that its settings are checked before
	// the source's file; spout tasks open the source only once they start.
	var src source.Factory
	j := &Job{Spouts: cfg.Job.Spouts, Window: win, ExactlyOnce: cfg.Job.ExactlyOnce, Seed: cfg.Tracker.Seed, options: cfg.Job.Options, topology: topo.Name,
		Source: func(task, tasks int) (source.Source, error) { return src(task, tasks) }}
	t, err := topo.Build(j)
	if err != nil {
		return nil, j.named(err)
	}
	endless := false
	switch cfg.Job.Source {
	case "ingest":
		src, endless = source.WAL(source.WALConfig{Log: in.log, Reader: IngestReader}), true
		in.from = resumeAt(in.log, log)
		if cfg.Job.ExactlyOnce && win == (window.Config{}) {
			log.Warnf("job.exactly_once without job.window: each counter task remembers the id of every update it counted, at most %d; past that it refuses updates (replayed, then dead-lettered). Set job.window for a job that runs long", actors.DefaultCounterIDs)
		}
	case "kafka":
		if src, err = kafkaSource(cfg.Job.Kafka, func(err error) { log.WithError(err).Warn("member: kafka source") }); err != nil {
			return nil, err
		}
		endless = !cfg.Job.Kafka.StopAtEnd
	case "jetstream":
		if src, err = jetStreamSource(cfg.Job.JetStream); err != nil {
			return nil, err
		}
		endless = !cfg.Job.JetStream.StopAtEnd
	case "generator":
		if topo.Generate != nil && cfg.Job.EventStep != 0 {
			return nil, setting("job.event_step", ": topology %s generates its own stream, with its own times", topo.Name)
		}
		if topo.Generate == nil {
			src, err = sourceOf(cfg)
		} else if src, err = topo.Generate(j, cfg.Job.Lines); err != nil {
			err = j.named(err)
		}
		if err != nil {
			return nil, err
		}
	default:
		if src, err = sourceOf(cfg); err != nil {
			return nil, err
		}
	}
	b := &batch{cfg: cfg.Job, results: topo.Results, win: win, dead: &deadLetters{}, log: log, showing: cfg.Tracker.Progress,
		endless: endless, drain: max(2*cfg.Tracker.Timeout, 5*time.Second)}
	if b.results == nil {
		b.results = WriteCounts
	}
	tc := cfg.Tracker
	rc := actors.DefaultConfig()
	rc.Ackers, rc.MaxPending, rc.Timeout, rc.MaxReplays = tc.Ackers, tc.MaxPending, tc.Timeout, tc.MaxReplays
	rc.BatchSize, rc.AckDelay, rc.Seed, rc.Log, rc.DeadLetters = tc.Batch, tc.AckDelay, tc.Seed, log, b.dead
	rc.MembershipLag, rc.Standby = cfg.Cluster.MembershipLag(), cfg.Job.Standby
	if b.rt, err = actors.New(t, rc); err != nil {
		return nil, j.named(err)
	}
	if !cfg.drives() {
		return b, nil
	}
	// Written when the run ends, atomically; find out now, not after the
	// run, that they cannot be.
	if err := checkWritable(cfg.Job.Output); err != nil {
		return nil, setting("job.output", ": %v", err)
	}
	if cfg.Job.Stats != "" {
		if err := checkWritable(cfg.Job.Stats); err != nil {
			return nil, setting("job.stats", ": %v", err)
		}
	}
	return b, nil
}

// run runs the job from this member, writes the results and the stats, and
// says whether every root finished.
func (b *batch) run(ctx context.Context, c *pcluster.Cluster) error {
	show := newProgress(b.showing)
	st, err := b.rt.Run(ctx, c, show.update)
	show.end()
	if err != nil {
		return err
	}
	return b.write(st, "lines")
}

// write writes the results (whole or not at all: a run that fails leaves
// the last ones) and the stats, and says whether every root finished.
func (b *batch) write(st *actors.RunStats, what string) error {
	if err := writeAtomic(b.cfg.Output, func(w io.Writer) error { return b.results(w, st) }); err != nil {
		return fmt.Errorf("job.output: %w", err)
	}
	if b.cfg.Stats != "" {
		if err := writeStats(b.cfg.Stats, st, b.win); err != nil {
			return fmt.Errorf("job.stats: %w", err)
		}
	}
	return b.outcome(st, what)
}

// outcome is the end of a run: an error unless every root (of what:
// lines, records) finished without a dead letter.
func (b *batch) outcome(st *actors.RunStats, what string) error {
	if st.Roots == 0 && b.log != nil {
		b.log.Warnf("no %s to count: the input is empty", what) // a run of nothing is no failure, but likely a mistake
	}
	switch {
	case st.DeadLettered > 0:
		return fmt.Errorf("%d of %d %s dead-lettered (first: %s)", st.DeadLettered, st.Roots, what, b.dead.first())
	case st.Completed != st.Roots:
		return fmt.Errorf("%d of %d %s finished", st.Completed, st.Roots, what)
	}
	return nil
}

// ingestRun is the member's ingest log.
type ingestRun struct {
	log  *wal.Log
	from uint64 // the job's reader's committed offset at start
}

// runDrained runs a job over a source that does not end by itself until
// ctx ends, then stops the source, lets the roots in flight finish (the
// source commits once they have: the ingest log's reader offset, the
// Kafka group's offsets, the JetStream acks), and writes the results and
// stats of this process. abortCtx ending, or the drain taking longer than
// b.drain, abandons the roots in flight: they are read again at the next
// start. in is the member's ingest log, if the job reads it.
func (b *batch) runDrained(ctx, abortCtx context.Context, c *pcluster.Cluster, in *ingestRun, log logrus.FieldLogger) error {
	runCtx, cancel := context.WithCancel(abortCtx)
	defer cancel()
	go func() {
		select {
		case <-ctx.Done():
		case <-runCtx.Done():
			return
		}
		if err := b.rt.StopSources(c); err != nil {
			log.WithError(err).Error("member: stopping the sources")
		}
		log.Infof("member: the spouts read no more of job.source %s; finishing the roots in flight (at most %v)", b.cfg.Source, b.drain)
		t := time.NewTimer(b.drain)
		defer t.Stop()
		select {
		case <-t.C:
			log.Warnf("member: the roots in flight did not finish in %v: aborting", b.drain)
			cancel()
		case <-runCtx.Done():
		}
	}()
	show := newProgress(b.showing)
	st, err := b.rt.Run(runCtx, c, show.update)
	show.end()
	if b.cfg.Source != "ingest" {
		if err != nil {
			return fmt.Errorf("%w; what was not committed is read again at the next start", err)
		}
		log.Infof("member: counted %d records of job.source %s (%d replays)", st.Roots, b.cfg.Source, st.Replayed)
		return b.write(st, "records")
	}
	committed, _ := in.log.Committed(IngestReader)
	if err != nil {
		return fmt.Errorf("%w; the ingest log's reader %s committed offset %d (end %d): the rest is read again at the next start",
			err, IngestReader, committed, in.log.End())
	}
	log.Infof("member: counted the ingest log's records from offset %d up to %d (%d roots, %d replays); the log's end is %d",
		in.from, committed, st.Roots, st.Replayed, in.log.End())
	return b.write(st, "records")
}

// watchLost aborts the node when lost says the cluster counts it gone, until
// done; the function it returns tells why, once aborted so.
func watchLost(log logrus.FieldLogger, lost <-chan error, abort func(), done <-chan struct{}) func() error {
	var why atomic.Pointer[error]
	go func() {
		select {
		case err := <-lost:
			log.WithError(err).Error("member: out of the cluster; stopping (started again, it joins as a new member)")
			why.Store(&err)
			abort()
		case <-done:
		}
	}()
	return func() error {
		if err := why.Load(); err != nil {
			return *err
		}
		return nil
	}
}

// watchSignals calls stop at the first SIGINT or SIGTERM and abort at the
// second, until done.
func watchSignals(log logrus.FieldLogger, stop, abort func(), done <-chan struct{}) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		defer signal.Stop(sigs)
		for n := 0; ; n++ {
			select {
			case s := <-sigs:
				if n > 0 {
					log.Warnf("member: %v again: aborting", s)
					abort()
					return
				}
				log.Infof("member: %v: stopping (a second signal aborts)", s)
				stop()
			case <-done:
				return
			}
		}
	}()
}

// waitMembers waits until the cluster has n members that carry job (any,
// if job is "").
func waitMembers(ctx context.Context, node *cluster.Node, job string, n int, wait time.Duration) error {
	if n <= 1 {
		return nil
	}
	deadline := time.Now().Add(wait)
	for {
		have := 0
		for _, m := range node.Cluster.MemberList.Members().Members() {
			if job == "" || cluster.JobOf(m) == job {
				have++
			}
		}
		if have >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("job.members: %d members with this job after %v, want %d", have, wait, n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
