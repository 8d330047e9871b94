package window

import (
	"hash/maphash"
	"math/bits"
)

// dict is the window's dictionary: key → column through an open-addressing
// table with linear probing, kept at most 3/4 full, and column → key
// through a slice. A key of up to inlineKey bytes sits in its slot, so a
// lookup usually reads one cache line, where a Go map reads its control
// word, its slot and the key's bytes elsewhere (at many keys, two or three
// misses). Longer keys are compared with their copy in keys. A slot also
// keeps a hint: the index of its column's cell in the newest pane when it
// was last looked for, which spares Add the newest pane's index while it
// is still right.
type dict struct {
	slots []dictSlot // a power of two long, or nil until the first insert
	shift uint8      // 64 - log2(len(slots)): a hash's top bits are its home slot
	n     int
	seed  maphash.Seed
	keys  []string // column → key
}

// dictSlot is 32 bytes, two to a cache line.
type dictSlot struct {
	key  [inlineKey]byte
	n    uint8 // the key's length if at most inlineKey, else longKey
	tag  uint8 // the hash's low byte, checked before the key's bytes
	_    [2]byte
	col  uint32 // the column plus one; 0 marks a free slot
	hint uint32 // the column's cell in the newest pane, if that cell is col's
}

const (
	inlineKey = 20
	longKey   = 0xFF
	minDict   = 64 // the smallest table, in slots
)

func newDict() dict { return dict{seed: maphash.MakeSeed()} }

// hash is key's hash under the dictionary's seed.
func (d *dict) hash(key []byte) uint64 { return maphash.Bytes(d.seed, key) }

// slotHash is the hash of the key in s.
func (d *dict) slotHash(s *dictSlot) uint64 {
	if s.n == longKey {
		return maphash.String(d.seed, d.keys[s.col-1])
	}
	return maphash.Bytes(d.seed, s.key[:s.n])
}

// find returns the slot holding key, whose hash is h, or the free slot
// where insert should put it.
func (d *dict) find(key []byte, h uint64) (at uint32, ok bool) {
	if d.slots == nil {
		return 0, false
	}
	n, tag, mask := uint8(longKey), uint8(h), uint32(len(d.slots)-1)
	if len(key) <= inlineKey {
		n = uint8(len(key))
	}
	for i := uint32(h >> d.shift); ; i = (i + 1) & mask {
		s := &d.slots[i]
		switch {
		case s.col == 0:
			return i, false
		case s.tag != tag || s.n != n:
		case n == longKey && d.keys[s.col-1] == string(key), n != longKey && string(s.key[:n]) == string(key):
			return i, true
		}
	}
}

// lookup returns key's column.
func (d *dict) lookup(key []byte) (uint32, bool) {
	at, ok := d.find(key, d.hash(key))
	if !ok {
		return 0, false
	}
	return d.slots[at].col - 1, true
}

// insert records key, already in keys[col], at the slot a failed find
// with the same hash h returned.
func (d *dict) insert(key []byte, h uint64, at, col uint32) {
	if d.slots == nil {
		d.resize(minDict)
		at, _ = d.find(key, h)
	}
	s := dictSlot{n: longKey, tag: uint8(h), col: col + 1}
	if len(key) <= inlineKey {
		s.n = uint8(copy(s.key[:], key))
	}
	d.slots[at] = s
	if d.n++; 4*d.n > 3*len(d.slots) {
		d.resize(2 * len(d.slots))
	}
}

// remove forgets the key of col, still in keys[col], closing the gap by
// shifting back the slots after it that may move (no tombstones).
func (d *dict) remove(col uint32) {
	if d.slots == nil {
		return
	}
	mask := uint32(len(d.slots) - 1)
	i := uint32(maphash.String(d.seed, d.keys[col]) >> d.shift)
	for ; d.slots[i].col != col+1; i = (i + 1) & mask {
		if d.slots[i].col == 0 {
			return // not there
		}
	}
	d.n--
	for j := i; ; {
		d.slots[i] = dictSlot{}
		for {
			j = (j + 1) & mask
			if d.slots[j].col == 0 {
				return
			}
			// The slot at j stays if its home is cyclically in (i, j].
			home := uint32(d.slotHash(&d.slots[j]) >> d.shift)
			if stays := (home-i-1)&mask < (j-i)&mask; !stays {
				break
			}
		}
		d.slots[i] = d.slots[j]
		i = j
	}
}

// resize rehashes into size slots, a power of two, hints and all.
func (d *dict) resize(size int) {
	old := d.slots
	d.slots = make([]dictSlot, size)
	d.shift = uint8(64 - bits.TrailingZeros(uint(size)))
	mask := uint32(size - 1)
	for k := range old {
		if old[k].col == 0 {
			continue
		}
		i := uint32(d.slotHash(&old[k]) >> d.shift)
		for d.slots[i].col != 0 {
			i = (i + 1) & mask
		}
		d.slots[i] = old[k]
	}
}
