package member

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"go.yaml.in/yaml/v3"

	"github.com/acktor/acktor/actors"
	"github.com/acktor/acktor/cluster"
	"github.com/acktor/acktor/gateway"
	"github.com/acktor/acktor/wal"
)

// Config is a member's YAML file: where it listens and how it finds the
// others (cluster), the tracker's settings, the job it runs, its gateway
// and its ingest log. Every member of a cluster carries the same job.
type Config struct {
	Cluster cluster.Config `yaml:"cluster"`
	Tracker TrackerConfig  `yaml:"tracker"`
	Job     JobConfig      `yaml:"job"`
	Gateway gateway.Config `yaml:"gateway"`
	Ingest  IngestConfig   `yaml:"ingest"`
}

// TrackerConfig is the runtime's side of the file (actors.Config).
type TrackerConfig struct {
	Ackers     int           `yaml:"ackers"`
	Timeout    time.Duration `yaml:"timeout"`
	MaxPending int           `yaml:"max_pending"`
	MaxReplays int           `yaml:"max_replays"`
	Batch      int           `yaml:"batch"`
	Seed       uint64        `yaml:"seed"`
	AckDelay   time.Duration `yaml:"ack_delay"`
	// Progress is how a batch driver shows its run on stderr: auto (a bar
	// on a terminal, log lines otherwise), bar, log or none.
	Progress string `yaml:"progress"`
	// WaitMembers is how long a batch driver waits for job.members.
	WaitMembers time.Duration `yaml:"wait_members"`
}

// JobConfig says which registered topology the cluster runs, over which
// source, and where a batch job's results go. Keys it does not name are
// the topology's own settings (Job.Decode).
type JobConfig struct {
	Topology string `yaml:"topology"`
	// Mode is batch (a driver runs the job over its input and writes
	// results) or service (no driver: every member runs the job until it is
	// stopped, and its results are read from the gateway).
	Mode string `yaml:"mode"`
	// Driver marks the member that runs a batch job and writes its results;
	// it waits for Members members first.
	Driver  bool `yaml:"driver"`
	Members int  `yaml:"members"`
	// Source is where roots come from: file (Input; - is stdin),
	// generator (Lines generated lines of Zipf-distributed words, or the
	// topology's own stream), ingest (this member's ingest log), kafka
	// (Kafka) or jetstream (JetStream).
	Source    string          `yaml:"source"`
	Input     string          `yaml:"input"`
	Lines     int64           `yaml:"lines"`
	EventStep time.Duration   `yaml:"event_step"`
	Kafka     KafkaConfig     `yaml:"kafka"`
	JetStream JetStreamConfig `yaml:"jetstream"`
	// Spouts is the spout tasks that read the source.
	Spouts int `yaml:"spouts"`
	// Output and Stats are where a batch job's results and statistics go
	// ("" or - for stdout; no stats).
	Output string `yaml:"output"`
	Stats  string `yaml:"stats"`
	// ExactlyOnce, Window and Pane shape the job's counters.
	ExactlyOnce bool          `yaml:"exactly_once"`
	Window      time.Duration `yaml:"window"`
	Pane        time.Duration `yaml:"pane"`
	// Standby keeps a replica of every counter task on a second member
	// (when there is one, as in a service), so that a member's death loses
	// no window; false trades that for the counters' cost of it.
	Standby bool `yaml:"standby"`
	// Options are the other keys: the topology's own settings.
	Options map[string]yaml.Node `yaml:",inline"`
}

// Default is the config a file is read over: a cluster of one member on
// loopback (the automanaged provider with itself as the only peer), the
// tracker's defaults, a batch word count of job.input.
func Default() Config {
	def := actors.DefaultConfig() // the tracker's defaults, defined once
	return Config{
		Cluster: cluster.DefaultConfig(),
		Tracker: TrackerConfig{Ackers: def.Ackers, Timeout: def.Timeout, MaxPending: def.MaxPending, MaxReplays: def.MaxReplays,
			Batch: def.BatchSize, AckDelay: def.AckDelay, Seed: def.Seed, Progress: "log", WaitMembers: time.Minute},
		Job:    JobConfig{Topology: "wordcount", Mode: "batch", Members: 1, Source: "file", Spouts: 1, Standby: def.Standby},
		Ingest: IngestConfig{Sync: "every"},
	}
}

// SettingError is a setting that is wrong, named by its key path in the
// file, so that a command line can name its own flag for it.
type SettingError struct {
	Key  string // job.spouts
	Rest string // what follows the key: " 0: want >= 1"
}

func (e *SettingError) Error() string { return e.Key + e.Rest }

// setting is a SettingError about key.
func setting(key, format string, args ...any) *SettingError {
	return &SettingError{Key: key, Rest: fmt.Sprintf(format, args...)}
}

// IngestConfig is the member's ingest log: the gateway's /api/ingest
// endpoints append to it, and with job.source: ingest the job reads it.
// An empty dir turns it off.
type IngestConfig struct {
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
	// IngestReader is the name a job commits its offset in the ingest log
	// under.
	IngestReader = "wordcount"
)

// validate checks the section; off (no dir) it must be left alone.
func (c IngestConfig) validate() error {
	if c.Dir == "" {
		if c != (IngestConfig{Sync: "every"}) {
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
func (c IngestConfig) options(log logrus.FieldLogger) wal.Options {
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

// Load reads path over Default; unknown keys (but the job's, which are
// the topology's) and values of the wrong type are errors naming their key.
func Load(path string) (Config, error) {
	cfg := Default()
	b, err := os.ReadFile(path)
	if err != nil {
		return cfg, err
	}
	if err := checkYAML(b); err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
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
	return fieldTypes(&doc, reflect.TypeFor[Config](), "")
}

// fieldTypes checks each value in n against the type of the config field
// it sets (t, whose key path is at), so that a value of the wrong type is
// named by its key path, as is a key that names no field: the decoder's own
// errors name only a line and a Go type.
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
			path := key
			if at != "" {
				path = at + "." + key
			}
			f, ok := yamlField(t, key)
			switch {
			case !ok && (keepsOthers(t) || key == "<<"): // the job's: the topology's own keys; a YAML merge, which the strict decode reads
				continue
			case !ok:
				return fmt.Errorf("line %d: %s: no such key", n.Content[i].Line, path)
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

// keepsOthers says whether struct t takes keys that name no field (an
// inline map).
func keepsOthers(t reflect.Type) bool {
	for i := range t.NumField() {
		_, opts, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if opts == "inline" && t.Field(i).Type.Kind() == reflect.Map {
			return true
		}
	}
	return false
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

// Validate names the first setting in error. What only the topology
// knows (its own keys, its limits) is checked when it is built.
func (c Config) Validate() error {
	if err := c.Cluster.Validate(); err != nil {
		return err
	}
	if err := c.Ingest.validate(); err != nil {
		return err
	}
	if err := c.Job.validate(c.Ingest.Dir != ""); err != nil {
		return err
	}
	switch c.Tracker.Progress {
	case "auto", "bar", "log", "none":
	default:
		return setting("tracker.progress", " %q: want auto, bar, log or none", c.Tracker.Progress)
	}
	switch {
	case c.Cluster.Provider == "embedded" && c.Job.Members != 1:
		return setting("job.members", " %d: want 1 with cluster.provider embedded (a cluster of this process alone)", c.Job.Members)
	case c.Ingest.Dir != "" && c.Gateway.Address == "":
		return setting("ingest.dir", ": set, but gateway.address is empty; the gateway serves the ingest endpoints")
	case c.Tracker.WaitMembers <= 0:
		return setting("tracker.wait_members", " %v: want > 0", c.Tracker.WaitMembers)
	case c.Gateway.Address != "":
		if _, _, err := net.SplitHostPort(c.Gateway.Address); err != nil {
			return setting("gateway.address", " %q: want host:port", c.Gateway.Address)
		}
	}
	secret, err := c.Gateway.Secret(os.Getenv)
	if err != nil {
		return err
	}
	if (c.Gateway.Cert == "") != (c.Gateway.Key == "") {
		return setting("gateway.cert", ": give gateway.cert and gateway.key together")
	}
	if host, _, _ := net.SplitHostPort(c.Gateway.Address); secret != "" && host != "" && !cluster.Loopback(host) && c.Gateway.Cert == "" && !c.Gateway.Insecure {
		return setting("gateway.address", " %q: not loopback, and the admin token would cross the network in clear; "+
			"give gateway.cert and gateway.key (HTTPS), drop the token, or set gateway.insecure: true", c.Gateway.Address)
	}
	return nil
}

// validate checks the job's own keys; ingest says whether the member has
// an ingest log.
func (j JobConfig) validate(ingest bool) error {
	switch {
	case j.Topology == "":
		return setting("job.topology", ": empty; name a registered topology")
	case j.Mode != "batch" && j.Mode != "service":
		return setting("job.mode", " %q: want batch (a driver runs the job and writes results) or service (every member runs it until stopped)", j.Mode)
	case j.Mode == "service" && j.Driver:
		return setting("job.driver", ": true, but job.mode is service, which has no driver: every member runs the job")
	case j.Mode == "service" && j.Members != 1:
		return setting("job.members", " %d: only a batch driver waits for members; a service starts with whoever is there", j.Members)
	case j.Mode == "service" && j.Output != "":
		return setting("job.output", ": set, but job.mode is service, which writes no results: read them from the gateway")
	case j.Mode == "service" && j.Stats != "":
		return setting("job.stats", ": set, but job.mode is service, which writes no results: read them from the gateway")
	case j.Mode == "service" && (j.Source == "ingest" || j.Input == "-"):
		return setting("job.source", " %s: read on this member alone, but a service's spout tasks run on any member; run it as a batch job (it runs until stopped)", map[bool]string{true: "ingest", false: "stdin"}[j.Source == "ingest"])
	case j.Members < 1:
		return setting("job.members", " %d: want >= 1", j.Members)
	case j.Spouts < 1:
		return setting("job.spouts", " %d: want >= 1", j.Spouts)
	case j.Lines != 0 && j.Source != "generator":
		return setting("job.lines", " %d: only with job.source generator", j.Lines)
	case j.EventStep != 0 && j.Source != "generator":
		return setting("job.event_step", ": only with job.source generator")
	case j.Source != "kafka" && !reflect.ValueOf(j.Kafka).IsZero():
		return setting("job.kafka", ": set, but job.source is %s", j.Source)
	case j.Source != "jetstream" && j.JetStream != (JetStreamConfig{}):
		return setting("job.jetstream", ": set, but job.source is %s", j.Source)
	case (j.Source == "kafka" || j.Source == "jetstream") && j.Input != "":
		return setting("job.input", " %q: set, but job.source is %s; give one", j.Input, j.Source)
	}
	switch j.Source {
	case "file":
		switch {
		case j.Input == "":
			return setting("job.input", ": empty; name the text file every member reads (- for stdin)")
		case j.Input == "-" && j.Spouts != 1:
			return setting("job.spouts", " %d: stdin is read by one spout task", j.Spouts)
		case j.Input == "-" && j.Members != 1:
			return setting("job.members", " %d: want 1 with job.input - (stdin is this process's only)", j.Members)
		}
		return nil
	case "generator":
		switch {
		case j.Input != "":
			return setting("job.input", " %q: set, but job.source is generator; give one", j.Input)
		case j.Lines < 1:
			return setting("job.lines", " %d: want a number of lines, >= 1", j.Lines)
		case j.EventStep < 0:
			return setting("job.event_step", " %v: want >= 0", j.EventStep)
		}
		return nil
	case "ingest":
		switch {
		case j.Input != "":
			return setting("job.input", " %q: set, but job.source is ingest; give one", j.Input)
		case !ingest:
			return setting("job.source", " ingest: ingest.dir is empty; name the log's directory")
		case !j.Driver:
			return setting("job.source", " ingest: job.driver is false; the node that has the log drives the job")
		case j.Members != 1:
			return setting("job.members", " %d: want 1 with job.source ingest (the log is local to this node; a spout task on another member could not read it)", j.Members)
		case j.Spouts != 1:
			return setting("job.spouts", " %d: want 1 with job.source ingest (a log is read by one spout task)", j.Spouts)
		}
		return nil
	case "kafka":
		return j.Kafka.validate()
	case "jetstream":
		return j.JetStream.validate()
	}
	return setting("job.source", " %q: want file (job.input), generator (job.lines), ingest (the ingest log), kafka (job.kafka) or jetstream (job.jetstream)", j.Source)
}

// Set sets key of the job section, one of the topology's own settings, to
// v, as if the file had said it (a command line that has a flag for it).
func (j *JobConfig) Set(key string, v any) error {
	var n yaml.Node
	if err := n.Encode(v); err != nil {
		return fmt.Errorf("job.%s: %w", key, err)
	}
	if j.Options == nil {
		j.Options = map[string]yaml.Node{}
	}
	j.Options[key] = n
	return nil
}
