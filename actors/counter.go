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
	ids  map[int64]*idSet // by pane number: the content ids applied
	nIDs int
	from int64 // the oldest pane number that ids may hold
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
	return &Counter{o: o, w: w, ids: map[int64]*idSet{}}, nil
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
	var ids *idSet
	if k.o.ExactlyOnce && cid != 0 {
		// Claim the id first (one probe sequence for the common new id),
		// and give it back if the window does not take the update.
		ids = k.idsOf(floorDiv(tm, int64(k.o.Window.Pane)))
		full := k.nIDs >= k.o.MaxIDs
		if (full && ids.has(cid)) || (!full && !ids.add(cid)) {
			k.st.Duplicates++
			return nil
		}
		if full {
			return errors.New("counter: MaxIDs content ids remembered")
		}
		k.nIDs++
	}
	err := k.w.Add(tm, []byte(vals[k.o.Key]), value)
	if err != nil && ids != nil {
		ids.remove(cid)
		k.nIDs--
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

// idsOf returns the content ids of pane, first forgetting the panes that
// left the window.
func (k *Counter) idsOf(pane int64) *idSet {
	if start, _, ok := k.w.Bounds(); ok {
		if from := floorDiv(start, int64(k.o.Window.Pane)); from > k.from {
			k.from = from
			for p, s := range k.ids {
				if p < from {
					k.nIDs -= s.n
					delete(k.ids, p)
				}
			}
		}
	}
	s := k.ids[pane]
	if s == nil {
		s = &idSet{}
		k.ids[pane] = s
	}
	return s
}

// Query implements Querier: the window's values of q's keys, its top
// entries, or all of them, with the task's counters.
func (k *Counter) Query(q *messages.CounterQuery) *messages.CounterResult {
	r := &messages.CounterResult{Applied: k.st.Applied, Duplicates: k.st.Duplicates, Late: k.st.Late,
		Refused: k.st.Refused, Ids: uint64(k.nIDs)}
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

func floorDiv(t, w int64) int64 {
	q := t / w
	if t%w < 0 {
		q--
	}
	return q
}

// idSet is a set of non-zero content ids: open addressing with linear
// probing, at most 3/4 full, 8 bytes a slot.
type idSet struct {
	slots []uint64
	n     int
}

func (s *idSet) has(id uint64) bool {
	if len(s.slots) == 0 {
		return false
	}
	mask := uint64(len(s.slots) - 1)
	for i := mix64(id) & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case id:
			return true
		case 0:
			return false
		}
	}
}

// remove takes id out, shifting back the ids after it that probed past its
// slot, so that no tombstones are needed.
func (s *idSet) remove(id uint64) {
	if len(s.slots) == 0 {
		return
	}
	mask := uint64(len(s.slots) - 1)
	i := mix64(id) & mask
	for ; s.slots[i] != id; i = (i + 1) & mask {
		if s.slots[i] == 0 {
			return
		}
	}
	for j := (i + 1) & mask; s.slots[j] != 0; j = (j + 1) & mask {
		// Move slots[j] into the hole at i unless its home lies in (i, j].
		if home := mix64(s.slots[j]) & mask; (j-home)&mask >= (j-i)&mask {
			s.slots[i] = s.slots[j]
			i = j
		}
	}
	s.slots[i] = 0
	s.n--
}

// add puts id in the set and says whether it was new.
func (s *idSet) add(id uint64) bool {
	if (s.n+1)*4 > len(s.slots)*3 {
		s.grow()
	}
	mask := uint64(len(s.slots) - 1)
	for i := mix64(id) & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case id:
			return false
		case 0:
			s.slots[i] = id
			s.n++
			return true
		}
	}
}

func (s *idSet) grow() {
	old := s.slots
	s.slots = make([]uint64, max(16, 2*len(old)))
	s.n = 0
	for _, id := range old {
		if id != 0 {
			s.add(id)
		}
	}
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
