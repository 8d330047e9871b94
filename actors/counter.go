package actors

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acktor/acktor/messages"
	"github.com/acktor/acktor/sketch"
	"github.com/acktor/acktor/window"
)

// Defaults of CounterOptions' limits, per task.
const (
	DefaultCounterKeys = 1 << 22
	DefaultCounterIDs  = 1 << 23
)

// AllTime is the window of a counter without one: a single pane of 2^62 ns
// (146 years) that holds every unix time from 1970 on. A query's bounds
// span it exactly then.
const AllTime = time.Duration(1 << 62)

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
	// already applied, so replays never count twice, whatever time they
	// come with. The ids of a pane are forgotten when it leaves the window
	// (a replay that old is late).
	ExactlyOnce bool
	// MaxIDs bounds the content ids a task remembers, 21 to 64 bytes each;
	// 0 means DefaultCounterIDs. An update that would pass it is refused
	// (failed, so replayed later and dead-lettered in the end).
	MaxIDs int
	// Distinct, if set, counts the distinct values of another field per
	// key over the window (riders per zone): a HyperLogLog per key per pane.
	Distinct *DistinctOptions
	// Repeats, if set, remembers another field's values per key over the
	// window in a Bloom filter per key per pane: a query can ask whether a
	// value was seen, and each key counts its updates whose value was seen
	// before in the window (repeat riders).
	Repeats *RepeatOptions
	// MaxSketchKeys bounds the keys with sketches (Distinct, Repeats) per
	// task; 0 means DefaultSketchKeys. Keys whose window emptied give their
	// sketches back; an update that would pass the bound is refused.
	MaxSketchKeys int
}

// DefaultSketchKeys is CounterOptions.MaxSketchKeys' default.
const DefaultSketchKeys = 1024

// DistinctOptions configure the distinct count of a counter.
type DistinctOptions struct {
	// Field is the index of the tuple value whose distinct values count.
	Field int
	// Precision of the HyperLogLogs, 4..18; 0 means 12 (about 1.6 % error;
	// up to 4 KiB per key per pane, less while a pane has few values).
	Precision uint8
}

// RepeatOptions configure the repeat test of a counter.
type RepeatOptions struct {
	// Field is the index of the tuple value remembered.
	Field int
	// Expected is how many values per key per pane the Bloom filters are
	// sized for, FPRate their false-positive rate then; 0 means 1000 and
	// 0.01 (1.2 KiB per key per pane).
	Expected uint
	FPRate   float64
}

// withDefaults fills the zero fields and checks the rest.
func (o CounterOptions) withDefaults() (CounterOptions, error) {
	if o.Window == (window.Config{}) {
		o.Window = window.Config{Size: AllTime, Pane: AllTime}
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
	case o.MaxSketchKeys < 0:
		return o, fmt.Errorf("counter: MaxSketchKeys = %d, want >= 0", o.MaxSketchKeys)
	}
	if o.MaxSketchKeys == 0 {
		o.MaxSketchKeys = DefaultSketchKeys
	}
	if d := o.Distinct; d != nil {
		c := *d
		if c.Precision == 0 {
			c.Precision = 12
		}
		if c.Field < 0 {
			return o, fmt.Errorf("counter: Distinct.Field = %d, want >= 0", c.Field)
		}
		if _, err := sketch.NewHyperLogLog(c.Precision); err != nil {
			return o, fmt.Errorf("counter: Distinct: %w", err)
		}
		o.Distinct = &c
	}
	if r := o.Repeats; r != nil {
		c := *r
		if c.Expected == 0 {
			c.Expected = 1000
		}
		if c.FPRate == 0 {
			c.FPRate = 0.01
		}
		if c.Field < 0 {
			return o, fmt.Errorf("counter: Repeats.Field = %d, want >= 0", c.Field)
		}
		if _, err := sketch.NewBloom(c.Expected, c.FPRate); err != nil {
			return o, fmt.Errorf("counter: Repeats: %w", err)
		}
		o.Repeats = &c
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
	sk   *keySketches // Distinct and Repeats, if asked for
	keys []string     // warm's buffers, kept for the next batch
	ids  []uint64
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
	k := &Counter{o: o, w: w, seen: window.NewSeen(o.Window.Pane, o.MaxIDs)}
	if o.Distinct != nil || o.Repeats != nil {
		if k.sk, err = newKeySketches(o); err != nil {
			return nil, err
		}
	}
	return k, nil
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

// warm loads the lines that ts's updates will touch: their keys' in the
// window (Sliding.Warm) and, exactly once, their ids' in the Seen table.
func (k *Counter) warm(ts []Tuple) {
	keys := k.keys[:0]
	for i := range ts {
		if vals := ts[i].Values(); k.o.Key < len(vals) {
			keys = append(keys, vals[k.o.Key])
		}
	}
	k.w.Warm(keys)
	clear(keys)
	k.keys = keys
	if k.o.ExactlyOnce {
		ids := k.ids[:0]
		for i := range ts {
			ids = append(ids, ts[i].ContentID())
		}
		k.seen.Warm(ids)
		k.ids = ids
	}
}

// apply folds t into the window; an error means t was refused.
func (k *Counter) apply(t *Tuple) error {
	vals := t.Values()
	if k.o.Key >= len(vals) || k.o.Value >= len(vals) {
		return fmt.Errorf("counter: tuple has %d values, key is value %d and value %d", len(vals), k.o.Key, k.o.Value)
	}
	var sk *keySketch
	if k.sk != nil {
		var err error
		if sk, err = k.sk.of(vals, k.o.Key, k.w); err != nil {
			return err
		}
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
	err := k.w.AddString(tm, vals[k.o.Key], value)
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
	if sk != nil {
		k.sk.add(sk, tm, vals, k.o.Key)
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
	if k.sk != nil {
		k.sk.answer(r, len(q.Keys), q.Seen, k.w)
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
	// Distinct and Repeats hold the sketch columns of the Keys and Top
	// entries, for counters with Distinct or Repeats; Seen says, per asked
	// key, whether the query's Seen value is in its window (Bloom: false
	// means no, true means probably).
	Distinct, Repeats map[string]uint64
	Seen              map[string]bool
	// Missing names the counter tasks that did not answer in time (a
	// partial answer: ErrPartial).
	Missing []string
}

// merge folds one task's answer into r; keys is len(q.Keys).
func (r *CounterResult) merge(m *messages.CounterResult, keys int, top map[string]window.Value) error {
	if m.Error != "" {
		return errors.New(m.Error)
	}
	n := len(m.Keys)
	if n < keys || len(m.Counts) != n || len(m.Sums) != n || len(m.Distinct) != 0 && len(m.Distinct) != n ||
		len(m.Repeats) != 0 && len(m.Repeats) != n || len(m.Seen) != 0 && len(m.Seen) != keys {
		return fmt.Errorf("malformed answer: %d keys, %d counts, %d sums, %d distinct, %d repeats, %d seen for %d asked",
			n, len(m.Counts), len(m.Sums), len(m.Distinct), len(m.Repeats), len(m.Seen), keys)
	}
	// A key lives in one task: the others answer zero for it.
	for i, key := range m.Keys {
		if len(m.Distinct) > 0 {
			r.Distinct[key] = max(r.Distinct[key], m.Distinct[i])
		}
		if len(m.Repeats) > 0 {
			r.Repeats[key] = max(r.Repeats[key], m.Repeats[i])
		}
		if i < len(m.Seen) {
			r.Seen[key] = r.Seen[key] || m.Seen[i]
		}
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

// trim keeps the sketch columns of the entries in the answer only (tasks
// send theirs for their whole top), and drops empty ones.
func (r *CounterResult) trim() {
	keep := map[string]bool{}
	for _, e := range r.Keys {
		keep[e.Key] = true
	}
	for _, e := range r.Top {
		keep[e.Key] = true
	}
	for _, m := range []map[string]uint64{r.Distinct, r.Repeats} {
		maps.DeleteFunc(m, func(k string, _ uint64) bool { return !keep[k] })
	}
	if len(r.Distinct) == 0 {
		r.Distinct = nil
	}
	if len(r.Repeats) == 0 {
		r.Repeats = nil
	}
	if len(r.Seen) == 0 {
		r.Seen = nil
	}
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
