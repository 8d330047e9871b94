package sketch

import (
	"encoding/binary"
	"fmt"
)

// DefaultVectorMaxKeys is the number of distinct keys a Vector holds unless
// WithMaxKeys says otherwise: 2²⁰, about 100 MB with short keys.
const DefaultVectorMaxKeys = 1 << 20

// Vector is the paper's exact alternative to a Count-Min sketch: keys are
// dictionary-encoded to columns 0, 1, 2, … in order of first appearance and
// a dense vector holds one exact count per column, so Estimate reads the
// true value. It costs memory per distinct key, where a sketch costs w·d
// counters whatever the keys; the paper's advice is to prefer it whenever
// the number of distinct keys n is below w·d. It has the same shape as
// CountMin (Add, Estimate, Merge, Total, binary encoding) so that the two
// can be measured side by side.
//
// A Vector holds at most MaxKeys distinct keys: a new key beyond that is
// dropped, its count added to Dropped instead, so Total + Dropped is always
// the count of the whole stream. Counts saturate at math.MaxUint64.
//
// A Vector is not safe for concurrent use. The zero value is an empty
// Vector holding up to DefaultVectorMaxKeys keys.
type Vector struct {
	columns map[string]int // key → column
	keys    []string       // column → key
	counts  []uint64       // column → count
	total   uint64
	dropped uint64
	maxKeys int
}

// VectorOption configures NewVector.
type VectorOption func(*Vector)

// WithMaxKeys bounds the number of distinct keys; n < 1 selects
// DefaultVectorMaxKeys.
func WithMaxKeys(n int) VectorOption {
	return func(v *Vector) { v.maxKeys = n }
}

// NewVector returns an empty Vector.
func NewVector(opts ...VectorOption) *Vector {
	v := new(Vector)
	for _, o := range opts {
		o(v)
	}
	return v
}

// MaxKeys returns the largest number of distinct keys v holds.
func (v *Vector) MaxKeys() int {
	if v.maxKeys < 1 {
		return DefaultVectorMaxKeys
	}
	return v.maxKeys
}

// Add adds count occurrences of key; a count of 0 changes nothing.
func (v *Vector) Add(key []byte, count uint64) {
	if count == 0 {
		return
	}
	if c, ok := v.columns[string(key)]; ok { // no allocation: the compiler avoids the copy
		v.counts[c] = addSat(v.counts[c], count)
		v.total = addSat(v.total, count)
		return
	}
	v.addColumn(string(key), count)
}

func (v *Vector) addColumn(key string, count uint64) {
	if len(v.keys) >= v.MaxKeys() {
		v.dropped = addSat(v.dropped, count)
		return
	}
	if v.columns == nil {
		v.columns = make(map[string]int)
	}
	v.columns[key] = len(v.keys)
	v.keys = append(v.keys, key)
	v.counts = append(v.counts, count)
	v.total = addSat(v.total, count)
}

// Estimate returns the exact count of key (0 if it was never added or was
// dropped).
func (v *Vector) Estimate(key []byte) uint64 {
	if c, ok := v.columns[string(key)]; ok {
		return v.counts[c]
	}
	return 0
}

// Merge adds o's counts into v, column by column through the keys, so the
// two need not share a dictionary; keys new to v take the next columns in
// o's order, which makes the result equal to the Vector of the concatenated
// stream (when nothing was dropped). Keys beyond v's MaxKeys are dropped as
// in Add. It fails only for a nil o.
func (v *Vector) Merge(o *Vector) error {
	if o == nil {
		return fmt.Errorf("%w: vector: other vector is nil", ErrMismatch)
	}
	for c, k := range o.keys {
		count := o.counts[c] // read first: when o is v, the next line changes it
		if i, ok := v.columns[k]; ok {
			v.counts[i] = addSat(v.counts[i], count)
			v.total = addSat(v.total, count)
		} else {
			v.addColumn(k, count)
		}
	}
	v.dropped = addSat(v.dropped, o.dropped)
	return nil
}

// Len returns the number of distinct keys (columns) held.
func (v *Vector) Len() int { return len(v.keys) }

// Total returns the sum of the counts held (saturating).
func (v *Vector) Total() uint64 { return v.total }

// Dropped returns the sum of the counts of keys refused because v was full.
func (v *Vector) Dropped() uint64 { return v.dropped }

// Vector encoding, after the header: max keys, total, dropped and the number
// of columns, then per column the key's length, the key and the count; all
// unsigned varints except the key bytes.
const vectorMagic = "VEC"

// MarshalBinary encodes v (see encoding.BinaryMarshaler), columns in order.
func (v *Vector) MarshalBinary() ([]byte, error) {
	size := headerLen + 4*binary.MaxVarintLen64
	for _, k := range v.keys {
		size += len(k) + 2*binary.MaxVarintLen64
	}
	b := appendHeader(make([]byte, 0, size), vectorMagic)
	b = binary.AppendUvarint(b, uint64(v.MaxKeys()))
	b = binary.AppendUvarint(b, v.total)
	b = binary.AppendUvarint(b, v.dropped)
	b = binary.AppendUvarint(b, uint64(len(v.keys)))
	for c, k := range v.keys {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, v.counts[c])
	}
	return b, nil
}

// UnmarshalBinary replaces v with the Vector encoded in data by
// MarshalBinary. It checks every varint and length, that keys are distinct
// and counts positive, and that they add up to the total; on error v is
// unchanged.
func (v *Vector) UnmarshalBinary(data []byte) error {
	const what = "vector"
	rest, err := checkHeader(data, vectorMagic, what)
	if err != nil {
		return err
	}
	r := reader{b: rest}
	maxKeys, total, dropped, n := r.uvarint(), r.uvarint(), r.uvarint(), r.uvarint()
	switch {
	case r.err != nil:
		return fmt.Errorf("%w: %s: header: %v", ErrCorrupt, what, r.err)
	case maxKeys < 1 || maxKeys > 1<<31:
		return fmt.Errorf("%w: %s: max keys %d, must be in [1, 2³¹]", ErrCorrupt, what, maxKeys)
	case n > maxKeys:
		return fmt.Errorf("%w: %s: %d columns, more than max keys %d", ErrCorrupt, what, n, maxKeys)
	case n > uint64(len(r.b))/2: // a column takes at least 2 bytes
		return fmt.Errorf("%w: %s: %d columns cannot fit in %d bytes", ErrCorrupt, what, n, len(r.b))
	}
	t := &Vector{
		columns: make(map[string]int, n),
		keys:    make([]string, 0, n),
		counts:  make([]uint64, 0, n),
		dropped: dropped,
		maxKeys: int(maxKeys),
	}
	for c := range n {
		key, count := string(r.bytes(r.uvarint())), r.uvarint()
		switch _, dup := t.columns[key]; {
		case r.err != nil:
			return fmt.Errorf("%w: %s: column %d: %v", ErrCorrupt, what, c, r.err)
		case dup:
			return fmt.Errorf("%w: %s: column %d repeats key %q", ErrCorrupt, what, c, key)
		case count == 0:
			return fmt.Errorf("%w: %s: column %d (key %q) has count 0", ErrCorrupt, what, c, key)
		}
		t.addColumn(key, count)
	}
	switch {
	case len(r.b) != 0:
		return fmt.Errorf("%w: %s: %d bytes after the last column", ErrCorrupt, what, len(r.b))
	case t.total != total:
		return fmt.Errorf("%w: %s: counts sum to %d, total is %d", ErrCorrupt, what, t.total, total)
	}
	*v = *t
	return nil
}

// reader decodes varints and byte strings, remembering the first error so
// that a decoder can check once per record.
type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	x, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("truncated or overlong varint")
		return 0
	}
	r.b = r.b[n:]
	return x
}

func (r *reader) bytes(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = fmt.Errorf("%d bytes wanted, %d left", n, len(r.b))
		return nil
	}
	s := r.b[:n]
	r.b = r.b[n:]
	return s
}
