// Package window is the speed layer's pure core: sliding ("floating")
// windows of fixed-width panes over event time (the speed-layer paper), read at any time
// for per-key counts and sums.
//
// A window of Size is a ring of Size/Pane panes (slots). An update lands in
// the pane its time falls in; a time past the newest pane moves the window
// forward, and the panes that fall off its start expire. Nothing is copied
// into several windows as Flink's sliding windows do: an update touches one
// pane, a running total takes each pane in once, and an expiring pane is
// subtracted from the total (subtract-on-evict, exact because counts and
// sums are invertible).
//
// Two windows share that clock:
//
//   - Sliding is exact: the paper's matrix of vectors. Keys are
//     dictionary-encoded to dense columns, and the window total of every
//     column sits in one dense vector, so a read is a dictionary lookup and
//     an index. A pane keeps only the columns it touched (a sparse row of
//     the matrix): memory follows the traffic, not keys × panes, and
//     expiring a pane costs O(columns it touched), not O(keys).
//   - Panes holds any per-pane Aggregate, for key spaces too large to keep
//     exactly: Count-Min, HyperLogLog, Bloom. Those that cannot subtract
//     have no running total; their window is the merge of the live panes.
//
// Time is an int64 the caller supplies: nanoseconds of event time (for
// example time.Time.UnixNano), any epoch if it is the same for every call.
// Panes are aligned to multiples of Pane from t = 0: pane k holds
// [k·Pane, (k+1)·Pane), and every int64 is a valid time. The package owns
// no goroutine, clock or I/O, and a window is not safe for concurrent use:
// one actor owns it.
//
// Lateness: an update is accepted while its pane is in the window, however
// far behind the newest update it is, and goes into its own pane; an update
// older than the window's start is rejected with ErrLate and counted, never
// folded into another pane. An update past the newest pane moves the window
// forward first (Advance does so explicitly, without an update), and
// Config.MaxAhead bounds how far one update may move it, so that a single
// bogus timestamp cannot empty the window.
//
// Numbers: an update adds one to its key's count and its value to the sum.
// Counts are uint32 per pane (ErrOverflow past that) and uint64 over the
// window; sums are int64, exact modulo 2^64, so they are right whenever the
// true window sum fits in an int64 (floats would drift under subtraction).
package window

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// MaxPanes is the most panes a window may have.
const MaxPanes = 1 << 20

// Rejections. They are plain sentinels, not wrapped with the offending
// values, so that rejecting a flood of bad updates allocates nothing; each
// is also counted in Stats.
var (
	ErrLate      = errors.New("window: update is older than the window's start")
	ErrAhead     = errors.New("window: update is further ahead of the window than Config.MaxAhead")
	ErrKeysFull  = errors.New("window: new key, and Limits.MaxKeys keys have a nonzero window count")
	ErrCellsFull = errors.New("window: new (key, pane) cell, and Limits.MaxCells cells are in use")
	ErrOverflow  = errors.New("window: a key's count in one pane would pass 2^32-1")
	ErrColumn    = errors.New("window: column index is not in the dictionary")
)

// Config is the shape of a window, shared by Sliding and Panes.
type Config struct {
	// Size is the window's span, a positive multiple of Pane.
	Size time.Duration
	// Pane is the width of one pane (slot): the window's resolution, and the
	// step by which it slides.
	Pane time.Duration
	// MaxAhead bounds how far one update may move the window forward,
	// rounded down to whole panes: an update that would move it further is
	// rejected with ErrAhead. 0 means no bound; otherwise at least Pane.
	// Advance is never bounded: it is the caller's own clock.
	MaxAhead time.Duration
}

// Validate reports a configuration error naming the field.
func (c Config) Validate() error {
	switch {
	case c.Pane <= 0:
		return fmt.Errorf("window: Config.Pane = %v, want > 0", c.Pane)
	case c.Size <= 0:
		return fmt.Errorf("window: Config.Size = %v, want > 0", c.Size)
	case c.Size%c.Pane != 0:
		return fmt.Errorf("window: Config.Size = %v is not a multiple of Config.Pane = %v", c.Size, c.Pane)
	case c.Size/c.Pane > MaxPanes:
		return fmt.Errorf("window: Config.Size/Config.Pane = %d panes, want at most %d", c.Size/c.Pane, MaxPanes)
	case c.MaxAhead < 0 || (c.MaxAhead > 0 && c.MaxAhead < c.Pane):
		return fmt.Errorf("window: Config.MaxAhead = %v, want 0 (no bound) or >= Config.Pane = %v", c.MaxAhead, c.Pane)
	}
	return nil
}

// Stats is a snapshot of a window's gauges and counters. Panes fills only
// the counters of the clock (Added, Late, Ahead, Expired).
type Stats struct {
	Keys  int // keys in the dictionary, at most Limits.MaxKeys
	Live  int // keys with a nonzero window count
	Cells int // (key, pane) cells in use, at most Limits.MaxCells

	Added     uint64 // updates accepted
	Late      uint64 // rejected with ErrLate
	Ahead     uint64 // rejected with ErrAhead
	KeysFull  uint64 // rejected with ErrKeysFull
	CellsFull uint64 // rejected with ErrCellsFull
	Overflow  uint64 // rejected with ErrOverflow
	Reclaimed uint64 // columns taken from a zero-count key for a new key
	Expired   uint64 // panes that fell off the window's start
}

// ring is what the clock asks of a window when it moves: close the newest
// pane (it stops taking in-order updates), then empty the expired ones.
type ring interface {
	closeHead(slot int)
	recycle(slot int)
}

// clock maps event times to ring slots and moves the window. Pane indexes
// are compared only through wrapping differences from the newest pane, so
// every int64 time is valid, down to math.MinInt64 with 1 ns panes.
type clock struct {
	width    int64  // pane width, ns
	n        int64  // panes in the window
	maxAhead uint64 // panes one update may move the window; 0: no bound
	head     int64  // index of the newest pane
	from     int64  // the newest pane's first time (clamped to the int64 range)
	span     uint64 // how many times it holds: width, less at the range's ends; 0 before the first update
	slot     int    // ring slot of the newest pane
	stats    Stats
}

// newClock validates cfg and makes the clock of an empty window.
func newClock(cfg Config) (clock, error) {
	if err := cfg.Validate(); err != nil {
		return clock{}, err
	}
	w := int64(cfg.Pane)
	return clock{width: w, n: int64(cfg.Size) / w, maxAhead: uint64(cfg.MaxAhead) / uint64(w)}, nil
}

// inHead is the fast path: t falls in the newest pane. The unsigned
// difference is out of range both before and after the pane; span stops
// at the int64 range's ends so that it does not wrap around them.
func (c *clock) inHead(t int64) bool { return uint64(t)-uint64(c.from) < c.span }

// place returns the ring slot for time t, moving the window forward first
// when t is past the newest pane.
func (c *clock) place(t int64, r ring) (int, error) {
	if c.inHead(t) {
		return c.slot, nil
	}
	p := floorDiv(t, c.width)
	if c.span == 0 || p > c.head {
		if c.span != 0 && c.maxAhead != 0 && uint64(p)-uint64(c.head) > c.maxAhead {
			c.stats.Ahead++
			return 0, ErrAhead
		}
		c.moveTo(p, r)
		return c.slot, nil
	}
	age := uint64(c.head) - uint64(p)
	if age >= uint64(c.n) {
		c.stats.Late++
		return 0, ErrLate
	}
	return c.back(int(age)), nil
}

// advance moves the window so that its newest pane holds t; an older t
// changes nothing.
func (c *clock) advance(t int64, r ring) {
	if p := floorDiv(t, c.width); c.span == 0 || p > c.head {
		c.moveTo(p, r)
	}
}

// moveTo makes pane p (newer than the head, or the first) the newest,
// recycling the slots of the panes that expire: min(p-head, n) of them.
func (c *clock) moveTo(p int64, r ring) {
	if c.span != 0 { // the first move starts on an empty ring
		r.closeHead(c.slot)
		d := uint64(p) - uint64(c.head)
		for i := range min(d, uint64(c.n)) {
			r.recycle(c.ahead(i + 1))
			c.stats.Expired++
		}
		c.slot = c.ahead(d)
	}
	c.head = p
	c.from = math.MinInt64
	if p >= math.MinInt64/c.width {
		c.from = p * c.width
	}
	if p < math.MaxInt64/c.width {
		c.span = uint64((p+1)*c.width) - uint64(c.from)
	} else {
		c.span = uint64(math.MaxInt64) - uint64(c.from) + 1
	}
}

// ahead is the slot d panes after the newest.
func (c *clock) ahead(d uint64) int {
	return int((uint64(c.slot) + d%uint64(c.n)) % uint64(c.n))
}

// back is the slot age panes before the newest, 0 <= age < n.
func (c *clock) back(age int) int {
	s := c.slot - age
	if s < 0 {
		s += int(c.n)
	}
	return s
}

// bounds is [start, end) of the window in ns, each saturated at the int64
// range on its own; ok is false before the first update or Advance.
func (c *clock) bounds() (start, end int64, ok bool) {
	if c.span == 0 {
		return 0, 0, false
	}
	from := c.from
	end = math.MaxInt64
	if c.head < math.MaxInt64/c.width {
		end = (c.head + 1) * c.width // > MinInt64: head >= floor(MinInt64/width)
	}
	start = math.MinInt64
	if back := (c.n - 1) * c.width; from >= math.MinInt64+back {
		start = from - back
	}
	return start, end, true
}

// floorDiv is t/w rounded toward minus infinity, w > 0.
func floorDiv(t, w int64) int64 {
	q := t / w
	if t%w < 0 {
		q--
	}
	return q
}
