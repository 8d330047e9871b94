package sketch

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Limits on a Count-Min shape. They bound memory (8 bytes a counter) and
// what UnmarshalBinary will allocate for untrusted input.
const (
	// MaxCountMinDepth is the largest depth, d; it allows δ down to e⁻⁶⁴.
	MaxCountMinDepth = 64
	// MaxCountMinCells is the largest width×depth: 2²⁷ counters, 1 GiB.
	MaxCountMinCells = 1 << 27
)

// CountMin is a Count-Min sketch (Cormode and Muthukrishnan, 2005): d rows of
// w counters. Add adds a count to one counter per row and Estimate returns
// the smallest of the key's counters, so for a key with true count a
//
//	a ≤ Estimate ≤ a + ε‖a‖₁ with probability ≥ 1−δ, where w = ⌈e/ε⌉, d = ⌈ln 1/δ⌉,
//
// and ‖a‖₁ is Total. Counters are uint64 and saturate at math.MaxUint64
// instead of wrapping, so an estimate never drops below the truth; once
// Total has saturated the upper bound no longer means anything.
//
// Hashing: each key is hashed once, with XXH64 seeded with the sketch's
// seed (minus its final avalanche, a bijection), to a 64-bit x. Row i maps
// x's 32-bit halves lo and hi to (aᵢ·lo + a′ᵢ·hi + bᵢ) mod 2⁶⁴ >> 32 with
// random 64-bit aᵢ, a′ᵢ, bᵢ drawn from the seed: Dietzfelbinger's
// multiply-add-shift for vectors, which is strongly universal (pairwise
// independent) — the property the bound above rests on — and rows with
// independent parameters are independent. The cheaper double hashing
// h1 + i·h2 (Kirsch–Mitzenmacher, BoomFilters' choice) makes the rows
// dependent: two keys that share two rows share them all. The 32-bit value
// is reduced to a column with Lemire's multiply-shift (h·w) >> 32, so any
// width works, not only powers of two (columns differ in probability by at
// most w/2³²). Distinct keys that collide in x, with probability 2⁻⁶⁴ a
// pair, share every counter. Everything derives from the seed, so sketches
// of equal width, depth and seed hash identically in every process and can
// be merged and stored.
//
// With conservative update (Estan and Varghese) Add raises each of the
// key's counters only as far as the new estimate, which lowers the error of
// light keys a lot; it still never underestimates, but the table is no longer
// a linear function of the stream, so such sketches do not Merge.
//
// Add and Estimate do not allocate. A CountMin is not safe for concurrent
// use. The zero value holds nothing: Add ignores keys, Estimate returns 0 and
// MarshalBinary fails; make one with NewCountMin or UnmarshalBinary.
type CountMin struct {
	width        int
	seed         uint64
	conservative bool
	total        uint64
	rows         []rowHash
	counts       []uint64 // depth rows of width counters, row after row
}

// rowHash holds one row's random multipliers and addend.
type rowHash struct{ a0, a1, b uint64 }

// column maps hash x, given as its low and high 32-bit halves, to a column
// of a row of width w < 2³²: the strongly universal 32-bit hash
// (a0·lo + a1·hi + b) mod 2⁶⁴ >> 32, reduced with Lemire's multiply-shift
// (h·w) >> 32.
func (r *rowHash) column(lo, hi, w uint64) uint64 {
	h := (r.a0*lo + r.a1*hi + r.b) >> 32
	return h * w >> 32
}

// CountMinOption configures NewCountMin and NewCountMinWithEstimates.
type CountMinOption func(*countMinConfig)

type countMinConfig struct {
	seed         uint64
	conservative bool
}

// WithConservativeUpdate makes Add use conservative update. Such a sketch
// cannot be merged.
func WithConservativeUpdate() CountMinOption {
	return func(c *countMinConfig) { c.conservative = true }
}

// WithSeed sets the seed the key hash and row hashes derive from (default
// 0). Only sketches with equal seeds merge.
func WithSeed(seed uint64) CountMinOption {
	return func(c *countMinConfig) { c.seed = seed }
}

// NewCountMin returns an empty Count-Min sketch of depth rows of width
// counters. It fails if width < 1, depth is not in [1, MaxCountMinDepth] or
// width×depth exceeds MaxCountMinCells.
func NewCountMin(width, depth int, opts ...CountMinOption) (*CountMin, error) {
	if width < 1 {
		return nil, fmt.Errorf("%w: count-min width %d, must be at least 1", ErrArgument, width)
	}
	if depth < 1 || depth > MaxCountMinDepth {
		return nil, fmt.Errorf("%w: count-min depth %d, must be in [1, %d]", ErrArgument, depth, MaxCountMinDepth)
	}
	if width > MaxCountMinCells/depth {
		return nil, fmt.Errorf("%w: count-min width %d × depth %d exceeds %d counters", ErrArgument, width, depth, MaxCountMinCells)
	}
	var c countMinConfig
	for _, o := range opts {
		o(&c)
	}
	return newCountMin(width, depth, c.seed, c.conservative), nil
}

// NewCountMinWithEstimates returns a sketch whose estimates exceed the truth
// by at most eps·Total with probability at least 1−delta: width ⌈e/eps⌉
// and depth ⌈ln(1/delta)⌉. Both must be in (0, 1); eps = 0.001 and
// delta = 0.01 give 2719×5.
func NewCountMinWithEstimates(eps, delta float64, opts ...CountMinOption) (*CountMin, error) {
	if !(eps > 0 && eps < 1) {
		return nil, fmt.Errorf("%w: count-min eps %v, must be in (0, 1)", ErrArgument, eps)
	}
	if !(delta > 0 && delta < 1) {
		return nil, fmt.Errorf("%w: count-min delta %v, must be in (0, 1)", ErrArgument, delta)
	}
	w, d := math.Ceil(math.E/eps), math.Ceil(math.Log(1/delta))
	if d > MaxCountMinDepth {
		return nil, fmt.Errorf("%w: count-min delta %v needs depth %v, more than %d", ErrArgument, delta, d, MaxCountMinDepth)
	}
	if w*d > MaxCountMinCells {
		return nil, fmt.Errorf("%w: count-min eps %v and delta %v need %v×%v counters, more than %d", ErrArgument, eps, delta, w, d, MaxCountMinCells)
	}
	return NewCountMin(int(w), int(d), opts...)
}

func newCountMin(width, depth int, seed uint64, conservative bool) *CountMin {
	s := &CountMin{
		width:        width,
		seed:         seed,
		conservative: conservative,
		rows:         make([]rowHash, depth),
		counts:       make([]uint64, width*depth),
	}
	state := seed
	for i := range s.rows {
		s.rows[i] = rowHash{splitmix64(&state), splitmix64(&state), splitmix64(&state)}
	}
	return s
}

// Add adds count occurrences of key.
func (s *CountMin) Add(key []byte, count uint64) {
	if count == 0 || len(s.rows) == 0 {
		return
	}
	s.total = addSat(s.total, count)
	x := xxh64Core(key, s.seed)
	if s.conservative {
		s.addConservative(x, count)
		return
	}
	// Locals, so that the stores to counts do not make the compiler reload
	// the fields on every row.
	rows, counts, w := s.rows, s.counts, uint64(s.width)
	lo, hi := x&0xffffffff, x>>32
	var row uint64 // offset of row i in counts
	for i := range rows {
		c := &counts[row+rows[i].column(lo, hi, w)]
		*c = addSat(*c, count)
		row += w
	}
}

// addConservative raises every counter of hash x to the new estimate, no
// further: counters shared with heavier keys already cover this key.
func (s *CountMin) addConservative(x, count uint64) {
	v := addSat(s.estimate(x), count)
	rows, counts, w := s.rows, s.counts, uint64(s.width)
	lo, hi := x&0xffffffff, x>>32
	var row uint64
	for i := range rows {
		c := &counts[row+rows[i].column(lo, hi, w)]
		*c = max(*c, v)
		row += w
	}
}

// Estimate returns the estimated count of key: never less than the true
// count, and 0 for a key never added unless it collides in every row.
func (s *CountMin) Estimate(key []byte) uint64 {
	if len(s.rows) == 0 {
		return 0
	}
	return s.estimate(xxh64Core(key, s.seed))
}

func (s *CountMin) estimate(x uint64) uint64 {
	rows, counts, w := s.rows, s.counts, uint64(s.width)
	lo, hi := x&0xffffffff, x>>32
	est := uint64(math.MaxUint64)
	var row uint64
	for i := range rows {
		est = min(est, counts[row+rows[i].column(lo, hi, w)])
		row += w
	}
	return est
}

// Merge adds o into s, so that s becomes the sketch of both streams (equal,
// counter for counter, to the sketch of their concatenation). It fails,
// leaving s unchanged, unless both have the same width, depth and seed, and
// if either uses conservative update: a sum of conservative tables still
// never underestimates, but it is not the sketch of the combined stream —
// it would depend on how the stream was split between shards or panes.
func (s *CountMin) Merge(o *CountMin) error {
	switch {
	case o == nil:
		return fmt.Errorf("%w: count-min: other sketch is nil", ErrMismatch)
	case s.conservative || o.conservative:
		return fmt.Errorf("%w: count-min: conservative update is not linear (conservative %t and %t)", ErrMismatch, s.conservative, o.conservative)
	case s.width != o.width:
		return fmt.Errorf("%w: count-min: width %d and %d", ErrMismatch, s.width, o.width)
	case len(s.rows) != len(o.rows):
		return fmt.Errorf("%w: count-min: depth %d and %d", ErrMismatch, len(s.rows), len(o.rows))
	case s.seed != o.seed:
		return fmt.Errorf("%w: count-min: seed %d and %d", ErrMismatch, s.seed, o.seed)
	}
	for i, c := range o.counts {
		s.counts[i] = addSat(s.counts[i], c)
	}
	s.total = addSat(s.total, o.total)
	return nil
}

// Width returns the number of counters in a row, w.
func (s *CountMin) Width() int { return s.width }

// Depth returns the number of rows, d.
func (s *CountMin) Depth() int { return len(s.rows) }

// Total returns ‖a‖₁, the sum of all counts added (saturating).
func (s *CountMin) Total() uint64 { return s.total }

// Conservative reports whether s uses conservative update.
func (s *CountMin) Conservative() bool { return s.conservative }

// Count-Min encoding, after the header: flags (bit 0: conservative), width
// and depth (uint32), seed and total (uint64), then the counters row after
// row; all little-endian.
const (
	countMinMagic = "CMS"
	countMinFixed = 1 + 4 + 4 + 8 + 8
)

// MarshalBinary encodes s (see encoding.BinaryMarshaler); the size is
// 29 + 8·width·depth bytes.
func (s *CountMin) MarshalBinary() ([]byte, error) {
	if len(s.rows) == 0 {
		return nil, fmt.Errorf("%w: count-min: the zero value has no shape; use NewCountMin", ErrArgument)
	}
	b := make([]byte, 0, headerLen+countMinFixed+8*len(s.counts))
	b = appendHeader(b, countMinMagic)
	var flags byte
	if s.conservative {
		flags = 1
	}
	b = append(b, flags)
	b = binary.LittleEndian.AppendUint32(b, uint32(s.width))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(s.rows)))
	b = binary.LittleEndian.AppendUint64(b, s.seed)
	b = binary.LittleEndian.AppendUint64(b, s.total)
	for _, c := range s.counts {
		b = binary.LittleEndian.AppendUint64(b, c)
	}
	return b, nil
}

// UnmarshalBinary replaces s with the sketch encoded in data by
// MarshalBinary. It checks the shape against the limits, the length, and
// that every row adds up to the total (exactly for a plain sketch, at most
// for a conservative one); on error s is unchanged.
func (s *CountMin) UnmarshalBinary(data []byte) error {
	const what = "count-min"
	rest, err := checkHeader(data, countMinMagic, what)
	if err != nil {
		return err
	}
	if len(rest) < countMinFixed {
		return fmt.Errorf("%w: %s: truncated: %d bytes after the header, want at least %d", ErrCorrupt, what, len(rest), countMinFixed)
	}
	flags := rest[0]
	width := binary.LittleEndian.Uint32(rest[1:])
	depth := binary.LittleEndian.Uint32(rest[5:])
	seed := binary.LittleEndian.Uint64(rest[9:])
	total := binary.LittleEndian.Uint64(rest[17:])
	body := rest[countMinFixed:]
	switch {
	case flags&^1 != 0:
		return fmt.Errorf("%w: %s: unknown flags %#02x", ErrCorrupt, what, flags)
	case width < 1 || depth < 1 || depth > MaxCountMinDepth || uint64(width)*uint64(depth) > MaxCountMinCells:
		return fmt.Errorf("%w: %s: shape %d×%d outside width ≥ 1, depth in [1, %d], at most %d counters",
			ErrCorrupt, what, width, depth, MaxCountMinDepth, MaxCountMinCells)
	case uint64(len(body)) != 8*uint64(width)*uint64(depth):
		return fmt.Errorf("%w: %s: %d bytes of counters, width %d × depth %d needs %d",
			ErrCorrupt, what, len(body), width, depth, 8*uint64(width)*uint64(depth))
	}
	t := newCountMin(int(width), int(depth), seed, flags&1 != 0)
	for i := range t.counts {
		t.counts[i] = binary.LittleEndian.Uint64(body[8*i:])
	}
	t.total = total
	if total != math.MaxUint64 { // a saturated total bounds nothing
		for i := range t.rows {
			var sum uint64
			for _, c := range t.counts[i*t.width : (i+1)*t.width] {
				sum = addSat(sum, c)
			}
			if sum > total || !t.conservative && sum != total {
				return fmt.Errorf("%w: %s: row %d sums to %d, total is %d", ErrCorrupt, what, i, sum, total)
			}
		}
	}
	*s = *t
	return nil
}
