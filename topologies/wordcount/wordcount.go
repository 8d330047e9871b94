// Package wordcount is the paper's experiment 4 as a topology: a spout emits
// each line of text as a root tuple, a split processor emits one tuple per
// word anchored to its line, and a windowed counter (fields grouping on the
// word) counts and acks: over the whole input, or over a sliding window of
// the lines' times, exactly once if asked. It is one of the topologies the
// acktor binary ships (acktor wordcount, acktor node); opticks.txt beside it
// is the text it counts by default.
package wordcount

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/acktor/acktor/actors"
	"github.com/acktor/acktor/member"
	"github.com/acktor/acktor/source"
	"github.com/acktor/acktor/window"
)

// Options shape the topology.
type Options struct {
	Spouts    int `yaml:"-"`
	Splitters int `yaml:"splitters"`
	Counters  int `yaml:"counters"`
	// FailRate is the share of tuples a processor fails; DropRate the share
	// it silently drops (never acks), so that only the timeout finds them.
	FailRate float64 `yaml:"fail_rate"`
	DropRate float64 `yaml:"drop_rate"`
	// Seed seeds each task's fail/drop decisions.
	Seed uint64 `yaml:"-"`
	// Window makes the counts those of a sliding window over the lines'
	// times; the zero value counts the whole input.
	Window window.Config `yaml:"-"`
	// ExactlyOnce makes the counters drop what replays bring again, so the
	// counts are exact even with fail and drop rates.
	ExactlyOnce bool `yaml:"-"`
}

// Topology is the word count as a member registers it: job.splitters and
// job.counters (2 each by default), job.fail_rate and job.drop_rate are
// its settings; it writes word<TAB>count lines.
func Topology() member.Topology {
	return member.Topology{Name: "wordcount", Build: func(j *member.Job) (*actors.Topology, error) {
		o := Options{Splitters: 2, Counters: 2}
		if err := j.Decode(&o); err != nil {
			return nil, err
		}
		o.Spouts, o.Seed, o.Window, o.ExactlyOnce = j.Spouts, j.Seed, j.Window, j.ExactlyOnce
		return Build(j.Source, o)
	}}
}

// Validate names the first option out of range, as an *actors.FieldError.
func (o Options) Validate() error {
	bad := func(field string, v any, want string) error {
		return &actors.FieldError{Field: field, Value: v, Want: want}
	}
	switch {
	case o.Spouts < 1:
		return bad("Spouts", o.Spouts, ">= 1")
	case o.Splitters < 1:
		return bad("Splitters", o.Splitters, ">= 1")
	case o.Counters < 1:
		return bad("Counters", o.Counters, ">= 1")
	case o.FailRate < 0 || o.FailRate >= 1:
		return bad("FailRate", o.FailRate, "0 <= p < 1")
	case o.DropRate < 0 || o.DropRate >= 1 || o.FailRate+o.DropRate >= 1:
		return bad("DropRate", o.DropRate, "0 <= p < 1 and fail rate + drop rate < 1")
	case o.Window != (window.Config{}):
		if err := o.Window.Validate(); err != nil {
			return bad("Window", fmt.Sprintf("%v/%v", o.Window.Size, o.Window.Pane), err.Error())
		}
	}
	return nil
}

// CountComponent is the name of the count step, a windowed counter.
const CountComponent = "count"

// Build makes the word count topology over src.
func Build(src source.Factory, o Options) (*actors.Topology, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("wordcount: %w", err)
	}
	var b actors.Builder
	b.Spout("lines", o.Spouts, src)
	b.Processor("split", o.Splitters, func(ti actors.TaskInfo) (actors.Processor, error) {
		return &Split{chaos: newChaos(o, ti)}, nil
	}).LocalOrShuffle("lines")
	counter := actors.CounterOptions{Window: o.Window, Key: 0, Value: -1, ExactlyOnce: o.ExactlyOnce}
	b.Counter(CountComponent, o.Counters, counter, func(ti actors.TaskInfo, k *actors.Counter) actors.Processor {
		return &Count{chaos: newChaos(o, ti), Counter: k}
	}).Fields("split", 0)
	topo, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("wordcount: %w", err)
	}
	return topo, nil
}

// Counts returns the word counts of a finished run: over the last window
// with Options.Window, over the whole input without.
func Counts(st *actors.RunStats) map[string]int64 {
	out := map[string]int64{}
	if r := st.Counters[CountComponent]; r != nil {
		for _, e := range r.Top {
			out[e.Key] = int64(e.Count)
		}
	}
	return out
}

// chaos decides, from a seeded per-task stream, which tuples to fail or drop.
type chaos struct {
	fail, drop float64
	rng        *rand.Rand
}

func newChaos(o Options, ti actors.TaskInfo) chaos {
	return chaos{fail: o.FailRate, drop: o.DropRate, rng: rand.New(rand.NewPCG(o.Seed, uint64(ti.Task)))}
}

// skip fails or drops t as chance has it and says whether it did.
func (c *chaos) skip(t *actors.Tuple, col *actors.Collector) bool {
	if c.fail == 0 && c.drop == 0 {
		return false
	}
	switch x := c.rng.Float64(); {
	case x < c.fail:
		col.Fail(t)
		return true
	case x < c.fail+c.drop:
		return true
	}
	return false
}

// Split emits one tuple per word of a line (strings.Fields), anchored to it.
type Split struct{ chaos chaos }

// Process implements actors.Processor.
func (s *Split) Process(t *actors.Tuple, c *actors.Collector) {
	if s.chaos.skip(t, c) {
		return
	}
	anchor := []*actors.Tuple{t}
	for w := range strings.FieldsSeq(t.Values()[0]) {
		if err := c.Emit(anchor, w); err != nil {
			c.Fail(t)
			return
		}
	}
	c.Ack(t)
}

// ReusesTuples implements actors.Reuser: Split keeps no tuple.
func (s *Split) ReusesTuples() {}

// Count is the count step: a windowed counter task (one tuple, one count
// of its word) behind the chaos of fail and drop rates.
type Count struct {
	chaos chaos
	*actors.Counter
}

// Process implements actors.Processor.
func (k *Count) Process(t *actors.Tuple, c *actors.Collector) {
	if k.chaos.skip(t, c) {
		return
	}
	k.Counter.Process(t, c)
}

// ReusesTuples implements actors.Reuser: Count keeps no tuple.
func (k *Count) ReusesTuples() {}
