package window

import "math/bits"

// cellIndex maps a column to its cell in one pane: open addressing over
// groups of 8 slots, each slot with a control byte that is either free or
// 7 bits of the column's hash, the 8 bytes of a group in one word kept
// apart from the slots. A probe compares a group's 8 bytes at once and
// reads a slot only where its byte matches, so a column that is not there
// (most updates at many keys: each a new cell) costs one read of a word
// that is likely in L1, and no branch on how long the probe was. The table
// is kept at most 3/4 full. The newest pane's index is small (its distinct
// keys, not all keys), so it stays in cache where a vector over every key
// would not.
type cellIndex struct {
	ctrl  []uint64    // a group's control bytes, byte k for slot 8·group+k; nil until the first put
	slots []indexSlot // 8 per group
	shift uint8       // 64 - log2(len(ctrl)): a hash's top bits are its home group
	n     int
}

// indexSlot holds a column and its cell's index.
type indexSlot struct{ col, cell uint32 }

const (
	minIndex  = 64                 // the smallest table, in slots
	freeBytes = 0x8080808080808080 // a group of free control bytes
	lowBytes  = 0x0101010101010101
)

// hashCol spreads col over 64 bits: the top bits pick the home group, the
// 7 bits below them are its control byte.
func (x *cellIndex) hashCol(col uint32) (group uint32, tag uint64) {
	h := uint64(col) * 0x9E3779B97F4A7C15
	return uint32(h >> x.shift), h >> (x.shift - 7) & 0x7F
}

// find returns col's cell, or the slot where put should record it.
func (x *cellIndex) find(col uint32) (cell, at uint32, ok bool) {
	if x.ctrl == nil {
		return 0, 0, false
	}
	mask := uint32(len(x.ctrl) - 1)
	g, tag := x.hashCol(col)
	for ; ; g = (g + 1) & mask {
		c := x.ctrl[g]
		m := c ^ tag*lowBytes // zero bytes where the tag is
		// The high bit of each byte of m that is zero, and maybe of some
		// above one (a borrow): the slots to compare.
		for match := (m - lowBytes) &^ m & freeBytes; match != 0; match &= match - 1 {
			i := g*8 + uint32(bits.TrailingZeros64(match))/8
			if s := x.slots[i]; s.col == col {
				return s.cell, i, true
			}
		}
		// Nothing is ever removed, so a column is never past a group
		// that had a free slot when it was put.
		if free := c & freeBytes; free != 0 {
			return 0, g*8 + uint32(bits.TrailingZeros64(free))/8, false
		}
	}
}

// findOrPut returns col's cell if it has one, else records cell as col's
// and returns it with false: find and put in one probe.
func (x *cellIndex) findOrPut(col, cell uint32) (uint32, bool) {
	if x.ctrl == nil {
		x.resize(minIndex)
	}
	mask := uint32(len(x.ctrl) - 1)
	g, tag := x.hashCol(col)
	for ; ; g = (g + 1) & mask {
		c := x.ctrl[g]
		m := c ^ tag*lowBytes
		for match := (m - lowBytes) &^ m & freeBytes; match != 0; match &= match - 1 {
			if s := x.slots[g*8+uint32(bits.TrailingZeros64(match))/8]; s.col == col {
				return s.cell, true
			}
		}
		if free := c & freeBytes; free != 0 {
			k := uint32(bits.TrailingZeros64(free)) &^ 7
			x.ctrl[g] = c&^(0xFF<<k) | tag<<k
			x.slots[g*8+k/8] = indexSlot{col: col, cell: cell}
			if x.n++; 4*x.n > 3*len(x.slots) {
				x.resize(2 * len(x.slots))
			}
			return cell, false
		}
	}
}

// put records col's cell at the slot a failed find returned.
func (x *cellIndex) put(col, cell, at uint32) {
	if x.ctrl == nil {
		x.resize(minIndex)
		_, at, _ = x.find(col)
	}
	x.set(col, cell, at)
	if x.n++; 4*x.n > 3*len(x.slots) {
		x.resize(2 * len(x.slots))
	}
}

// set fills the free slot at.
func (x *cellIndex) set(col, cell, at uint32) {
	_, tag := x.hashCol(col)
	shift := at % 8 * 8
	g := &x.ctrl[at/8]
	*g = *g&^(0xFF<<shift) | tag<<shift
	x.slots[at] = indexSlot{col: col, cell: cell}
}

// resize rehashes into size slots, a power of two, at least minIndex.
func (x *cellIndex) resize(size int) {
	oldCtrl, oldSlots := x.ctrl, x.slots
	x.ctrl, x.slots = make([]uint64, size/8), make([]indexSlot, size)
	for i := range x.ctrl {
		x.ctrl[i] = freeBytes
	}
	x.shift = uint8(64 - bits.TrailingZeros(uint(size/8)))
	for g, c := range oldCtrl {
		for full := ^c & freeBytes; full != 0; full &= full - 1 {
			s := oldSlots[g*8+bits.TrailingZeros64(full)/8]
			_, at, _ := x.find(s.col)
			x.set(s.col, s.cell, at)
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
		x.ctrl, x.slots = nil, nil // the entries go with them
		x.resize(size)
	default:
		for i := range x.ctrl {
			x.ctrl[i] = freeBytes
		}
	}
	x.n = 0
}
