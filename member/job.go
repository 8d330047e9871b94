package member

import (
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/acktor/acktor/actors"
	"github.com/acktor/acktor/source"
	"github.com/acktor/acktor/window"
)

// Topology is a topology a member can run, registered under Name (what
// job.topology says).
type Topology struct {
	Name string
	// Build makes the job's topology: its spout reads j.Source with
	// j.Spouts tasks, its counters take j.Window and j.ExactlyOnce, and
	// its own settings come from j.Decode. An *actors.FieldError naming a
	// field of the struct Decode filled (or Spouts, Window) is reported by
	// the field's key.
	Build func(j *Job) (*actors.Topology, error)
	// Results writes a batch job's results when it ends (job.output); nil
	// writes every counter's keys and counts (WriteCounts).
	Results func(w io.Writer, st *actors.RunStats) error
	// Generate, if set, is the topology's own stream for job.source
	// generator: lines roots over all spout tasks, seeded by j.Seed. Nil:
	// lines of Zipf-distributed words (GeneratorConfig).
	Generate func(j *Job, lines int64) (source.Factory, error)
}

// Job is what a Topology is built from: the job section of the config.
type Job struct {
	// Source opens the roots of a spout task (job.source).
	Source source.Factory
	// Spouts is the spout tasks that read Source (job.spouts).
	Spouts int
	// Window is the counters' sliding window (job.window, job.pane); the
	// zero Config counts everything.
	Window window.Config
	// ExactlyOnce makes counters drop what replays bring again
	// (job.exactly_once).
	ExactlyOnce bool
	// Seed seeds what the topology draws at random (tracker.seed).
	Seed uint64

	options  map[string]yaml.Node
	topology string
	decoded  reflect.Type // the struct Decode filled, to name its fields' keys
}

// Decode sets the fields of v, a pointer to a struct with yaml tags, from
// the job section's keys the member does not know: the topology's own
// settings. A key v has no field for, or a value of the wrong type, is a
// *SettingError.
func (j *Job) Decode(v any) error {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("member: Job.Decode takes a pointer to a struct, not %T", v)
	}
	j.decoded = t.Elem()
	keys := make([]string, 0, len(j.options))
	for k := range j.options {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		n := j.options[k]
		f, ok := yamlField(t.Elem(), k)
		if !ok {
			return setting("job."+k, ": line %d: field %s not found: no setting of the member, nor of topology %s", n.Line, k, j.topology)
		}
		at := ""
		if n.Line > 0 {
			at = fmt.Sprintf(" (line %d)", n.Line)
		}
		if kind := f.Type.Kind(); kind >= reflect.Int && kind <= reflect.Uint64 && wholeNumbers(&n, "") != nil {
			return setting("job."+k, ": %s is not a whole number%s", n.Value, at)
		}
		if err := n.Decode(reflect.ValueOf(v).Elem().FieldByIndex(f.Index).Addr().Interface()); err != nil {
			return setting("job."+k, ": %q is not %s%s", n.Value, kindOf(f.Type), at)
		}
	}
	return nil
}

// keyOf is the config key of a field an *actors.FieldError names: the
// runtime's (tracker.*), the job's, or one of the struct Decode filled.
func (j *Job) keyOf(field string) (string, bool) {
	if k, ok := fieldKeys[field]; ok {
		return k, true
	}
	if j.decoded != nil {
		if f, ok := j.decoded.FieldByName(field); ok && f.IsExported() {
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			if name != "-" {
				return "job." + name, true
			}
		}
	}
	return "", false
}

// fieldKeys are the keys of the fields of actors.Config and of Job.
var fieldKeys = map[string]string{
	"Ackers": "tracker.ackers", "MaxPending": "tracker.max_pending", "Timeout": "tracker.timeout",
	"MaxReplays": "tracker.max_replays", "BatchSize": "tracker.batch", "AckDelay": "tracker.ack_delay",
	"Spouts": "job.spouts", "Window": "job.window/job.pane", "WindowSize": "job.window",
}

// named turns an *actors.FieldError into a *SettingError naming its key.
func (j *Job) named(err error) error {
	var fe *actors.FieldError
	if errors.As(err, &fe) {
		if k, ok := j.keyOf(fe.Field); ok {
			return setting(k, " %v, want %s", fe.Value, fe.Want)
		}
	}
	return err
}

// windowOf is the window job.window and job.pane ask for.
func windowOf(c JobConfig) (window.Config, error) {
	switch {
	case c.Window == 0 && c.Pane == 0:
		return window.Config{}, nil
	case c.Window <= 0:
		return window.Config{}, setting("job.window", " %v: want > 0 when a pane is given", c.Window)
	case c.Pane == 0:
		c.Pane = c.Window
	}
	w := window.Config{Size: c.Window, Pane: c.Pane}
	if err := w.Validate(); err != nil {
		return window.Config{}, setting("job.window/job.pane", " %v/%v: %v", c.Window, c.Pane, err)
	}
	return w, nil
}

// GeneratorConfig is the stream of job.source generator: Lines lines of
// ten Zipf-distributed words from 50 000, seeded; with a step, line j has
// the event time j*step after 2026-01-01 UTC.
func GeneratorConfig(lines int64, step time.Duration, seed uint64) source.GeneratorConfig {
	return source.GeneratorConfig{Lines: lines, WordsPerLine: 10, Vocabulary: 50_000, Skew: 1.1, Seed: seed,
		EventStep: step, EventStart: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// sourceOf opens the source job.source names (not the ingest log's, which
// the member opens).
func sourceOf(c Config) (source.Factory, error) {
	j := c.Job
	switch {
	case j.Source == "generator":
		f, err := source.Generator(GeneratorConfig(j.Lines, j.EventStep, c.Tracker.Seed))
		if err != nil {
			return nil, setting("job.event_step", ": %v", err)
		}
		return f, nil
	case j.Input == "-":
		return source.Reader(os.Stdin, "stdin"), nil
	}
	st, err := os.Stat(j.Input)
	switch {
	case err != nil:
		return nil, setting("job.input", ": %v", err)
	case st.IsDir():
		return nil, setting("job.input", " %s: is a directory", j.Input)
	}
	return source.File(j.Input), nil
}
