// Package actors is acktor's runtime: the spout task, processor task and
// acker actors, the topology builder and the Collector a processor uses.
//
// Every spout task, processor task and acker is a Proto.Actor virtual actor
// (a cluster kind plus an identity), even in one process. The actors are
// thin: the acker translates messages into calls on the pure ledger
// (tracker/ledger), and user code sees only Process and a Collector.
package actors

import (
	"errors"
	"fmt"
	"regexp"
	"slices"

	"github.com/acktor/acktor/source"
	"github.com/acktor/acktor/tracker"
)

// Processor is user code run by a processor task. Process is called once per
// input tuple, from one goroutine at a time; it emits through c and must
// eventually Ack or Fail t (now, or later from another Process call).
type Processor interface {
	Process(t *Tuple, c *Collector)
}

// Reuser is implemented by a processor that keeps no *Tuple, and no slice
// that Values or Roots returned, once Process has returned (the strings
// themselves it may keep). Its task then reuses the memory of each input
// batch whose tuples were all acked or failed, as Flink does with object
// reuse enabled: about 100 bytes per tuple less to allocate and collect.
// The runtime's own Counter is treated so without it.
type Reuser interface {
	Processor
	ReusesTuples()
}

// Finisher is implemented by processors that want to act once every upstream
// task has drained: flush state, emit final tuples.
type Finisher interface {
	Finish(c *Collector)
}

// TaskInfo tells a processor or spout factory which task it builds.
type TaskInfo struct {
	Component string
	Index     int    // 0..Parallelism-1 within the component
	Task      uint32 // topology-wide task id
	Parallel  int    // the component's parallelism
}

// GroupingKind says how a component's tuples are spread over the tasks of a
// component that subscribes to it.
type GroupingKind int

const (
	// Shuffle spreads tuples evenly (round-robin per emitting task).
	Shuffle GroupingKind = iota
	// Fields sends equal values of one field to the same task.
	Fields
	// LocalOrShuffle spreads tuples evenly over the subscriber's tasks on
	// the emitting task's member, or over all of them when none is there
	// (Storm's localOrShuffleGrouping). On one member it is Shuffle; in a
	// cluster it keeps the tuples off the wire.
	LocalOrShuffle
)

// Grouping is one subscription of a processor to an upstream component.
type Grouping struct {
	From  string
	Kind  GroupingKind
	Field int // with Fields: the index of the value hashed
}

type spoutDef struct {
	name     string
	parallel int
	source   source.Factory
}

type processorDef struct {
	name     string
	parallel int
	make     func(TaskInfo) (Processor, error)
	inputs   []Grouping
	counter  bool
}

// Builder assembles a topology: spouts and processors with their
// parallelism and groupings. Errors are collected and reported by Build.
type Builder struct {
	spouts []spoutDef
	procs  []processorDef
	errs   []error
}

// ProcessorDeclarer adds subscriptions to the processor just declared.
type ProcessorDeclarer struct {
	b *Builder
	i int
}

var validName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)

// Spout declares a spout component whose tasks read roots from src.
func (b *Builder) Spout(name string, parallelism int, src source.Factory) {
	b.check(name, parallelism)
	if src == nil {
		b.errs = append(b.errs, fmt.Errorf("topology: spout %q: nil source", name))
	}
	b.spouts = append(b.spouts, spoutDef{name, parallelism, src})
}

// Processor declares a processor component; make builds the user code of
// each of its tasks.
func (b *Builder) Processor(name string, parallelism int, make func(TaskInfo) (Processor, error)) *ProcessorDeclarer {
	b.check(name, parallelism)
	if make == nil {
		b.errs = append(b.errs, fmt.Errorf("topology: processor %q: nil factory", name))
	}
	b.procs = append(b.procs, processorDef{name: name, parallel: parallelism, make: make})
	return &ProcessorDeclarer{b, len(b.procs) - 1}
}

// Counter declares a windowed counter component: each task is a Counter
// over o, wrapped by wrap when it is not nil (to filter or transform tuples
// before they count; the wrapper must keep the Counter's Query). Subscribe
// it with a fields grouping on o.Key, so that each key has one task.
// Counters answer Runtime.Query while the topology runs, and a finished run
// reports their final windows in RunStats.Counters.
func (b *Builder) Counter(name string, parallelism int, o CounterOptions, wrap func(TaskInfo, *Counter) Processor) *ProcessorDeclarer {
	if _, err := o.withDefaults(); err != nil {
		b.errs = append(b.errs, fmt.Errorf("topology: %s: %w", name, err))
	}
	d := b.Processor(name, parallelism, func(ti TaskInfo) (Processor, error) {
		k, err := NewCounter(o)
		if err != nil {
			return nil, err
		}
		if wrap == nil {
			return k, nil
		}
		return wrap(ti, k), nil
	})
	b.procs[d.i].counter = true
	return d
}

func (b *Builder) check(name string, parallelism int) {
	if !validName.MatchString(name) {
		b.errs = append(b.errs, fmt.Errorf("topology: component name %q: want a letter then up to 63 letters, digits, '-' or '_'", name))
	}
	if parallelism < 1 || parallelism > 4096 {
		b.errs = append(b.errs, fmt.Errorf("topology: component %q: parallelism %d, want 1..4096", name, parallelism))
	}
	for _, s := range b.spouts {
		if s.name == name {
			b.errs = append(b.errs, fmt.Errorf("topology: component %q declared twice", name))
		}
	}
	for _, p := range b.procs {
		if p.name == name {
			b.errs = append(b.errs, fmt.Errorf("topology: component %q declared twice", name))
		}
	}
}

// Shuffle subscribes to from with shuffle grouping.
func (d *ProcessorDeclarer) Shuffle(from string) *ProcessorDeclarer {
	d.b.procs[d.i].inputs = append(d.b.procs[d.i].inputs, Grouping{From: from, Kind: Shuffle})
	return d
}

// LocalOrShuffle subscribes to from with local-or-shuffle grouping: a
// tuple goes to a task on its emitter's member when there is one.
func (d *ProcessorDeclarer) LocalOrShuffle(from string) *ProcessorDeclarer {
	d.b.procs[d.i].inputs = append(d.b.procs[d.i].inputs, Grouping{From: from, Kind: LocalOrShuffle})
	return d
}

// Fields subscribes to from, grouping on the value at index field.
func (d *ProcessorDeclarer) Fields(from string, field int) *ProcessorDeclarer {
	if field < 0 {
		d.b.errs = append(d.b.errs, fmt.Errorf("topology: %s: fields grouping on %s: field %d < 0", d.b.procs[d.i].name, from, field))
	}
	d.b.procs[d.i].inputs = append(d.b.procs[d.i].inputs, Grouping{From: from, Kind: Fields, Field: field})
	return d
}

// Component is one spout or processor of a built topology.
type Component struct {
	Name      string
	Spout     bool
	Parallel  int
	FirstTask uint32 // its tasks are FirstTask..FirstTask+Parallel-1
	source    source.Factory
	make      func(TaskInfo) (Processor, error)
	inputs    []Grouping
	outputs   []output // subscribers, resolved
	upstream  int      // tasks that send to each of its tasks
	counter   bool     // a windowed counter: its tasks answer queries
}

// output is a downstream subscription as the emitting side sees it.
type output struct {
	to    *Component
	kind  GroupingKind
	field int
}

// Topology is a validated, immutable graph with topology-wide task ids.
type Topology struct {
	Components []*Component
	byName     map[string]*Component
	tasks      []*Component // task id -> component
}

// Build validates the graph: names, parallelism, subscriptions to declared
// components, at least one spout, and no cycles.
func (b *Builder) Build() (*Topology, error) {
	errs := append([]error(nil), b.errs...)
	if len(b.spouts) == 0 {
		errs = append(errs, errors.New("topology: no spout"))
	}
	t := &Topology{byName: map[string]*Component{}}
	add := func(c *Component) {
		c.FirstTask = uint32(len(t.tasks))
		for range c.Parallel {
			t.tasks = append(t.tasks, c)
		}
		t.Components = append(t.Components, c)
		t.byName[c.Name] = c
	}
	for _, s := range b.spouts {
		add(&Component{Name: s.name, Spout: true, Parallel: s.parallel, source: s.source})
	}
	for _, p := range b.procs {
		add(&Component{Name: p.name, Parallel: p.parallel, make: p.make, inputs: p.inputs, counter: p.counter})
	}
	for _, c := range t.Components {
		seen := map[string]bool{}
		for _, in := range c.inputs {
			from, ok := t.byName[in.From]
			if !ok {
				errs = append(errs, fmt.Errorf("topology: %s subscribes to unknown component %q", c.Name, in.From))
				continue
			}
			if seen[in.From] {
				errs = append(errs, fmt.Errorf("topology: %s subscribes to %s twice", c.Name, in.From))
				continue
			}
			seen[in.From] = true
			from.outputs = append(from.outputs, output{to: c, kind: in.Kind, field: in.Field})
			c.upstream += from.Parallel
		}
		if !c.Spout && len(c.inputs) == 0 {
			errs = append(errs, fmt.Errorf("topology: processor %s subscribes to nothing", c.Name))
		}
	}
	if len(errs) == 0 {
		if err := t.checkAcyclic(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(t.tasks) > tracker.ClientTasks {
		errs = append(errs, fmt.Errorf("topology: %d tasks, at most %d", len(t.tasks), tracker.ClientTasks))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Topology) checkAcyclic() error {
	state := map[*Component]int{} // 1 visiting, 2 done
	var visit func(c *Component) error
	visit = func(c *Component) error {
		switch state[c] {
		case 1:
			return fmt.Errorf("topology: cycle through %s", c.Name)
		case 2:
			return nil
		}
		state[c] = 1
		for _, o := range c.outputs {
			if err := visit(o.to); err != nil {
				return err
			}
		}
		state[c] = 2
		return nil
	}
	for _, c := range t.Components {
		if err := visit(c); err != nil {
			return err
		}
	}
	return nil
}

// Tasks is the number of tasks in the topology.
func (t *Topology) Tasks() int { return len(t.tasks) }

// Component returns the component with the given name.
func (t *Topology) Component(name string) (*Component, bool) {
	c, ok := t.byName[name]
	return c, ok
}

// Counters names the counter components, sorted.
func (t *Topology) Counters() []string {
	var out []string
	for name, c := range t.byName {
		if c.counter {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// taskInfo describes task id.
func (t *Topology) taskInfo(task uint32) TaskInfo {
	c := t.tasks[task]
	return TaskInfo{Component: c.Name, Index: int(task - c.FirstTask), Task: task, Parallel: c.Parallel}
}

// kindOf is the cluster kind of a task.
func (t *Topology) kindOf(task uint32) string {
	switch c := t.tasks[task]; {
	case c.Spout:
		return KindSpout
	case c.counter:
		return KindCounter
	}
	return KindProcessor
}

// identity is the virtual actor identity of a task: "<component>/<index>".
func (t *Topology) identity(task uint32) string {
	c := t.tasks[task]
	return fmt.Sprintf("%s/%d", c.Name, task-c.FirstTask)
}

// taskOf parses an identity back into a task id.
func (t *Topology) taskOf(identity string) (uint32, error) {
	var name string
	var idx int
	for i := len(identity) - 1; i >= 0; i-- {
		if identity[i] == '/' {
			name = identity[:i]
			if _, err := fmt.Sscanf(identity[i+1:], "%d", &idx); err != nil {
				return 0, fmt.Errorf("identity %q: bad task index: %w", identity, err)
			}
			break
		}
	}
	c, ok := t.byName[name]
	if !ok || idx < 0 || idx >= c.Parallel {
		return 0, fmt.Errorf("identity %q names no task of this topology", identity)
	}
	return c.FirstTask + uint32(idx), nil
}
