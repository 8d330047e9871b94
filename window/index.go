package window

// cellIndex maps a column to its cell in one pane: open addressing with
// linear probing on a Fibonacci hash of the column, kept at most 3/4 full
// (probes stay within a cache line or two, and the table in L2 longer).
// The newest pane's index is small (its distinct keys, not all keys), so it
// stays in cache where a vector over every key would not.
type cellIndex struct {
	slots []indexSlot // a power of two long, or nil until the first put
	shift uint32      // 32 - log2(len(slots))
	n     int
}

// indexSlot holds a column and its cell's index plus one: 0 marks a free
// slot.
type indexSlot struct{ col, cell uint32 }

// minIndex is the smallest table, in slots.
const minIndex = 64

// find returns col's cell, or where put should record it.
func (x *cellIndex) find(col uint32) (cell, at uint32, ok bool) {
	if x.slots == nil {
		return 0, 0, false
	}
	mask := uint32(len(x.slots) - 1)
	for h := (col * 0x9E3779B1) >> x.shift; ; h = (h + 1) & mask {
		s := x.slots[h]
		if s.cell == 0 {
			return 0, h, false
		}
		if s.col == col {
			return s.cell - 1, h, true
		}
	}
}

// put records col's cell at the slot a failed find returned.
func (x *cellIndex) put(col, cell, at uint32) {
	if x.slots == nil {
		x.resize(minIndex)
		_, at, _ = x.find(col)
	}
	x.slots[at] = indexSlot{col: col, cell: cell + 1}
	if x.n++; 4*x.n > 3*len(x.slots) {
		x.resize(2 * len(x.slots))
	}
}

// resize rehashes into size slots, a power of two.
func (x *cellIndex) resize(size int) {
	old := x.slots
	x.slots = make([]indexSlot, size)
	x.shift = 32
	for s := size; s > 1; s >>= 1 {
		x.shift--
	}
	for _, s := range old {
		if s.cell != 0 {
			_, at, _ := x.find(s.col)
			x.slots[at] = s
		}
	}
}

// reset empties the index for the pane's next use. A table that held less
// than a sixteenth of its size (a burst's) is reallocated smaller, so that
// clearing it does not cost more than the pane's own cells.
func (x *cellIndex) reset() {
	switch {
	case x.n == 0:
	case len(x.slots) > minIndex && 16*x.n < len(x.slots):
		size := minIndex
		for size < 4*x.n {
			size *= 2
		}
		x.slots = nil
		x.resize(size)
	default:
		clear(x.slots)
	}
	x.n = 0
}
