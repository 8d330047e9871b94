package actors

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acktor/acktor/messages"
	"github.com/acktor/acktor/window"
)

// Defaults of CounterOptions' limits, per task.
const (
	DefaultCounterKeys = 1 << 22
	DefaultCounterIDs  = 1 << 23
)

// allTime is the window of a counter without one: a single pane of 2^62 ns
// (146 years) that holds every unix time from 1970 on.
const allTime = time.Duration(1 << 62)

// CounterOptions shape a windowed counter component.
type CounterOptions struct {
	// Window is the sliding window each task keeps, over the tuples' times
	// (Tuple.Time). The zero value counts over all time.
	Window window.Config
	// Limits bound each task's window; a zero MaxKeys means
	// DefaultCounterKeys.
	Limits window.Limits
	// Key is the index of the tuple value that is the key. Value is the
	// index of the value to sum, a base-10 integer, or -1 to sum 1 per
	// tuple.
	Key, Value int
	// ExactlyOnce drops an update whose tuple's content id the task has
	// already applied, so replays never count twice. The ids of a pane are
	// forgotten when it leaves the window (a replay that old is late).
	ExactlyOnce bool
	// MaxIDs bounds the content ids a task remembers, 11 to 21 bytes each;
	// 0 means DefaultCounterIDs. An update that would pass it is refused
	// (failed, so replayed later and dead-lettered in the end).
	MaxIDs int
}

// withDefaults fills the zero fields and checks the rest.
func (o CounterOptions) withDefaults() (CounterOptions, error) {
	if o.Window == (window.Config{}) {
		o.Window = window.Config{Size: allTime, Pane: allTime}
	}
	if err := o.Window.Validate(); err != nil {
		return o, fmt.Errorf("counter: %w", err)
	}
	if o.Limits.MaxKeys == 0 {
		o.Limits.MaxKeys = DefaultCounterKeys
	}
	if err := o.Limits.Validate(); err != nil {
		return o, fmt.Errorf("counter: %w", err)
	}
	if o.MaxIDs == 0 {
		o.MaxIDs = DefaultCounterIDs
	}
	switch {
	case o.Key < 0:
		return o, fmt.Errorf("counter: Key = %d, want >= 0", o.Key)
	case o.Value < -1:
		return o, fmt.Errorf("counter: Value = %d, want >= 0, or -1 for 1 per tuple", o.Value)
	case o.MaxIDs < 0:
		return o, fmt.Errorf("counter: MaxIDs = %d, want >= 0", o.MaxIDs)
	}
	return o, nil
}

// Counter is the processor of a windowed counter task: it folds each tuple
// into a sliding window (window.Sliding: exact counts and sums per key) and
// acks it once applied, so an acked tuple is a counted one. A tuple older
// than the window is acked and counted as late (replaying it cannot help);
// one a limit refuses, or whose value is no integer, is failed and so
// replayed, then dead-lettered with its reason.
type Counter struct {
	o    CounterOptions
	w    *window.Sliding
	seen *window.Seen // the content ids applied, per pane (ExactlyOnce)
	st   messages.CounterResult
}

// NewCounter makes the processor of one counter task.
func NewCounter(o CounterOptions) (*Counter, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	w, err := window.New(o.Window, o.Limits)
	if err != nil {
		return nil, fmt.Errorf("counter: %w", err)
	}
	return &Counter{o: o, w: w, seen: window.NewSeen(o.Window.Pane, o.MaxIDs)}, nil
}

// Process implements Processor.
func (k *Counter) Process(t *Tuple, c *Collector) {
	if err := k.apply(t); err != nil {
		k.st.Refused++
		c.Fail(t)
		return
	}
	c.Ack(t)
}

// apply folds t into the window; an error means t was refused.
func (k *Counter) apply(t *Tuple) error {
	vals := t.Values()
	if k.o.Key >= len(vals) || k.o.Value >= len(vals) {
		return fmt.Errorf("counter: tuple has %d values, key is value %d and value %d", len(vals), k.o.Key, k.o.Value)
	}
	value := int64(1)
	if k.o.Value >= 0 {
		v, err := strconv.ParseInt(vals[k.o.Value], 10, 64)
		if err != nil {
			return fmt.Errorf("counter: value: %w", err)
		}
		value = v
	}
	cid, tm := t.ContentID(), t.Time()
	dedupe := k.o.ExactlyOnce && cid != 0
	if dedupe {
		// Claim the id first (one probe sequence for the common new id),
		// and give it back if the window does not take the update.
		if start, _, ok := k.w.Bounds(); ok {
			k.seen.Expire(start)
		}
		fresh, err := k.seen.Claim(tm, cid)
		switch {
		case err != nil:
			return fmt.Errorf("counter: %w", err)
		case !fresh:
			k.st.Duplicates++
			return nil
		}
	}
	err := k.w.Add(tm, []byte(vals[k.o.Key]), value)
	if err != nil && dedupe {
		k.seen.Release(tm, cid)
	}
	switch {
	case errors.Is(err, window.ErrLate):
		k.st.Late++
		return nil
	case err != nil:
		return fmt.Errorf("counter: %w", err)
	}
	k.st.Applied++
	return nil
}

// Query implements Querier: the window's values of q's keys, its top
// entries, or all of them, with the task's counters.
func (k *Counter) Query(q *messages.CounterQuery) *messages.CounterResult {
	r := &messages.CounterResult{Applied: k.st.Applied, Duplicates: k.st.Duplicates, Late: k.st.Late,
		Refused: k.st.Refused, Ids: uint64(k.seen.Len())}
	r.Start, r.End, r.HasWindow = k.w.Bounds()
	st := k.w.Stats()
	r.LiveKeys = uint64(st.Live)
	put := func(key string, v window.Value) {
		r.Keys = append(r.Keys, key)
		r.Counts = append(r.Counts, v.Count)
		r.Sums = append(r.Sums, v.Sum)
	}
	for _, key := range q.Keys {
		put(key, k.w.Get([]byte(key)))
	}
	by := window.ByCount
	if q.BySum {
		by = window.BySum
	}
	n := int(q.Top)
	if q.All {
		n = st.Live
	}
	for _, e := range k.w.TopK(nil, n, by) {
		put(e.Key, e.Value)
	}
	return r
}

// Querier is a processor that answers CounterQuery messages sent to its task.
type Querier interface {
	Query(q *messages.CounterQuery) *messages.CounterResult
}

// CounterResult is a counter component's answer to a query, merged over its
// tasks (every value is a sum, so merging adds).
type CounterResult struct {
	Keys []window.Entry // the asked keys, in the asked order
	Top  []window.Entry // the top entries, or every key with All, best first
	// Start and End are the widest window bounds over the tasks, unix ns;
	// HasWindow is false until a task has taken an update.
	Start, End int64
	HasWindow  bool
	// The tasks' counters, summed.
	Applied, Duplicates, Late, Refused, LiveKeys, IDs uint64
}

// merge folds one task's answer into r; keys is len(q.Keys).
func (r *CounterResult) merge(m *messages.CounterResult, keys int, top map[string]window.Value) error {
	if m.Error != "" {
		return errors.New(m.Error)
	}
	if n := len(m.Keys); n < keys || len(m.Counts) != n || len(m.Sums) != n {
		return fmt.Errorf("malformed answer: %d keys, %d counts, %d sums for %d asked", n, len(m.Counts), len(m.Sums), keys)
	}
	for i := range keys {
		r.Keys[i].Count += m.Counts[i]
		r.Keys[i].Sum += m.Sums[i]
	}
	for i := keys; i < len(m.Keys); i++ {
		v := top[m.Keys[i]]
		top[m.Keys[i]] = window.Value{Count: v.Count + m.Counts[i], Sum: v.Sum + m.Sums[i]}
	}
	if m.HasWindow {
		if !r.HasWindow || m.Start < r.Start {
			r.Start = m.Start
		}
		if !r.HasWindow || m.End > r.End {
			r.End = m.End
		}
		r.HasWindow = true
	}
	r.Applied += m.Applied
	r.Duplicates += m.Duplicates
	r.Late += m.Late
	r.Refused += m.Refused
	r.LiveKeys += m.LiveKeys
	r.IDs += m.Ids
	return nil
}

// rank sorts merged top entries best first (ties to the smaller key) and
// keeps n of them (all when n < 0).
func rank(top map[string]window.Value, bySum bool, n int) []window.Entry {
	out := make([]window.Entry, 0, len(top))
	for k, v := range top {
		out = append(out, window.Entry{Key: k, Value: v})
	}
	slices.SortFunc(out, func(a, b window.Entry) int {
		x, y := int64(a.Count), int64(b.Count)
		if bySum {
			x, y = a.Sum, b.Sum
		}
		if c := cmp.Compare(y, x); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	if n >= 0 && len(out) > n {
		out = out[:n]
	}
	return out
}
