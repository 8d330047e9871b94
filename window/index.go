package window

import "math/bits"

// cellIndex maps a column to its cell in one pane's cells: open addressing
// over groups of 8 slots, each slot with a control byte that is either
// free or 7 bits of the column's hash, and the position of its cell. A
// slot does not hold the column: it is the cell's, read where a control
// byte matches. A probe compares a group's 8 bytes at once and reads a
// cell only where its byte matches, so a column that is not there (most
// updates at many keys: each a new cell) costs one read of the group, and
// no branch on how long the probe was; putting it writes the same group,
// its control word and positions 40 bytes together. The table is kept at
// most 7/8 full: 5 bytes a slot. The newest pane's index is small (its
// distinct keys, not all keys), so it stays in cache where a vector over
// every key would not: 100 000 cells take 640 KB.
type cellIndex struct {
	groups []indexGroup // nil until the first put
	shift  uint8        // 64 - log2(len(groups)): a hash's top bits are its home group
	n      int
}

// indexGroup is 8 slots: control byte k and cell position k for slot
// 8·group+k.
type indexGroup struct {
	ctrl uint64
	cell [8]uint32
}

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

// find returns col's cell in cells, or the slot where put should record
// it.
func (x *cellIndex) find(col uint32, cells []cell) (cell, at uint32, ok bool) {
	if x.groups == nil {
		return 0, 0, false
	}
	mask := uint32(len(x.groups) - 1)
	g, tag := x.hashCol(col)
	for ; ; g = (g + 1) & mask {
		grp := &x.groups[g]
		c := grp.ctrl
		m := c ^ tag*lowBytes // zero bytes where the tag is
		// The high bit of each byte of m that is zero, and maybe of some
		// above one (a borrow): the slots to compare.
		for match := (m - lowBytes) &^ m & freeBytes; match != 0; match &= match - 1 {
			k := uint32(bits.TrailingZeros64(match)) / 8
			if i := grp.cell[k]; cells[i].col == col {
				return i, g*8 + k, true
			}
		}
		// Nothing is ever removed, so a column is never past a group
		// that had a free slot when it was put.
		if free := c & freeBytes; free != 0 {
			return 0, g*8 + uint32(bits.TrailingZeros64(free))/8, false
		}
	}
}

// findOrPut returns col's cell in cells if it has one, else records cell
// (the position the caller appends it at next) as col's and returns it
// with false: find and put in one probe.
func (x *cellIndex) findOrPut(col, cell uint32, cells []cell) (uint32, bool) {
	if x.full() {
		x.grow(cells)
	}
	mask := uint32(len(x.groups) - 1)
	g, tag := x.hashCol(col)
	for ; ; g = (g + 1) & mask {
		grp := &x.groups[g]
		c := grp.ctrl
		m := c ^ tag*lowBytes
		for match := (m - lowBytes) &^ m & freeBytes; match != 0; match &= match - 1 {
			if i := grp.cell[bits.TrailingZeros64(match)/8]; cells[i].col == col {
				return i, true
			}
		}
		if free := c & freeBytes; free != 0 {
			k := uint32(bits.TrailingZeros64(free)) &^ 7
			grp.ctrl = c&^(0xFF<<k) | tag<<k
			grp.cell[k/8] = cell
			x.n++
			return cell, false
		}
	}
}

// full reports whether one more entry would make the table more than 7/8
// full (or it has no table yet).
func (x *cellIndex) full() bool { return x.n+1 > 7*len(x.groups) }

// grow makes room for one more entry: a first table, or twice the size.
// cells are the cells the entries point into.
func (x *cellIndex) grow(cells []cell) {
	if x.groups == nil {
		x.resize(minIndex, cells)
	} else {
		x.resize(2*8*len(x.groups), cells)
	}
}

// put records col's cell at the slot a failed find returned; cells are
// the cells the entries point into, without the new one yet.
func (x *cellIndex) put(col, cell, at uint32, cells []cell) {
	if x.full() {
		x.grow(cells)
		_, at, _ = x.find(col, cells)
	}
	x.set(col, cell, at)
	x.n++
}

// set fills the free slot at.
func (x *cellIndex) set(col, cell, at uint32) {
	_, tag := x.hashCol(col)
	shift := at % 8 * 8
	grp := &x.groups[at/8]
	grp.ctrl = grp.ctrl&^(0xFF<<shift) | tag<<shift
	grp.cell[at%8] = cell
}

// resize rehashes into size slots, a power of two, at least minIndex;
// cells are the cells the entries point into.
func (x *cellIndex) resize(size int, cells []cell) {
	old := x.groups
	x.groups = make([]indexGroup, size/8)
	for i := range x.groups {
		x.groups[i].ctrl = freeBytes
	}
	x.shift = uint8(64 - bits.TrailingZeros(uint(size/8)))
	mask := uint32(len(x.groups) - 1)
	for _, og := range old {
		for full := ^og.ctrl & freeBytes; full != 0; full &= full - 1 {
			i := og.cell[bits.TrailingZeros64(full)/8]
			col := cells[i].col
			g, _ := x.hashCol(col)
			for x.groups[g].ctrl&freeBytes == 0 { // distinct columns: the first free slot
				g = (g + 1) & mask
			}
			x.set(col, i, g*8+uint32(bits.TrailingZeros64(x.groups[g].ctrl&freeBytes))/8)
		}
	}
}

// reset empties the index for the pane's next use. A table that held less
// than a sixteenth of its size (a burst's) is reallocated smaller, so that
// clearing it does not cost more than the pane's own cells; one that held
// nothing (a newest pane nobody read) is let go.
func (x *cellIndex) reset() {
	switch {
	case x.n == 0:
		if 8*len(x.groups) > minIndex {
			x.groups = nil
		}
	case 8*len(x.groups) > minIndex && 16*x.n < 8*len(x.groups):
		size := minIndex
		for size < 4*x.n {
			size *= 2
		}
		x.groups = nil
		x.resize(size, nil)
	default:
		for i := range x.groups {
			x.groups[i].ctrl = freeBytes
		}
	}
	x.n = 0
}
