package window

import (
	"cmp"
	"slices"
)

// model is the window by brute force: every accepted update kept in a
// list, the window's contents recomputed from it on every read. It shares
// no code with the package: its pane index is its own floor division, its
// window is a filter on the list.
type model struct {
	width, n int64
	maxAhead int64 // panes, 0: no bound
	maxKeys  int
	maxCells int

	started bool
	head    int64
	events  []event
	dict    map[string]bool // the dictionary while it is not full
	stats   Stats
}

type event struct {
	t     int64
	key   string
	value int64
	late  bool // counted in a late cell: its pane was no longer the newest
}

func newModel(cfg Config, lim Limits, n int64) *model {
	m := &model{
		width:    int64(cfg.Pane),
		n:        n,
		maxAhead: int64(cfg.MaxAhead / cfg.Pane),
		maxKeys:  lim.MaxKeys,
		maxCells: lim.MaxCells,
		dict:     map[string]bool{},
	}
	if m.maxCells == 0 {
		m.maxCells = m.maxKeys * int(n)
	}
	return m
}

func (m *model) pane(t int64) int64 {
	q := t / m.width
	if q*m.width > t {
		q--
	}
	return q
}

func (m *model) inWindow(t int64) bool { return m.started && m.pane(t) > m.head-m.n }

// move is the clock: it returns the error the window must give for time
// t, or nil and the window moved there.
func (m *model) move(t int64) error {
	p := m.pane(t)
	if !m.started {
		m.started, m.head = true, p
		return nil
	}
	if p > m.head {
		if m.maxAhead > 0 && p-m.head > m.maxAhead {
			m.stats.Ahead++
			return ErrAhead
		}
		m.stats.Expired += uint64(min(p-m.head, m.n))
		m.head = p
		m.prune()
		return nil
	}
	if p <= m.head-m.n {
		m.stats.Late++
		return ErrLate
	}
	return nil
}

func (m *model) advance(t int64) {
	if p := m.pane(t); !m.started || p > m.head {
		if m.started {
			m.stats.Expired += uint64(min(p-m.head, m.n))
		}
		m.started, m.head = true, p
		m.prune()
	}
}

// prune drops what fell off the window: the window never moves back.
func (m *model) prune() {
	m.events = slices.DeleteFunc(m.events, func(e event) bool { return !m.inWindow(e.t) })
}

// value is key's window aggregate.
func (m *model) value(key string) Value {
	var v Value
	for _, e := range m.events {
		if e.key == key && m.inWindow(e.t) {
			v.Count++
			v.Sum += e.value
		}
	}
	return v
}

func (m *model) live() map[string]Value {
	vs := map[string]Value{}
	for _, e := range m.events {
		if m.inWindow(e.t) {
			v := vs[e.key]
			v.Count++
			v.Sum += e.value
			vs[e.key] = v
		}
	}
	return vs
}

// cells counts the live cells: one per (key, pane) for the updates that
// came while that pane was the newest, one more for those that came after.
func (m *model) cells() int {
	type cellID struct {
		key  string
		pane int64
		late bool
	}
	set := map[cellID]bool{}
	for _, e := range m.events {
		if m.inWindow(e.t) {
			set[cellID{e.key, m.pane(e.t), e.late}] = true
		}
	}
	return len(set)
}

// intern is the dictionary's verdict on key. Which zero-count key loses its
// column is not modelled: whether a key is admitted does not depend on it.
// A key with a nonzero count has a column; otherwise it gets one unless
// every column is held by a key with a nonzero count.
func (m *model) intern(key string) error {
	if len(m.dict) < m.maxKeys {
		m.dict[key] = true
		return nil
	}
	if m.value(key).Count > 0 || len(m.live()) < m.maxKeys {
		return nil
	}
	m.stats.KeysFull++
	return ErrKeysFull
}

func (m *model) add(t int64, key string, value int64) error {
	return m.addCount(t, key, 1, value)
}

// addCount adds cnt updates of key at t into one cell, the first with sum,
// the others with 0: an Add, or an Import of a cell.
func (m *model) addCount(t int64, key string, cnt uint64, sum int64) error {
	if err := m.move(t); err != nil {
		return err
	}
	if err := m.intern(key); err != nil {
		return err
	}
	p := m.pane(t)
	late := p != m.head
	hasCell := false
	for _, e := range m.events {
		if e.key == key && e.late == late && m.inWindow(e.t) && m.pane(e.t) == p {
			hasCell = true
			break
		}
	}
	if !hasCell && m.cells() >= m.maxCells {
		m.stats.CellsFull++
		return ErrCellsFull
	}
	for i := range cnt {
		v := int64(0)
		if i == 0 {
			v = sum
		}
		m.events = append(m.events, event{t, key, v, late})
	}
	m.stats.Added += cnt
	return nil
}

func (m *model) topK(k int, by Order) []Entry {
	var all []Entry
	for key, v := range m.live() {
		all = append(all, Entry{Key: key, Value: v})
	}
	slices.SortFunc(all, func(a, b Entry) int {
		if by == BySum && a.Sum != b.Sum {
			return -cmp.Compare(a.Sum, b.Sum)
		}
		if by == ByCount && a.Count != b.Count {
			return -cmp.Compare(a.Count, b.Count)
		}
		return cmp.Compare(a.Key, b.Key)
	})
	return all[:min(k, len(all))]
}

func (m *model) wantStats() Stats {
	s := m.stats
	s.Keys = min(len(m.dict), m.maxKeys)
	s.Live = len(m.live())
	s.Cells = m.cells()
	return s
}
