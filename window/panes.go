package window

import (
	"errors"
	"fmt"
)

// ErrNoTotal is Total's answer for aggregates that are not Invertible.
var ErrNoTotal = errors.New("window: the aggregate is not Invertible, so there is no running total; use MergeInto")

// Aggregate is what one pane keeps of the updates that fell in it: a
// Count-Min sketch, a HyperLogLog, a Bloom filter, or anything mergeable.
// A is the implementing type itself (usually a pointer), so that Merge
// takes its own kind:
//
//	type hll struct{ ... }
//	func (h *hll) Add(key []byte, _ int64) { h.insert(key) }
//	func (h *hll) Merge(o *hll) error     { return h.union(o) }
//	func (h *hll) Reset()                 { clear(h.registers) }
//
//	w, err := window.NewPanes(cfg, func() *hll { return newHLL(14) })
//
// The window calls only these methods, one at a time.
type Aggregate[A any] interface {
	// Add folds one update in; an aggregate free to ignore value (HLL,
	// Bloom) does so.
	Add(key []byte, value int64)
	// Merge folds another aggregate made by the same constructor in, so that
	// the result summarises both panes' updates.
	Merge(from A) error
	// Reset empties the aggregate for reuse by a later pane.
	Reset()
}

// Invertible is an Aggregate that can also take a merged aggregate back
// out, as linear ones can (Count-Min without conservative update, exact
// counters). For them the window keeps a running total and subtracts each
// pane as it expires.
type Invertible[A any] interface {
	Aggregate[A]
	// Subtract undoes Merge(from).
	Subtract(from A) error
}

// Panes is a sliding window whose panes each hold an Aggregate. It has the
// same clock as Sliding: an update goes into its time's pane, a later time
// moves the window, an earlier one than the window's start is rejected with
// ErrLate.
//
// If the aggregate is Invertible, Add also adds into a running total, an
// expiring pane is subtracted from it, and Total reads it at once. If not
// (HyperLogLog, Bloom: a max or an OR cannot be undone), there is no
// total: the window's value is the merge of its live panes, which MergeInto
// computes in O(panes touched × aggregate size). (A conservative-update
// Count-Min merges with nothing, so it cannot be a pane aggregate at all.)
//
// Not safe for concurrent use.
type Panes[A Aggregate[A]] struct {
	clock
	panes []A
	dirty []bool // pane has had an update since it was last reset
	total A
	inv   Invertible[A] // total, while the aggregate is invertible
	err   error         // why the running total was given up, if it was
}

// NewPanes makes an empty window of aggregates made by fresh, one per pane
// plus the running total: its memory is fixed, (panes + 1) aggregates.
// fresh must return aggregates that merge with one another; NewPanes
// checks it and reports an error if not.
func NewPanes[A Aggregate[A]](cfg Config, fresh func() A) (*Panes[A], error) {
	c, err := newClock(cfg)
	if err != nil {
		return nil, err
	}
	if fresh == nil {
		return nil, errors.New("window: NewPanes: fresh is nil")
	}
	w := &Panes[A]{clock: c, panes: make([]A, c.n), dirty: make([]bool, c.n), total: fresh()}
	inv, _ := any(w.total).(Invertible[A])
	for i := range w.panes {
		w.panes[i] = fresh()
		if err := w.total.Merge(w.panes[i]); err != nil {
			return nil, fmt.Errorf("window: NewPanes: pane %d does not merge with the others: %w", i, err)
		}
		if inv != nil {
			if err := inv.Subtract(w.panes[i]); err != nil {
				return nil, fmt.Errorf("window: NewPanes: pane %d does not subtract from the total: %w", i, err)
			}
		}
	}
	w.inv = inv
	return w, nil
}

// Add folds one update of key with value at event time t into its pane (and
// the running total). It returns nil, ErrLate or ErrAhead, and then changed
// nothing but the window's position.
func (w *Panes[A]) Add(t int64, key []byte, value int64) error {
	s, err := w.place(t, w)
	if err != nil {
		return err
	}
	w.panes[s].Add(key, value)
	w.dirty[s] = true
	if w.inv != nil {
		w.total.Add(key, value)
	}
	w.stats.Added++
	return nil
}

// Advance moves the window so that its newest pane holds t, expiring the
// panes that fall off its start; an older t changes nothing.
func (w *Panes[A]) Advance(t int64) { w.advance(t, w) }

// closeHead does nothing: an invertible aggregate's total takes each
// update as it comes, so that Total needs no merge.
func (w *Panes[A]) closeHead(int) {}

// recycle expires the pane in slot s: out of the total, then emptied. If
// the subtraction fails the total is no longer right, so the window stops
// keeping one and MergeInto merges the live panes instead.
func (w *Panes[A]) recycle(s int) {
	if !w.dirty[s] {
		return
	}
	if w.inv != nil {
		if err := w.inv.Subtract(w.panes[s]); err != nil {
			w.inv = nil
			w.err = fmt.Errorf("window: subtracting an expired pane from the running total: %w", err)
		}
	}
	w.panes[s].Reset()
	w.dirty[s] = false
}

// Total returns the running total of the window in O(1), to read and not
// to modify. The error is ErrNoTotal if the aggregate is not Invertible, or
// says why a subtraction failed and the total was given up; MergeInto works
// in both cases.
func (w *Panes[A]) Total() (A, error) {
	if w.inv == nil {
		var zero A
		if w.err != nil {
			return zero, w.err
		}
		return zero, ErrNoTotal
	}
	return w.total, nil
}

// MergeInto resets dst and merges the window into it: a copy of the running
// total if there is one, else the merge of the live panes, oldest first.
func (w *Panes[A]) MergeInto(dst A) error {
	dst.Reset()
	if w.inv != nil {
		if err := dst.Merge(w.total); err != nil {
			return fmt.Errorf("window: merging the running total: %w", err)
		}
		return nil
	}
	for age := int(w.n) - 1; age >= 0; age-- {
		if s := w.back(age); w.dirty[s] {
			if err := dst.Merge(w.panes[s]); err != nil {
				return fmt.Errorf("window: merging the pane %d panes before the newest: %w", age, err)
			}
		}
	}
	return nil
}

// Any reports whether f holds for one of the live panes that had an
// update, asking the newest first: a membership test over the window (is
// the key in one pane's Bloom filter?) without merging the panes.
func (w *Panes[A]) Any(f func(A) bool) bool {
	for age := range int(w.n) {
		if s := w.back(age); w.dirty[s] && f(w.panes[s]) {
			return true
		}
	}
	return false
}

// Bounds returns the window's span [start, end) in event-time ns, saturated
// at the int64 range; ok is false before the first update or Advance.
func (w *Panes[A]) Bounds() (start, end int64, ok bool) { return w.bounds() }

// Stats returns the clock's counters: Added, Late, Ahead, Expired.
func (w *Panes[A]) Stats() Stats { return w.stats }
