// Package wordcount is the paper's experiment 4 as a topology: a spout emits
// each line of text as a root tuple, a split processor emits one tuple per
// word anchored to its line, and a count processor (fields grouping on the
// word) counts and acks.
package wordcount

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"

	"github.com/acktor/acktor/actors"
	"github.com/acktor/acktor/actors/source"
)

// Options shape the topology.
type Options struct {
	Spouts, Splitters, Counters int
	// FailRate is the share of tuples a processor fails; DropRate the share
	// it silently drops (never acks), so that only the timeout finds them.
	FailRate, DropRate float64
	// Seed seeds each task's fail/drop decisions.
	Seed uint64
}

// Validate names the first option out of range.
func (o Options) Validate() error {
	switch {
	case o.Spouts < 1:
		return fmt.Errorf("spouts = %d, want >= 1", o.Spouts)
	case o.Splitters < 1:
		return fmt.Errorf("splitters = %d, want >= 1", o.Splitters)
	case o.Counters < 1:
		return fmt.Errorf("counters = %d, want >= 1", o.Counters)
	case o.FailRate < 0 || o.FailRate >= 1:
		return fmt.Errorf("fail rate = %v, want 0 <= p < 1", o.FailRate)
	case o.DropRate < 0 || o.DropRate >= 1 || o.FailRate+o.DropRate >= 1:
		return fmt.Errorf("drop rate = %v, want 0 <= p < 1 and fail rate + drop rate < 1", o.DropRate)
	}
	return nil
}

// Result gathers the counters' tallies once they have drained.
type Result struct {
	mu     sync.Mutex
	counts map[string]int64
}

// Counts returns the word counts merged over all count tasks.
func (r *Result) Counts() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.counts)
}

// Build makes the word count topology over src.
func Build(src source.Factory, o Options) (*actors.Topology, *Result, error) {
	if err := o.Validate(); err != nil {
		return nil, nil, fmt.Errorf("wordcount: %w", err)
	}
	res := &Result{counts: map[string]int64{}}
	var b actors.Builder
	b.Spout("lines", o.Spouts, src)
	b.Processor("split", o.Splitters, func(ti actors.TaskInfo) (actors.Processor, error) {
		return &Split{chaos: newChaos(o, ti)}, nil
	}).Shuffle("lines")
	b.Processor("count", o.Counters, func(ti actors.TaskInfo) (actors.Processor, error) {
		return &Count{chaos: newChaos(o, ti), counts: map[string]int64{}, res: res}, nil
	}).Fields("split", 0)
	topo, err := b.Build()
	if err != nil {
		return nil, nil, fmt.Errorf("wordcount: %w", err)
	}
	return topo, res, nil
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

// Count counts words and hands its tally to the Result when it drains.
type Count struct {
	chaos  chaos
	counts map[string]int64
	res    *Result
}

// Process implements actors.Processor.
func (k *Count) Process(t *actors.Tuple, c *actors.Collector) {
	if k.chaos.skip(t, c) {
		return
	}
	w := t.Values()[0]
	if _, ok := k.counts[w]; !ok {
		w = strings.Clone(w) // do not keep the whole line alive for one word
	}
	k.counts[w]++
	c.Ack(t)
}

// Finish implements actors.Finisher.
func (k *Count) Finish(*actors.Collector) {
	k.res.mu.Lock()
	defer k.res.mu.Unlock()
	for w, n := range k.counts {
		k.res.counts[w] += n
	}
}
