package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/otel"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/acktor/acktor/actors"
	"github.com/acktor/acktor/cluster"
	"github.com/acktor/acktor/gateway"
	"github.com/acktor/acktor/source"
	"github.com/acktor/acktor/topologies/wordcount"
	"github.com/acktor/acktor/wal"
)

// nodeConfig is the file `acktor node --config` reads.
type nodeConfig struct {
	Cluster cluster.Config `yaml:"cluster"`
	Tracker trackerConfig  `yaml:"tracker"`
	Job     jobConfig      `yaml:"job"`
	Gateway gateway.Config `yaml:"gateway"`
	Ingest  ingestConfig   `yaml:"ingest"`
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
	Source      string        `yaml:"source"` // file (job.input) or ingest (the ingest log)
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
	def := actors.DefaultConfig() // the tracker's defaults, defined once
	return nodeConfig{
		Cluster: cluster.DefaultConfig(),
		Tracker: trackerConfig{Ackers: def.Ackers, Timeout: def.Timeout, MaxPending: def.MaxPending, MaxReplays: def.MaxReplays,
			Batch: def.BatchSize, AckDelay: def.AckDelay, Seed: def.Seed, Progress: "log", WaitMembers: time.Minute},
		Job:    jobConfig{Topology: "wordcount", Members: 1, Source: "file", Spouts: 1, Splitters: 2, Counters: 2},
		Ingest: ingestConfig{Sync: "every"},
	}
}

// ingestConfig is the node's ingest log: the gateway's /api/ingest
// endpoints append to it, and with job.source: ingest the word count reads
// it. An empty dir turns it off.
type ingestConfig struct {
	// Dir is the log's directory, created if needed; one process at a
	// time may have it open.
	Dir string `yaml:"dir"`
	// Sync is when appends are fsynced before they are answered: every
	// (each append; concurrent ones share an fsync) or grouped (the
	// appends of an interval of Group share one).
	Sync string `yaml:"sync"`
	// Group is the interval of grouped fsyncs; 0 means DefaultIngestGroup.
	Group time.Duration `yaml:"group"`
	// SegmentBytes is the size of a segment file (0: 64 MiB).
	SegmentBytes int64 `yaml:"segment_bytes"`
	// MaxRecordBytes is the largest record (0: 1 MiB, or less for small
	// segments).
	MaxRecordBytes int `yaml:"max_record_bytes"`
	// RetentionBytes and RetentionAge delete the oldest segments once the
	// log is larger, or they are older, read or not (0: no limit).
	RetentionBytes int64         `yaml:"retention_bytes"`
	RetentionAge   time.Duration `yaml:"retention_age"`
}

// Defaults and limits of the ingest section.
const (
	// DefaultIngestGroup is the interval of grouped fsyncs.
	DefaultIngestGroup = 2 * time.Millisecond
	// maxIngestGroup bounds ingest.group: an answer waits that long.
	maxIngestGroup = time.Second
	// ingestReader is the name the word count commits its offset under.
	ingestReader = "wordcount"
)

// validate checks the section; off (no dir) it must be left alone.
func (c ingestConfig) validate() error {
	if c.Dir == "" {
		if c != (ingestConfig{Sync: "every"}) {
			return errors.New("ingest.dir: empty, but other ingest fields are set; name the log's directory")
		}
		return nil
	}
	seg := c.SegmentBytes
	if seg == 0 {
		seg = wal.DefaultSegmentBytes
	}
	switch {
	case c.Sync != "every" && c.Sync != "grouped":
		return fmt.Errorf("ingest.sync %q: want every or grouped", c.Sync)
	case c.Group < 0 || c.Group > maxIngestGroup:
		return fmt.Errorf("ingest.group %v: want 0 (%v) to %v", c.Group, DefaultIngestGroup, maxIngestGroup)
	case c.Group != 0 && c.Sync != "grouped":
		return fmt.Errorf("ingest.group %v: only with ingest.sync: grouped", c.Group)
	case c.SegmentBytes != 0 && (c.SegmentBytes < wal.MinSegmentBytes || c.SegmentBytes > wal.MaxSegmentBytes):
		return fmt.Errorf("ingest.segment_bytes %d: want %d to %d (0: %d)", c.SegmentBytes, wal.MinSegmentBytes, wal.MaxSegmentBytes, wal.DefaultSegmentBytes)
	case c.MaxRecordBytes < 0 || int64(c.MaxRecordBytes) > seg-wal.HeaderSize:
		return fmt.Errorf("ingest.max_record_bytes %d: want 1 to ingest.segment_bytes - %d (%d), or 0 for the default", c.MaxRecordBytes, wal.HeaderSize, seg-wal.HeaderSize)
	case c.MaxRecordBytes > gateway.MaxIngestBody:
		return fmt.Errorf("ingest.max_record_bytes %d: want at most %d, the largest request the gateway takes", c.MaxRecordBytes, gateway.MaxIngestBody)
	case c.RetentionBytes < 0:
		return fmt.Errorf("ingest.retention_bytes %d: want >= 0 (0: no limit)", c.RetentionBytes)
	case c.RetentionAge < 0:
		return fmt.Errorf("ingest.retention_age %v: want >= 0 (0: no limit)", c.RetentionAge)
	}
	return nil
}

// options are the log's options.
func (c ingestConfig) options(log logrus.FieldLogger) wal.Options {
	o := wal.Options{Sync: wal.EveryAppend, SegmentBytes: c.SegmentBytes, MaxRecordBytes: c.MaxRecordBytes,
		MaxBytes: c.RetentionBytes, MaxAge: c.RetentionAge,
		Logf: func(format string, args ...any) { log.Infof("ingest: "+format, args...) }}
	if c.Sync == "grouped" {
		g := c.Group
		if g == 0 {
			g = DefaultIngestGroup
		}
		o.Sync = wal.Grouped(g)
	}
	return o
}

// loadNodeConfig reads path over the defaults; unknown fields are errors.
func loadNodeConfig(path string) (nodeConfig, error) {
	cfg := defaultNodeConfig()
	b, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("--config: %w", err)
	}
	if err := checkYAML(b); err != nil {
		return cfg, fmt.Errorf("--config %s: %w", path, err)
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

// checkYAML refuses what the YAML decoder would take silently: a second
// document (it reads only the first) and a number with a fraction (it cuts
// one down to fit an integer field; no field of the config takes one).
func checkYAML(b []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc, next yaml.Node
	if err := dec.Decode(&doc); err != nil {
		return nil // the strict decode reports it, or the file is empty
	}
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return fmt.Errorf("line %d: a second YAML document: put one config in a file", next.Line)
	}
	if err := wholeNumbers(&doc, ""); err != nil {
		return err
	}
	return fieldTypes(&doc, reflect.TypeFor[nodeConfig](), "")
}

// fieldTypes checks each value in n against the type of the config field
// it sets (t, whose key path is at), so that a value of the wrong type is
// named by its key path: the decoder's own error names only a line and a Go
// type. Keys that name no field are left to the strict decode.
func fieldTypes(n *yaml.Node, t reflect.Type, at string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case n.Kind == yaml.DocumentNode:
		for _, c := range n.Content {
			if err := fieldTypes(c, t, at); err != nil {
				return err
			}
		}
		return nil
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode && t != reflect.TypeFor[time.Duration]():
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			f, ok := yamlField(t, key)
			if !ok {
				continue
			}
			path := key
			if at != "" {
				path = at + "." + key
			}
			if err := fieldTypes(n.Content[i+1], f.Type, path); err != nil {
				return err
			}
		}
		return nil
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		for i, c := range n.Content {
			if err := fieldTypes(c, t.Elem(), fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := n.Decode(reflect.New(t).Interface()); err != nil {
		return fmt.Errorf("line %d: %s: %q is not %s", n.Line, at, n.Value, kindOf(t))
	}
	return nil
}

// yamlField is t's field that YAML key names.
func yamlField(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		if name == key && f.IsExported() {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// kindOf says what a value of t looks like in YAML.
func kindOf(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return "a duration (such as 30s or 500ms)"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return "a whole number"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return "a number"
	case t.Kind() == reflect.String:
		return "text"
	case t.Kind() == reflect.Slice:
		return "a list"
	case t.Kind() == reflect.Struct || t.Kind() == reflect.Map:
		return "a mapping of keys to values"
	}
	return "a " + t.String()
}

// wholeNumbers finds a number with a fraction in n, whose key path is at.
func wholeNumbers(n *yaml.Node, at string) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!float" {
			return fmt.Errorf("line %d: %s: %s is not a whole number", n.Line, at, n.Value)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			if at != "" {
				key = at + "." + key
			}
			if err := wholeNumbers(n.Content[i+1], key); err != nil {
				return err
			}
		}
	default:
		for _, c := range n.Content {
			if err := wholeNumbers(c, at); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c nodeConfig) validate() error {
	if err := c.Cluster.Validate(); err != nil {
		return err
	}
	if err := c.Ingest.validate(); err != nil {
		return err
	}
	switch {
	case c.Job.Topology != "wordcount":
		return fmt.Errorf("job.topology %q: want wordcount", c.Job.Topology)
	case c.Job.Source != "file" && c.Job.Source != "ingest":
		return fmt.Errorf("job.source %q: want file (job.input) or ingest (the ingest log)", c.Job.Source)
	case c.Job.Source == "file" && c.Job.Input == "":
		return errors.New("job.input: empty; name the text file every member reads")
	case c.Job.Source == "ingest" && c.Job.Input != "":
		return fmt.Errorf("job.input %q: set, but job.source is ingest; give one", c.Job.Input)
	case c.Job.Source == "ingest" && c.Ingest.Dir == "":
		return errors.New("job.source ingest: ingest.dir is empty; name the log's directory")
	case c.Job.Source == "ingest" && !c.Job.Driver:
		return errors.New("job.source ingest: job.driver is false; the node that has the log drives the job")
	case c.Job.Source == "ingest" && c.Job.Members != 1:
		return fmt.Errorf("job.members %d: want 1 with job.source ingest (the log is local to this node; a spout task on another member could not read it)", c.Job.Members)
	case c.Job.Source == "ingest" && c.Job.Spouts != 1:
		return fmt.Errorf("job.spouts %d: want 1 with job.source ingest (a log is read by one spout task)", c.Job.Spouts)
	case c.Ingest.Dir != "" && c.Gateway.Address == "":
		return errors.New("ingest.dir: set, but gateway.address is empty; the gateway serves the ingest endpoints")
	case c.Job.Members < 1:
		return fmt.Errorf("job.members %d: want >= 1", c.Job.Members)
	case c.Tracker.WaitMembers <= 0:
		return fmt.Errorf("tracker.wait_members %v: want > 0", c.Tracker.WaitMembers)
	case c.Gateway.Address != "":
		if _, _, err := net.SplitHostPort(c.Gateway.Address); err != nil {
			return fmt.Errorf("gateway.address %q: want host:port", c.Gateway.Address)
		}
	}
	secret, err := c.Gateway.Secret(os.Getenv)
	if err != nil {
		return err
	}
	if host, _, _ := net.SplitHostPort(c.Gateway.Address); secret != "" && host != "" && !cluster.Loopback(host) && !c.Gateway.Insecure {
		return fmt.Errorf("gateway.address %q: not loopback, and the admin token would cross the network in clear "+
			"(the gateway serves no HTTPS yet); drop the token, or set gateway.insecure: true", c.Gateway.Address)
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
once).

With an ingest section (ingest.dir, which needs gateway.address) the gateway
takes records: POST /api/ingest (text/plain, one record per line;
application/x-ndjson; application/json, a string or an array of strings) and
GET /api/ingest/ws (a WebSocket, one record per text message, or a JSON array
per message with ?batch=json). Each request is appended to a segmented,
checksummed log in ingest.dir and answered 200 {"first": offset, "count": n}
only once durable: ingest.sync every fsyncs each append (concurrent ones share
an fsync), grouped shares one fsync per ingest.group (default 2ms) and delays
the answer until then. A torn tail left by a crash is truncated at start, with
a warning. GET /api/ingest shows the log's offsets and its readers.

With job.source: ingest (one member: job.members 1, job.spouts 1) the word
count reads that log as reader "wordcount" instead of job.input. Its
committed offset advances past finished roots only; segments behind every
reader's committed offset are deleted, and ingest.retention_bytes and
ingest.retention_age delete the oldest ones whether read or not. The job runs
until SIGINT or SIGTERM: the gateway stops taking records, the spout reads no
more, the roots in flight finish (for at most twice tracker.timeout, at least
5s; a second signal aborts), the offset is committed, then job.output and
job.stats are written (the output is replaced only then). They cover what this
process counted: the records from the offset committed when it started. After
a crash (kill -9) the next start reads again from the last commit, so every
record that got a 200 is processed at least once; the counts the crashed
process held in memory are lost with it. job.exactly_once drops what replays
bring again within one process, so its output counts each record it read once;
it does not carry counts across a crash.`,
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
	f := cfg.flags()
	var in *ingestRun
	if cfg.Ingest.Dir != "" {
		l, err := openIngest(cfg.Ingest, log)
		if err != nil {
			return &exitError{code: 1, msg: err.Error()}
		}
		defer func() {
			if err := l.Close(); err != nil {
				log.WithError(err).Error("ingest: closing the log")
			}
		}()
		in = &ingestRun{log: l, drain: max(2*cfg.Tracker.Timeout, 5*time.Second), output: cfg.Job.Output}
		if cfg.Job.Source == "ingest" {
			if err := checkWritable(cfg.Job.Output); err != nil {
				return &exitError{code: 2, msg: "job.output: " + err.Error()}
			}
			f.output = "" // written when the job ends, not truncated now
			f.src, in.stop = drainable(source.WAL(source.WALConfig{Log: l, Reader: ingestReader}))
			in.from = resumeAt(l, log)
			if cfg.Job.ExactlyOnce && cfg.Job.Window == 0 {
				log.Warnf("job.exactly_once without job.window: each counter task remembers the id of every word it counted, at most %d; past that it refuses updates (replayed, then dead-lettered). Set job.window for a job that runs long", actors.DefaultCounterIDs)
			}
		} else if c := cfg.Ingest; len(l.Readers()) == 0 && c.RetentionBytes == 0 && c.RetentionAge == 0 {
			log.Warnf("ingest: no reader commits (job.source is %s) and no ingest.retention_bytes or ingest.retention_age: the log grows until its device is full", cfg.Job.Source)
		}
	}
	job, err := newWordcountJob(f, log, cfg.Job.Driver)
	if err != nil {
		return configError(err)
	}
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
	left := false
	defer func() {
		if !left {
			node.Cluster.Shutdown(true)
		}
	}()
	log.Infof("node: member %s at %s of cluster %q", node.System.ID, node.System.Address(), cfg.Cluster.Name)
	// The first SIGINT or SIGTERM stops the node (ctx), a second one aborts
	// what the first lets finish (abortCtx).
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
		token, _ := cfg.Gateway.Secret(os.Getenv) // checked by validate
		switch {
		case !cfg.Job.Driver:
			token = "" // the acker set changes where the run is driven
		case token == "":
			log.Infof("gateway: admin endpoints off: no gateway.token, and gateway.token_env %q is unset", cfg.Gateway.TokenEnv)
		}
		l, err := net.Listen("tcp", cfg.Gateway.Address)
		if err != nil {
			return fmt.Errorf("gateway.address: %w", err)
		}
		opts := []gateway.Option{gateway.WithMetrics(metrics)}
		if in != nil {
			opts = append(opts, gateway.WithIngest(in.log))
		}
		gctx, stopGateway := context.WithCancel(ctx)
		served := make(chan struct{})
		// The gateway stops before the ingest log closes (defers run last
		// in, first out), so no request appends to a closed log.
		defer func() { stopGateway(); <-served }()
		go func() {
			defer close(served)
			if err := gateway.New(job.rt, node.Cluster, token, log, opts...).ServeListener(gctx, l); err != nil {
				log.WithError(err).Error("node: gateway stopped")
			}
		}()
	}
	if !cfg.Job.Driver {
		<-ctx.Done()
		if err := expelled(); err != nil {
			return &exitError{code: 1, msg: err.Error()}
		}
		// A worker that is asked to stop moves its spout tasks, processor
		// tasks and ackers to the other members before it goes: their
		// roots neither fail nor replay (TestNodeLeave).
		log.Info("node: leaving: moving this member's tasks and ackers to the others")
		node.Leave()
		left = true
		log.Info("node: left")
		return nil
	}
	if err := waitMembers(ctx, node, cfg.Job.Members, cfg.Tracker.WaitMembers); err != nil {
		if lost := expelled(); lost != nil {
			err = lost
		}
		return &exitError{code: 1, msg: err.Error()}
	}
	if cfg.Job.Source == "ingest" {
		err = job.runIngest(ctx, abortCtx, node.Cluster, in, log)
	} else {
		err = job.run(ctx, node.Cluster)
	}
	if lost := expelled(); lost != nil {
		return &exitError{code: 1, msg: lost.Error()}
	}
	return err
}

// watchLost aborts the node when lost says the cluster counts it gone, until
// done; the function it returns tells why, once aborted so.
func watchLost(log logrus.FieldLogger, lost <-chan error, abort func(), done <-chan struct{}) func() error {
	var why atomic.Pointer[error]
	go func() {
		select {
		case err := <-lost:
			log.WithError(err).Error("node: out of the cluster; stopping (started again, it joins as a new member)")
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
					log.Warnf("node: %v again: aborting", s)
					abort()
					return
				}
				log.Infof("node: %v: stopping (a second signal aborts)", s)
				stop()
			case <-done:
				return
			}
		}
	}()
}

// openIngest opens the ingest log and reports what it found.
func openIngest(c ingestConfig, log *logrus.Logger) (*wal.Log, error) {
	l, err := wal.Open(c.Dir, c.options(log))
	if err != nil {
		return nil, fmt.Errorf("ingest.dir %s: %w", c.Dir, err)
	}
	if rec := l.Recovered(); rec != (wal.Recovery{}) {
		log.WithFields(logrus.Fields{"segment": rec.Segment, "offset": rec.Offset, "byte": rec.Pos,
			"truncated_bytes": rec.TruncatedBytes}).
			Warnf("ingest: truncated a torn tail of %d bytes at offset %d in %s (%v): the end of a write the crash cut short, never acknowledged",
				rec.TruncatedBytes, rec.Offset, rec.Segment, rec.Reason)
	}
	st := l.Stats()
	log.Infof("ingest: log %s: start %d, end %d, %d segment(s), %d bytes, readers %v, sync %s",
		c.Dir, st.Start, st.End, st.Segments, st.Bytes, l.Readers(), c.options(log).Sync)
	return l, nil
}

// resumeAt is the offset the word count's reader starts at in l; it logs
// it.
func resumeAt(l *wal.Log, log logrus.FieldLogger) uint64 {
	from, _ := l.Committed(ingestReader)
	from = min(max(from, l.Start()), l.End())
	log.Infof("ingest: reader %s starts at offset %d; %d record(s) to read up to the end", ingestReader, from, l.End()-from)
	return from
}

// retainEvery calls l.Retain every period until ctx ends, so that
// ingest.retention_age deletes segments of a log that gets no appends.
func retainEvery(ctx context.Context, l *wal.Log, period time.Duration, log logrus.FieldLogger) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := l.Retain(); err != nil {
				log.WithError(err).Warn("ingest: retention")
				return
			}
		}
	}
}

// checkWritable finds out now, not after the run, that path cannot be
// written (its contents stay); "" and "-" are stdout.
func checkWritable(path string) error {
	if path == "" || path == "-" {
		return nil
	}
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	return fh.Close()
}

// ingestRun is the word count over the ingest log.
type ingestRun struct {
	log    *wal.Log
	stop   func()        // the source reads no more
	drain  time.Duration // how long the roots in flight may take after stop
	output string        // job.output
	from   uint64        // the reader's committed offset at start
}

// runIngest runs the job until ctx ends, then stops the source, lets the
// roots in flight finish (the source commits once they have), and writes
// the counts and stats of this process. abortCtx ending, or the drain
// taking longer than in.drain, abandons the roots in flight: they are read
// again at the next start.
func (j *wordcountJob) runIngest(ctx, abortCtx context.Context, c *pcluster.Cluster, in *ingestRun, log logrus.FieldLogger) error {
	runCtx, cancel := context.WithCancel(abortCtx)
	defer cancel()
	go func() {
		select {
		case <-ctx.Done():
		case <-runCtx.Done():
			return
		}
		in.stop()
		log.Infof("node: the spout reads no more of the ingest log; finishing the roots in flight (at most %v)", in.drain)
		t := time.NewTimer(in.drain)
		defer t.Stop()
		select {
		case <-t.C:
			log.Warnf("node: the roots in flight did not finish in %v: aborting", in.drain)
			cancel()
		case <-runCtx.Done():
		}
	}()
	show := newProgress(j.f.progress)
	st, err := j.rt.Run(runCtx, c, show.update)
	show.end()
	committed, _ := in.log.Committed(ingestReader)
	if err != nil {
		return &exitError{code: 1, msg: fmt.Sprintf("%v; the ingest log's reader %s committed offset %d (end %d): the rest is read again at the next start",
			err, ingestReader, committed, in.log.End())}
	}
	log.Infof("node: counted the ingest log's records from offset %d up to %d (%d roots, %d replays); the log's end is %d",
		in.from, committed, st.Roots, st.Replayed, in.log.End())
	if err := writeAtomic(in.output, func(w io.Writer) error { return writeCounts(w, wordcount.Counts(st)) }); err != nil {
		return fmt.Errorf("job.output: %w", err)
	}
	if j.f.stats != "" {
		if err := writeStats(j.f.stats, st, j.win); err != nil {
			return fmt.Errorf("job.stats: %w", err)
		}
	}
	return j.outcome(st, "records")
}

// writeAtomic writes path through a temporary file renamed over it, so
// that it holds the previous contents until the new ones are whole; "" and
// "-" are stdout.
func writeAtomic(path string, write func(io.Writer) error) error {
	if path == "" || path == "-" {
		return write(os.Stdout)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	err = write(tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
	return err
}

// drainable wraps the sources f opens so that stop ends them: after it,
// Next answers io.EOF, so the spout finishes the roots in flight and the
// run ends; when the last of them is Done the source is closed, which
// commits the offset, before the run returns (the spout closes its source
// only when its actor stops, after Run returned).
func drainable(f source.Factory) (source.Factory, func()) {
	ch := make(chan struct{})
	stop := sync.OnceFunc(func() { close(ch) })
	return func(task, tasks int) (source.Source, error) {
		s, err := f(task, tasks)
		if err != nil {
			return nil, err
		}
		return &drainSource{Source: s, stop: ch, out: map[uint64]struct{}{}}, nil
	}, stop
}

// drainSource is a source of drainable. Like every source it is used by
// one spout task at a time.
type drainSource struct {
	source.Source
	stop    <-chan struct{}
	out     map[uint64]struct{} // handed out, not Done: at most the spout's max pending
	stopped bool
	closed  bool
	err     error // of the Close
}

func (d *drainSource) Next() (source.Root, error) {
	if !d.stopped {
		select {
		case <-d.stop:
			d.stopped = true
		default:
		}
	}
	if d.stopped {
		d.closeIfDrained()
		return source.Root{}, io.EOF
	}
	r, err := d.Source.Next()
	if err == nil {
		d.out[r.ID] = struct{}{}
		return r, nil
	}
	d.badRecord(err)
	return r, err
}

// badRecord keeps a bad record's id out: the spout dead-letters it and
// calls Done. (Apart from Next, whose every root would allocate the
// target errors.As takes.)
func (d *drainSource) badRecord(err error) {
	var bad *source.BadRecord
	if errors.As(err, &bad) {
		d.out[bad.ID] = struct{}{}
	}
}

// Backlog passes the log's backlog on (source.Backlogger): the node's
// stages show the ingest log as the queue in front of the word count.
func (d *drainSource) Backlog() int64 {
	if bl, ok := d.Source.(source.Backlogger); ok && !d.stopped {
		return bl.Backlog()
	}
	return 0
}

func (d *drainSource) Done(id uint64) {
	d.Source.Done(id)
	delete(d.out, id)
	if d.stopped {
		d.closeIfDrained()
	}
}

func (d *drainSource) closeIfDrained() {
	if len(d.out) == 0 && !d.closed {
		d.closed = true
		d.err = d.Source.Close()
	}
}

func (d *drainSource) Close() error {
	if !d.closed {
		d.closed = true
		d.err = d.Source.Close()
	}
	return d.err
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

// configError names the config key of an option the word count names by
// its flag, from the error's option (no text is parsed).
func configError(err error) error {
	var ee *exitError
	if !errors.As(err, &ee) {
		return &exitError{code: 1, msg: err.Error()}
	}
	if o := options[ee.option]; o.key != "" {
		return &exitError{code: ee.code, msg: o.key + ee.rest}
	}
	return ee
}
