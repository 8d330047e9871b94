package window

import (
	"fmt"
	"math"
	"unsafe"
)

// MaxKeys is the largest Limits.MaxKeys: columns are uint32, and so are
// the positions of a pane's cells, up to two per key.
const MaxKeys = 1<<31 - 1

// Limits bound the memory of a Sliding window.
type Limits struct {
	// MaxKeys bounds the dictionary: at most this many keys hold a column.
	// When it is full, a new key takes the column of a key whose window
	// count is zero, or is rejected with ErrKeysFull. 1..MaxKeys.
	MaxKeys int
	// MaxCells bounds the (key, pane) cells of all panes together, each 8
	// or 16 bytes: a new cell beyond it is rejected with ErrCellsFull. 0 means
	// MaxKeys × panes, the size of the paper's dense matrix. A late update
	// takes a second cell for its (key, pane) (the in-order updates' cell
	// was folded into the total when the pane closed), so with every key in
	// every pane a late update is refused at that default: give more room
	// where late updates must not be. The repeats of keys in a pane that
	// closed unread with few of them (at most 32, or a quarter of its
	// cells; a few per cent at many keys) are kept as cells of their own,
	// which this bound does not count.
	MaxCells int
}

// Validate reports a limit error naming the field.
func (l Limits) Validate() error {
	if l.MaxKeys < 1 || l.MaxKeys > MaxKeys {
		return fmt.Errorf("window: Limits.MaxKeys = %d, want 1..%d", l.MaxKeys, MaxKeys)
	}
	if l.MaxCells < 0 {
		return fmt.Errorf("window: Limits.MaxCells = %d, want >= 0 (0: MaxKeys × panes)", l.MaxCells)
	}
	return nil
}

// Value is a key's aggregate over the window.
type Value struct {
	Count uint64 `json:"count"` // updates
	Sum   int64  `json:"sum"`   // sum of their values, exact modulo 2^64
}

// Entry is a key and its window value, as TopK returns them.
type Entry struct {
	Key string `json:"key"`
	Value
}

// Order is what TopK ranks by.
type Order uint8

const (
	// ByCount ranks by the number of updates in the window.
	ByCount Order = iota
	// BySum ranks by the sum of their values.
	BySum
)

// total is a column's entry in the total vector: its count and sum over
// the closed panes of the window (all but the newest).
type total struct {
	count uint64
	sum   int64
}

// cell is one nonzero element of a pane's row of the matrix: 16 bytes.
type cell struct {
	col   uint32
	count uint32
	sum   int64
}

// pane is one closed slot of the ring: the cells its updates touched.
// While it was the newest its cells were the window's head cells; when it
// closed they were folded into the totals and kept here, each packed into
// 8 bytes (packCell) where it fits and in full in cells where it does not.
// The packed form halves the bytes an hour-old pane streams back from
// memory when it expires, and what it holds meanwhile.
type pane struct {
	packed []uint64 // the in-order cells that fit in 8 bytes
	// cells holds the in-order cells that did not fit, then the late ones:
	// late finds a column's cell made after the pane was closed (updates
	// while it was the newest found theirs through the window's head index,
	// emptied at the close). So a (key, pane) pair has one cell for the
	// updates that came in order, one for the late ones, and one for each
	// of its repeats that waited aside until the pane closed (closeHead).
	cells []cell
	late  cellIndex
	// repeats is how many of the cells are such repeats: Stats.Cells and
	// Limits.MaxCells count (key, pane) cells, not them.
	repeats int
}

// Packed cells: the column in the low 32 bits, the count in the next 8
// (1..255), the sum in the top 24 (two's complement). Counts of 1 and
// small sums, which most cells have, fit.
const (
	packCountBits = 8
	packSumBits   = 64 - 32 - packCountBits
	packMaxCount  = 1<<packCountBits - 1
	packMinSum    = -1 << (packSumBits - 1)
	packMaxSum    = 1<<(packSumBits-1) - 1
)

// packCell returns e packed into 8 bytes, or false if its count or sum
// does not fit.
func packCell(e cell) (uint64, bool) {
	if e.count > packMaxCount || e.sum < packMinSum || e.sum > packMaxSum {
		return 0, false
	}
	return uint64(e.col) | uint64(e.count)<<32 | uint64(e.sum)<<(32+packCountBits), true
}

// unpackCell is packCell's inverse.
func unpackCell(x uint64) cell {
	return cell{col: uint32(x), count: uint32(x>>32) & packMaxCount, sum: int64(x) >> (32 + packCountBits)}
}

// Sliding is an exact sliding window of per-key counts and sums: the
// paper's matrix of vectors, one column per key and one row per pane.
//
// An in-order update touches only the newest pane: a mark per column
// (a bit) tells whether the pane, until it is indexed, has made the
// column's cell; if not, the cell is appended, and if so the update waits
// aside until the pane is read, repeats much, or closes (addHead). A pane
// that is read or repeats much is indexed from then on: a small hash index from column to cell
// over the keys that pane has seen (it stays in cache at a million keys,
// where a vector over every key would not). When the window moves on, the
// newest pane is folded into the total vector in one pass, which also
// packs its cells, and the panes that expire are subtracted from it in
// another. Each cell is folded and subtracted once, so that work is
// O(cells) per pane, not O(keys), and amortized O(1) per update whatever
// the number of panes. A late update goes to its own older pane (through
// that pane's late index) and straight into the total. A read is the
// key's total plus its cell in the newest pane: O(1), amortized over the
// updates since the pane was last read.
//
// Costs: Add is a dictionary lookup plus AddIndex (whose newest-pane
// lookup the dictionary's hint usually spares); Get is O(1), amortized;
// TopK is O(keys + live·log k); Stats is O(cells in the newest pane).
// Memory: about 20 bytes per column (its total, its reclaim bookkeeping,
// its head marks) plus the dictionary (the key's bytes, its string header,
// a 32-byte slot, at most 3/4 full, that also holds a key of up to 20
// bytes); 8 bytes per cell of a closed pane whose count is below 256 and
// whose sum fits in 24 bits (packCell), 16 bytes per other cell; the
// newest pane's index, 5 bytes a slot, at most 7/8 full, and the updates
// waiting aside, 16 bytes each, at most a quarter of its cells or
// minDups; and the buffers' spare capacity: a buffer emptied holding less
// than a quarter of its capacity, beyond 1024 elements, is given back.
//
// Not safe for concurrent use.
type Sliding struct {
	clock
	dict       dict    // key → column → key
	totals     []total // the total vector, over the closed panes
	panes      []pane
	headCells  []cell    // the newest pane's cells, in the order first touched
	warm       []uint32  // Warm's slots, kept for the next batch
	warmSink   uint32    // Warm's loads, kept so that they are not left out
	headDups   []cell    // updates of columns with a head cell, not yet in it
	headMark   []uint64  // bit per column: has a head cell (one of headCells[:marked] once indexed)
	marked     int       // the head cells made before the pane was indexed
	head       cellIndex // column → cell in headCells[:indexed]
	indexed    int
	indexing   bool     // settled: every head cell is indexed, headDups is empty
	headAdded  uint64   // the newest pane's count while not indexing: no cell is above it
	idle       []uint32 // columns that had a zero count when pushed: reclaim candidates
	idleMark   []uint64 // bit per column: in idle
	maxKeys    int
	maxCells   int
	liveClosed int // columns with a nonzero total
	cellCount  int
	zeros      []uint32 // recycle's columns of a chunk whose total fell to zero
	touched    uint64   // what the passes' reads ahead loaded, kept so that they stay
}

// touchCells is how many cells the passes over the totals (closeHead's
// fold, recycle's expiry) read ahead at a time. A chunk's total lines are
// first loaded in a loop that does nothing else (touchHead, touchPacked),
// so that many of them miss at once (a loop that also adds and stores has
// fewer of its misses in flight), and while they sit in L1 the chunk is
// folded or expired: 512 cells' lines are 32 KB. At 1M keys reading ahead
// made the two passes about twice as fast; each loop in a function of its
// own, in registers, took another 13 % off an update (the closeHead loops
// had kept their sum and cursor on the stack), and 512 instead of 1024
// cells about 4 %.
const touchCells = 512

// New makes an empty exact window, or reports what is wrong with cfg or lim.
func New(cfg Config, lim Limits) (*Sliding, error) {
	c, err := newClock(cfg)
	if err != nil {
		return nil, err
	}
	if err := lim.Validate(); err != nil {
		return nil, err
	}
	maxCells := lim.MaxCells
	if maxCells == 0 {
		maxCells = lim.MaxKeys * int(c.n)
		if maxCells/int(c.n) != lim.MaxKeys { // overflowed int
			maxCells = math.MaxInt
		}
	}
	return &Sliding{
		clock:    c,
		dict:     newDict(),
		panes:    make([]pane, c.n),
		maxKeys:  lim.MaxKeys,
		maxCells: maxCells,
	}, nil
}

// Add counts one update of key with value at event time t: the key's count
// in t's pane and in the window goes up by one and its sum by value. A new
// key is copied into the dictionary; a known key costs no allocation. It
// returns nil or one of ErrLate, ErrAhead, ErrKeysFull, ErrCellsFull,
// ErrOverflow, and then counted nothing: a time past the newest pane moves
// the window even if the update is then refused, and a new key refused
// with ErrCellsFull keeps the column it was given (maybe reclaimed from a
// key whose window count was zero).
func (w *Sliding) Add(t int64, key []byte, value int64) error {
	s, err := w.place(t, w)
	if err != nil {
		return err
	}
	h := w.dict.hash(key)
	at, ok := w.dict.find(key, h)
	if !ok {
		col, err := w.intern(key, h, at)
		if err != nil {
			return err
		}
		return w.addAt(s, col, value)
	}
	e := &w.dict.slots[at]
	col := e.col - 1
	if s != w.clock.slot {
		return w.addLate(s, col, value)
	}
	// The hint path leaves the pane unsettled, so it keeps headAdded below
	// 2^32-1 as addHead does: a repeat waiting aside is added to this cell
	// when the pane settles.
	if cells := w.headCells; e.hint < uint32(len(cells)) && cells[e.hint].col == col && (w.indexing || w.headAdded < math.MaxUint32) {
		if err := w.bump(&cells[e.hint], value); err != nil { // a column has one cell in the newest pane
			return err
		}
		w.headAdded++
		return nil
	}
	i, err := w.addHead(col, value)
	e.hint = i
	return err
}

// AddString is Add for a key held as a string, without copying it into a
// byte slice first (Add only reads its key; the dictionary keeps copies).
func (w *Sliding) AddString(t int64, key string, value int64) error {
	return w.Add(t, unsafe.Slice(unsafe.StringData(key), len(key)), value)
}

// Warm loads what Add will read for each of keys: the key's dictionary
// slot, then the newest pane's cell its slot points at. A batch's keys
// warmed together miss the cache at once, where Add, one key after
// another, would wait for each miss in turn. It changes nothing.
func (w *Sliding) Warm(keys []string) {
	d := &w.dict
	if d.slots == nil {
		return
	}
	at, sink := w.warm[:0], uint32(0)
	for _, k := range keys { // hashing apart: the loads below go in a loop that does nothing else
		at = append(at, uint32(d.hash(unsafe.Slice(unsafe.StringData(k), len(k)))>>d.shift))
	}
	for _, i := range at {
		sink += d.slots[i].col
	}
	cells := w.headCells
	for _, i := range at {
		if h := d.slots[i].hint; h < uint32(len(cells)) {
			sink += cells[h].col
		}
	}
	w.warm, w.warmSink = at, w.warmSink+sink
}

// AddIndex is Add for a caller that holds the key's column (from Column),
// without the dictionary lookup. It returns ErrColumn for a column the
// dictionary never gave out.
func (w *Sliding) AddIndex(t int64, col uint32, value int64) error {
	if uint64(col) >= uint64(len(w.totals)) {
		return ErrColumn
	}
	if !w.inHead(t) || w.cellCount >= w.maxCells {
		s, err := w.place(t, w)
		if err != nil {
			return err
		}
		return w.addAt(s, col, value)
	}
	// addHead's fast paths, spelled out: it does not inline.
	if w.indexing {
		n := uint32(len(w.headCells))
		if i, ok := w.head.findOrPut(col, n, w.headCells); ok {
			return w.bump(&w.headCells[i], value)
		}
		w.headCells = append(w.headCells, cell{col: col, count: 1, sum: value})
		w.indexed = len(w.headCells)
		w.cellCount++
		w.stats.Added++
		return nil
	}
	if w.headAdded < math.MaxUint32 {
		wd, b := &w.headMark[col/64], uint64(1)<<(col%64)
		w.headAdded++
		w.stats.Added++
		if *wd&b == 0 {
			*wd |= b
			w.headCells = append(w.headCells, cell{col: col, count: 1, sum: value})
			w.cellCount++
			return nil
		}
		w.headDups = append(w.headDups, cell{col: col, count: 1, sum: value})
		if len(w.headDups) > max(minDups, len(w.headCells)/4) {
			w.settle()
		}
		return nil
	}
	_, err := w.addHead(col, value)
	return err
}

// addAt puts an update of col into the pane in slot s.
func (w *Sliding) addAt(s int, col uint32, value int64) error {
	if s == w.clock.slot {
		_, err := w.addHead(col, value)
		return err
	}
	return w.addLate(s, col, value)
}

// addHead puts an update of col into the newest pane. It touches the
// pane's cells and a word of the head marks, which stay in cache while
// the pane's distinct keys are few, and not the total vector: at a million
// keys a random line of it is a cache miss, which here, one update after
// another, stalls the caller, where closeHead's and recycle's tight loops
// overlap their misses. (The newest pane's count and sum kept in the
// column's total line, one line per update and three passes over random
// lines per cell instead of two, measured 1.5–3 times slower at 1M keys,
// uniform or Zipf, and the total vector twice the size.)
//
// A column's first update in the pane makes its cell; a later one, found
// by the column's mark, is kept in headDups and becomes a cell of its own
// when the pane closes; or it is added to the column's cell when
// something reads the pane or headDups outgrows a quarter of the cells
// (settle), after which the pane is indexed and its updates find or make
// their cells through the index (its new cells are not marked: the index
// finds them). So the index is built only for a pane that is read or
// repeats much: at many keys most updates are a new cell each, and cost a
// read and write of a word of the marks (128 KB at 1M keys) instead of a
// probe of the index (in one run, with 1M uniform keys, 4 ns an update
// less at 1 s panes and 9 at 10 s). An update
// kept aside cannot be refused with ErrOverflow when it is added, so they
// are kept only while the pane has taken fewer than 2^32-1 updates: none
// of its cells can reach 2^32-1 before. It returns the index of col's
// cell, or past the cells when it made none or does not know it; the
// full cells (MaxCells) are handled settled, through the index.
func (w *Sliding) addHead(col uint32, value int64) (uint32, error) {
	n := uint32(len(w.headCells))
	if !w.indexing && w.cellCount < w.maxCells && w.headAdded < math.MaxUint32 {
		wd, b := &w.headMark[col/64], uint64(1)<<(col%64)
		w.headAdded++
		w.stats.Added++
		if *wd&b == 0 {
			*wd |= b
			w.headCells = append(w.headCells, cell{col: col, count: 1, sum: value})
			w.cellCount++
			return n, nil
		}
		w.headDups = append(w.headDups, cell{col: col, count: 1, sum: value})
		if len(w.headDups) > max(minDups, len(w.headCells)/4) {
			w.settle()
		}
		return n, nil
	}
	w.settle()
	if w.cellCount < w.maxCells {
		if i, ok := w.head.findOrPut(col, n, w.headCells); ok {
			return i, w.bump(&w.headCells[i], value)
		}
		w.putHead(cell{col: col, count: 1, sum: value})
		w.stats.Added++
		return n, nil
	}
	if i, _, ok := w.head.find(col, w.headCells); ok {
		return i, w.bump(&w.headCells[i], value)
	}
	w.stats.CellsFull++
	return n, ErrCellsFull
}

// minDups is how many updates headDups holds at least before settle adds
// them to their cells; a quarter of the cells if that is more. Uniform
// keys repeat a few per cent of a pane's updates at 1M keys and never
// reach it; Zipf keys reach it within the first hundred updates, and are
// indexed from then on (256 here cost Zipf keys 14 % more time).
const minDups = 32

// putHead appends a new cell to the newest pane, settled; findOrPut has
// just indexed it.
func (w *Sliding) putHead(e cell) {
	w.headCells = append(w.headCells, e)
	w.indexed = len(w.headCells)
	w.cellCount++
}

// settle makes the newest pane readable through its index: its cells are
// indexed and headDups are added to them. The pane stays so until it
// closes (indexing): its updates then find or make their cells through
// the index, as a pane that is read or has many repeated columns is
// better served. It costs O(what it adds).
func (w *Sliding) settle() {
	if w.indexing {
		return
	}
	w.indexing = true
	w.marked = len(w.headCells) // the index finds the cells made from now on
	for i := w.indexed; i < len(w.headCells); i++ {
		w.head.findOrPut(w.headCells[i].col, uint32(i), w.headCells)
	}
	w.indexed = len(w.headCells)
	for _, d := range w.headDups {
		i, _, _ := w.head.find(d.col, w.headCells)
		e := &w.headCells[i]
		e.count += d.count // below 2^32: the pane has taken fewer updates
		e.sum += d.sum
	}
	w.headDups = w.headDups[:0]
}

// addLate puts an update of col into the closed pane in slot s, and into
// the total, which that pane was folded into when it closed.
func (w *Sliding) addLate(s int, col uint32, value int64) error {
	p := &w.panes[s]
	i, at, ok := p.late.find(col, p.cells)
	if ok {
		if err := w.bump(&p.cells[i], value); err != nil {
			return err
		}
	} else {
		if w.cellCount >= w.maxCells {
			w.stats.CellsFull++
			return ErrCellsFull
		}
		p.late.put(col, uint32(len(p.cells)), at, p.cells)
		p.cells = append(p.cells, cell{col: col, count: 1, sum: value})
		w.cellCount++
		w.stats.Added++
	}
	w.fold(col, 1, value)
	return nil
}

// bump adds one update to an existing cell.
func (w *Sliding) bump(e *cell, value int64) error {
	if e.count == math.MaxUint32 {
		w.stats.Overflow++
		return ErrOverflow
	}
	e.count++
	e.sum += value
	w.stats.Added++
	return nil
}

// fold adds count and sum to col's total.
func (w *Sliding) fold(col uint32, count uint32, sum int64) {
	t := &w.totals[col]
	if t.count == 0 {
		w.liveClosed++
	}
	t.count += uint64(count)
	t.sum += sum
}

// closeHead folds the newest pane's cells into the total vector as the
// window moves on and keeps them, packed where they fit, in its slot s
// (emptied when it last expired); the head cells and index start over for
// the next newest pane, in the same buffers, which stay in cache. The
// updates still in headDups become cells of their own: a column's cells
// add up in its total all the same, and each leaves it when the pane
// expires. (Adding them to their columns' cells first took a filter check
// of every cell and an index lookup of those it let through: at 1M
// uniform keys, where 5 % of a 10 s pane's updates are repeats, an update
// took 0.88× the time without, and 0.92× at 1 s panes.) The cells' marks
// are cleared one by one, or all at once where the pane has so many cells
// for the columns that that costs less.
func (w *Sliding) closeHead(s int) {
	p := &w.panes[s]
	marked := w.headCells
	if w.indexing {
		marked = marked[:w.marked]
	}
	if 16*len(marked) < len(w.headMark) {
		for _, e := range marked {
			w.headMark[e.col/64] &^= 1 << (e.col % 64)
		}
	} else {
		clear(w.headMark)
	}
	p.repeats = len(w.headDups)
	cells := append(w.headCells, w.headDups...)
	packed := p.packed
	for from := 0; from < len(cells); from += touchCells {
		chunk := cells[from:min(from+touchCells, len(cells))]
		w.touched += touchHead(w.totals, chunk)
		w.liveClosed += foldCells(w.totals, chunk)
		for _, e := range chunk {
			if x, ok := packCell(e); ok {
				packed = append(packed, x)
			} else {
				p.cells = append(p.cells, e)
			}
		}
	}
	p.packed = packed
	w.headCells, w.headDups = shrink(cells), shrink(w.headDups)
	w.head.reset()
	w.indexed, w.indexing, w.headAdded, w.marked = 0, false, 0, 0
}

// touchHead loads the total lines of cells' columns, and returns the sum
// of their counts so that the loads are not left out.
//
//go:noinline
func touchHead(totals []total, cells []cell) uint64 {
	var sum uint64
	for _, e := range cells {
		sum += totals[e.col].count
	}
	return sum
}

// touchPacked is touchHead for packed cells.
//
//go:noinline
func touchPacked(totals []total, packed []uint64) uint64 {
	var sum uint64
	for _, x := range packed {
		sum += totals[uint32(x)].count
	}
	return sum
}

// foldCells adds cells into totals, and returns how many of those were
// zero before (columns that became live).
//
//go:noinline
func foldCells(totals []total, cells []cell) (born int) {
	for _, e := range cells {
		t := &totals[e.col]
		if t.count == 0 {
			born++
		}
		t.count += uint64(e.count)
		t.sum += e.sum
	}
	return born
}

// expirePacked takes packed cells out of totals and appends to zeros the
// columns whose total fell to zero.
//
//go:noinline
func expirePacked(totals []total, packed []uint64, zeros []uint32) []uint32 {
	for _, x := range packed {
		t := &totals[uint32(x)]
		t.count -= uint64(uint32(x>>32) & packMaxCount)
		t.sum -= int64(x) >> (32 + packCountBits)
		if t.count == 0 {
			zeros = append(zeros, uint32(x))
		}
	}
	return zeros
}

// shrink empties a buffer for reuse, or gives it back if it is a burst's:
// beyond 1024 elements, and used to less than a quarter.
func shrink[E any](b []E) []E {
	if cap(b) > 1024 && cap(b) > 4*len(b) {
		return nil
	}
	return b[:0]
}

// recycle expires the pane in slot s, already closed: its cells leave the
// totals.
func (w *Sliding) recycle(s int) {
	p := &w.panes[s]
	for from := 0; from < len(p.packed); from += touchCells {
		chunk := p.packed[from:min(from+touchCells, len(p.packed))]
		w.touched += touchPacked(w.totals, chunk)
		w.zeros = expirePacked(w.totals, chunk, w.zeros[:0])
		w.liveClosed -= len(w.zeros)
		for _, col := range w.zeros {
			w.retire(col)
		}
	}
	for _, e := range p.cells {
		w.expire(e.col, uint64(e.count), e.sum)
	}
	w.cellCount -= len(p.packed) + len(p.cells) - p.repeats
	p.packed, p.cells, p.repeats = shrink(p.packed), shrink(p.cells), 0
	p.late.reset()
}

// expire takes count and sum out of col's total.
func (w *Sliding) expire(col uint32, count uint64, sum int64) {
	t := &w.totals[col]
	t.count -= count
	t.sum -= sum
	if t.count == 0 {
		w.liveClosed--
		w.retire(col)
	}
}

// inHeadPane reports whether col has a cell in the newest pane.
func (w *Sliding) inHeadPane(col uint32) bool {
	if w.headMark[col/64]&(1<<(col%64)) != 0 {
		return true
	}
	if w.indexing { // made since, and not marked
		_, _, ok := w.head.find(col, w.headCells)
		return ok
	}
	return false
}

// headCell returns col's cell in the newest pane, if it has one, with all
// its updates.
func (w *Sliding) headCell(col uint32) (cell, bool) {
	if !w.inHeadPane(col) {
		return cell{}, false
	}
	w.settle()
	i, _, _ := w.head.find(col, w.headCells)
	return w.headCells[i], true
}

// retire makes col a reclaim candidate, once.
func (w *Sliding) retire(col uint32) {
	word, bit := col/64, uint64(1)<<(col%64)
	if w.idleMark[word]&bit == 0 {
		w.idleMark[word] |= bit
		w.idle = append(w.idle, col)
	}
}

// intern gives key, whose hash is h and whose dictionary slot would be at,
// a column: a new one while the dictionary has room, else the column of a
// key whose window count is zero.
func (w *Sliding) intern(key []byte, h uint64, at uint32) (uint32, error) {
	var col uint32
	switch {
	case len(w.dict.keys) < w.maxKeys:
		col = uint32(len(w.dict.keys))
		w.dict.keys = append(w.dict.keys, "")
		w.totals = append(w.totals, total{})
		if int(col)/64 >= len(w.idleMark) {
			w.idleMark = append(w.idleMark, 0)
		}
		if int(col)/64 >= len(w.headMark) {
			w.headMark = append(w.headMark, 0)
		}
	default:
		var ok bool
		if col, ok = w.reclaim(); !ok {
			w.stats.KeysFull++
			return 0, ErrKeysFull
		}
		w.dict.remove(col)
		at, _ = w.dict.find(key, h) // the removal may have moved the free slot
		w.stats.Reclaimed++
	}
	w.dict.keys[col] = string(key)
	w.dict.insert(key, h, at, col)
	w.retire(col) // zero until its first update lands
	return col, nil
}

// reclaim pops a column whose window count is zero; candidates that have
// counted again since they were pushed are dropped (and pushed again when
// they fall back to zero).
func (w *Sliding) reclaim() (uint32, bool) {
	for len(w.idle) > 0 {
		col := w.idle[len(w.idle)-1]
		w.idle = w.idle[:len(w.idle)-1]
		w.idleMark[col/64] &^= 1 << (col % 64)
		if w.totals[col].count == 0 && !w.inHeadPane(col) {
			return col, true
		}
	}
	return 0, false
}

// Advance moves the window so that its newest pane holds t, expiring the
// panes that fall off its start; an older t changes nothing.
func (w *Sliding) Advance(t int64) { w.advance(t, w) }

// Column returns key's column, giving it one as Add would; the index stays
// the key's while its window count is nonzero. Once the count is zero and
// the dictionary is full, a new key may take the column (Stats.Reclaimed
// counts it): a caller caching indexes can check them with Key.
func (w *Sliding) Column(key []byte) (uint32, error) {
	h := w.dict.hash(key)
	at, ok := w.dict.find(key, h)
	if ok {
		return w.dict.slots[at].col - 1, nil
	}
	return w.intern(key, h, at)
}

// Lookup returns key's column if the dictionary holds it.
func (w *Sliding) Lookup(key []byte) (uint32, bool) { return w.dict.lookup(key) }

// Key returns the key that holds column col, or false.
func (w *Sliding) Key(col uint32) (string, bool) {
	if uint64(col) >= uint64(len(w.dict.keys)) {
		return "", false
	}
	return w.dict.keys[col], true
}

// Get returns key's count and sum over the window; zero for an unknown key.
func (w *Sliding) Get(key []byte) Value {
	if col, ok := w.dict.lookup(key); ok {
		return w.GetIndex(col)
	}
	return Value{}
}

// GetIndex returns the count and sum of column col over the window: its
// total plus its cell in the newest pane. Zero for a column the dictionary
// never gave out.
func (w *Sliding) GetIndex(col uint32) Value {
	if uint64(col) >= uint64(len(w.totals)) {
		return Value{}
	}
	t := w.totals[col]
	v := Value{Count: t.count, Sum: t.sum}
	if e, ok := w.headCell(col); ok {
		v.Count += uint64(e.count)
		v.Sum += e.sum
	}
	return v
}

// Bounds returns the window's span [start, end) in event-time ns, saturated
// at the int64 range; ok is false before the first update or Advance.
func (w *Sliding) Bounds() (start, end int64, ok bool) { return w.bounds() }

// Stats returns the window's gauges and counters.
func (w *Sliding) Stats() Stats {
	s := w.stats
	s.Keys, s.Live, s.Cells = len(w.dict.keys), w.liveClosed, w.cellCount
	for _, e := range w.headCells {
		if w.totals[e.col].count == 0 { // live only in the newest pane
			s.Live++
		}
	}
	return s
}

// TopK appends to dst the k keys with the largest window count (ByCount) or
// sum (BySum), best first, and returns it. Keys with a zero count are not in
// the window. Ties go to the bytewise smaller key, so the answer does not
// depend on which column a key holds. It scans the columns keeping a
// k-element heap: O(keys + live·log k) time, O(k) space beyond dst. An
// unknown Order appends nothing.
func (w *Sliding) TopK(dst []Entry, k int, by Order) []Entry {
	if k <= 0 || by > BySum {
		return dst
	}
	h := topHeap{keys: w.dict.keys, by: by, k: k, h: make([]ranked, 0, min(k, len(w.totals)))}
	w.settle()
	head := w.headCells
	for _, e := range head { // fold the newest pane in for the scan, then out
		t := &w.totals[e.col]
		t.count += uint64(e.count)
		t.sum += e.sum
	}
	for col, t := range w.totals {
		if t.count != 0 {
			h.offer(ranked{col: uint32(col), v: Value{Count: t.count, Sum: t.sum}})
		}
	}
	for _, e := range head {
		t := &w.totals[e.col]
		t.count -= uint64(e.count)
		t.sum -= e.sum
	}
	return h.drain(dst)
}

// ranked is a TopK candidate.
type ranked struct {
	col uint32
	v   Value
}

// topHeap is a min-heap of candidates by rank: the worst of the best k on
// top.
type topHeap struct {
	keys []string
	by   Order
	k    int
	h    []ranked
}

// better ranks a above b.
func (h *topHeap) better(a, b *ranked) bool {
	if h.by == BySum {
		if a.v.Sum != b.v.Sum {
			return a.v.Sum > b.v.Sum
		}
	} else if a.v.Count != b.v.Count {
		return a.v.Count > b.v.Count
	}
	return h.keys[a.col] < h.keys[b.col]
}

// offer keeps r if it ranks among the best k seen so far.
func (h *topHeap) offer(r ranked) {
	if len(h.h) < h.k {
		h.h = append(h.h, r)
		for i := len(h.h) - 1; i > 0; {
			parent := (i - 1) / 2
			if !h.better(&h.h[parent], &h.h[i]) {
				break
			}
			h.h[parent], h.h[i] = h.h[i], h.h[parent]
			i = parent
		}
		return
	}
	if h.better(&r, &h.h[0]) {
		h.h[0] = r
		h.down(len(h.h))
	}
}

// down sifts the top of the first n candidates into place.
func (h *topHeap) down(n int) {
	for i := 0; ; {
		worst, l, r := i, 2*i+1, 2*i+2
		if l < n && h.better(&h.h[worst], &h.h[l]) {
			worst = l
		}
		if r < n && h.better(&h.h[worst], &h.h[r]) {
			worst = r
		}
		if worst == i {
			return
		}
		h.h[i], h.h[worst] = h.h[worst], h.h[i]
		i = worst
	}
}

// drain appends the candidates best first: popping the worst to the back
// of the heap's own slice leaves it sorted best first.
func (h *topHeap) drain(dst []Entry) []Entry {
	for n := len(h.h) - 1; n > 0; n-- {
		h.h[0], h.h[n] = h.h[n], h.h[0]
		h.down(n)
	}
	for _, r := range h.h {
		dst = append(dst, Entry{Key: h.keys[r.col], Value: r.v})
	}
	return dst
}
