package window

import (
	"fmt"
	"math"
)

// Cell is one key's updates in one pane, as Export gives them and Import
// takes them: Pane is the pane's first time, unix ns.
type Cell struct {
	Pane int64
	Key  string
	Value
}

// Export calls f with every nonzero (pane, key) cell of the window, oldest
// pane first, until f returns false: with Import into an empty window of
// the same Config, the state of w as reads see it (a moving counter task
// hands its window over so). A key may come more than once for one pane
// (its in-order updates, its late ones, and repeats kept apart).
func (w *Sliding) Export(f func(Cell) bool) {
	if w.clock.span == 0 {
		return
	}
	for age := int(w.clock.n) - 1; age >= 0; age-- {
		p := w.clock.head - int64(age)
		t := int64(math.MinInt64)
		if p >= math.MinInt64/w.clock.width {
			t = p * w.clock.width
		}
		if !w.exportPane(age, t, f) {
			return
		}
	}
}

// exportPane calls f with the nonzero cells of the pane age panes before
// the newest, whose first time is t, until f returns false, and reports
// whether f never did.
func (w *Sliding) exportPane(age int, t int64, f func(Cell) bool) bool {
	give := func(e cell) bool {
		if e.count == 0 {
			return true
		}
		k, _ := w.Key(e.col)
		return f(Cell{Pane: t, Key: k, Value: Value{Count: uint64(e.count), Sum: e.sum}})
	}
	if age == 0 {
		w.settle()
		for _, e := range w.headCells {
			if !give(e) {
				return false
			}
		}
		return true
	}
	p := &w.panes[w.clock.back(age)]
	for _, x := range p.packed {
		if !give(unpackCell(x)) {
			return false
		}
	}
	for _, e := range p.cells {
		if !give(e) {
			return false
		}
	}
	return true
}

// Import adds c's updates to the window, as if its Count updates summing
// to its Sum had come at time c.Pane; it moves the window as Add does, and
// refuses what Add would (ErrLate, ErrAhead, ErrKeysFull, ErrCellsFull,
// ErrOverflow), counting nothing then.
func (w *Sliding) Import(c Cell) error {
	if c.Count == 0 {
		return nil
	}
	if c.Count > math.MaxUint32 {
		w.stats.Overflow++
		return ErrOverflow
	}
	s, err := w.place(c.Pane, w)
	if err != nil {
		return err
	}
	col, err := w.Column([]byte(c.Key))
	if err != nil {
		return err
	}
	cells, index := &w.panes[s].cells, &w.panes[s].late
	if s == w.clock.slot {
		w.settle()
		cells, index = &w.headCells, &w.head
	}
	i, at, ok := index.find(col, *cells)
	switch {
	case ok && uint64((*cells)[i].count)+c.Count > math.MaxUint32:
		w.stats.Overflow++
		return ErrOverflow
	case ok:
		(*cells)[i].count += uint32(c.Count)
		(*cells)[i].sum += c.Sum
	case w.cellCount >= w.maxCells:
		w.stats.CellsFull++
		return ErrCellsFull
	case s == w.clock.slot:
		index.put(col, uint32(len(*cells)), at, *cells)
		w.putHead(cell{col: col, count: uint32(c.Count), sum: c.Sum})
	default:
		index.put(col, uint32(len(*cells)), at, *cells)
		*cells = append(*cells, cell{col: col, count: uint32(c.Count), sum: c.Sum})
		w.cellCount++
	}
	if s != w.clock.slot { // a closed pane: its updates are in the total too
		w.fold(col, uint32(c.Count), c.Sum)
	}
	w.stats.Added += c.Count
	return nil
}

// Export calls f with every id remembered, and the first time of its pane,
// until f returns false: Claim of each into an empty Seen of the same pane
// width makes the same Seen.
func (s *Seen) Export(f func(t int64, id uint64) bool) {
	for _, sl := range s.slots {
		if sl.id == 0 || sl.pane < s.from {
			continue
		}
		t := int64(math.MinInt64)
		if sl.pane >= math.MinInt64/s.pane {
			t = sl.pane * s.pane
		}
		if !f(t, sl.id) {
			return
		}
	}
}

// Export calls f with every pane that has had an update since it was
// last emptied, oldest first, and its first time, until f returns false:
// Import of each into an empty Panes of the same Config makes the same
// window. f must not keep or change the aggregate.
func (w *Panes[A]) Export(f func(pane int64, a A) bool) {
	if w.clock.span == 0 {
		return
	}
	for age := int(w.clock.n) - 1; age >= 0; age-- {
		s := w.clock.back(age)
		if !w.dirty[s] {
			continue
		}
		p := w.clock.head - int64(age)
		t := int64(math.MinInt64)
		if p >= math.MinInt64/w.clock.width {
			t = p * w.clock.width
		}
		if !f(t, w.panes[s]) {
			return
		}
	}
}

// Import merges a into the pane of time t (and the running total), moving
// the window as Add does; ErrLate, ErrAhead or a's Merge error, and then
// it changed nothing but the window's position.
func (w *Panes[A]) Import(t int64, a A) error {
	s, err := w.place(t, w)
	if err != nil {
		return err
	}
	if err := w.panes[s].Merge(a); err != nil {
		return err
	}
	w.dirty[s] = true
	if w.inv != nil {
		if err := w.total.Merge(a); err != nil {
			w.inv = nil
			w.err = fmt.Errorf("window: merging an imported pane into the running total: %w", err)
		}
	}
	return nil
}
