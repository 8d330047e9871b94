package sketch

import (
	"encoding/binary"
	"fmt"

	"github.com/axiomhq/hyperloglog"
)

// Precision limits of HyperLogLog, those of github.com/axiomhq/hyperloglog.
const (
	MinHyperLogLogPrecision = 4
	MaxHyperLogLogPrecision = 18
)

// HyperLogLog counts distinct keys in 2^precision registers of one byte; the
// relative standard error is about 1.04/√(2^precision), 0.81% at precision
// 14. It wraps github.com/axiomhq/hyperloglog (LogLog-Beta estimator,
// MetroHash with a fixed seed, HLL++-style sparse representation at low
// cardinality that turns dense on its own), adding argument checks, a
// versioned encoding and a decoder that validates untrusted input, which the
// library's does not.
//
// A HyperLogLog is not safe for concurrent use; even Count may compact the
// sparse representation. The zero value holds nothing: Add ignores keys,
// Count returns 0 and MarshalBinary fails; make one with NewHyperLogLog or
// UnmarshalBinary.
type HyperLogLog struct {
	sk *hyperloglog.Sketch
	p  uint8
}

// NewHyperLogLog returns an empty HyperLogLog with 2^precision registers;
// precision must be in [MinHyperLogLogPrecision, MaxHyperLogLogPrecision].
func NewHyperLogLog(precision uint8) (*HyperLogLog, error) {
	if precision < MinHyperLogLogPrecision || precision > MaxHyperLogLogPrecision {
		return nil, fmt.Errorf("%w: hyperloglog precision %d, must be in [%d, %d]",
			ErrArgument, precision, MinHyperLogLogPrecision, MaxHyperLogLogPrecision)
	}
	sk, err := hyperloglog.NewSketch(precision, true)
	if err != nil { // unreachable with the range checked above
		return nil, fmt.Errorf("%w: hyperloglog precision %d: %v", ErrArgument, precision, err)
	}
	return &HyperLogLog{sk: sk, p: precision}, nil
}

// Add adds key to the set.
func (h *HyperLogLog) Add(key []byte) {
	if h.sk != nil {
		h.sk.Insert(key)
	}
}

// Count returns the estimated number of distinct keys added.
func (h *HyperLogLog) Count() uint64 {
	if h.sk == nil {
		return 0
	}
	return h.sk.Estimate()
}

// Reset empties h, keeping its precision; it goes back to the small sparse
// representation.
func (h *HyperLogLog) Reset() {
	if h.sk != nil {
		h.sk, _ = hyperloglog.NewSketch(h.p, true) // h.p was checked when h was made
	}
}

// Precision returns log₂ of the number of registers.
func (h *HyperLogLog) Precision() uint8 { return h.p }

// Merge adds o's keys to h: h then counts the union. It fails unless both
// have the same precision.
func (h *HyperLogLog) Merge(o *HyperLogLog) error {
	switch {
	case o == nil:
		return fmt.Errorf("%w: hyperloglog: other sketch is nil", ErrMismatch)
	case h.sk == nil || o.sk == nil:
		return fmt.Errorf("%w: hyperloglog: zero value", ErrMismatch)
	case h.p != o.p:
		return fmt.Errorf("%w: hyperloglog: precision %d and %d", ErrMismatch, h.p, o.p)
	}
	if err := h.sk.Merge(o.sk); err != nil { // unreachable with equal precisions
		return fmt.Errorf("%w: hyperloglog: %v", ErrMismatch, err)
	}
	return nil
}

const hllMagic = "HLL"

// MarshalBinary encodes h (see encoding.BinaryMarshaler): the header, then
// the library's own encoding (its version 2).
func (h *HyperLogLog) MarshalBinary() ([]byte, error) {
	if h.sk == nil {
		return nil, fmt.Errorf("%w: hyperloglog: the zero value has no precision; use NewHyperLogLog", ErrArgument)
	}
	return h.sk.AppendBinary(appendHeader(nil, hllMagic))
}

// UnmarshalBinary replaces h with the sketch encoded in data by
// MarshalBinary. Before handing the bytes to the library, which trusts them,
// it checks every length, register and sparse entry; on error h is
// unchanged.
func (h *HyperLogLog) UnmarshalBinary(data []byte) error {
	rest, err := checkHeader(data, hllMagic, "hyperloglog")
	if err != nil {
		return err
	}
	if err := checkHLL(rest); err != nil {
		return fmt.Errorf("%w: hyperloglog: %v", ErrCorrupt, err)
	}
	sk := new(hyperloglog.Sketch)
	// The library keeps dense registers in the slice it is given: copy.
	if err := sk.UnmarshalBinary(append([]byte(nil), rest...)); err != nil {
		return fmt.Errorf("%w: hyperloglog: %v", ErrCorrupt, err)
	}
	*h = HyperLogLog{sk: sk, p: rest[1]}
	return nil
}

// hllPP is the library's sparse precision p′ (unexported there).
const hllPP = 25

// checkHLL validates the library's version-2 encoding: version, p, b = 0,
// sparse flag; then either the dense register count and registers, or the
// temporary set (count, uint32 entries) followed by the sorted sparse list
// (count, last, byte length, delta varints).
func checkHLL(b []byte) error {
	if len(b) < 8 {
		return fmt.Errorf("truncated: %d bytes, want at least 8", len(b))
	}
	version, p, base, sparse := b[0], b[1], b[2], b[3]
	switch {
	case version != 2:
		return fmt.Errorf("library format version %d, want 2", version)
	case p < MinHyperLogLogPrecision || p > MaxHyperLogLogPrecision:
		return fmt.Errorf("precision %d outside [%d, %d]", p, MinHyperLogLogPrecision, MaxHyperLogLogPrecision)
	case base != 0:
		return fmt.Errorf("register base %d, want 0", base)
	case sparse > 1:
		return fmt.Errorf("sparse flag %d, want 0 or 1", sparse)
	}
	n := uint64(binary.BigEndian.Uint32(b[4:8]))
	b = b[8:]
	if sparse == 0 {
		if m := uint64(1) << p; n != m || uint64(len(b)) != m {
			return fmt.Errorf("dense: %d registers in %d bytes, precision %d needs %d", n, len(b), p, m)
		}
		for i, r := range b {
			if r > 65-p { // a 64-bit hash leaves 64−p bits for the rank
				return fmt.Errorf("register %d is %d, more than %d", i, r, 65-p)
			}
		}
		return nil
	}
	if uint64(len(b)) < 4*n+12 {
		return fmt.Errorf("sparse: truncated: %d bytes for %d set entries and the list header", len(b), n)
	}
	for i := range n {
		if k := binary.BigEndian.Uint32(b[4*i:]); !validSparse(k, p) {
			return fmt.Errorf("sparse: set entry %d (%#x) is not an encoded hash", i, k)
		}
	}
	b = b[4*n:]
	count, last, size := binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:]), binary.BigEndian.Uint32(b[8:])
	b = b[12:]
	if uint64(len(b)) != uint64(size) {
		return fmt.Errorf("sparse: list of %d bytes, header says %d", len(b), size)
	}
	var x uint32
	var got uint32
	for len(b) > 0 {
		var d uint32
		var j int
		for ; ; j++ {
			if j == len(b) || j == 5 {
				return fmt.Errorf("sparse: list entry %d: truncated or overlong varint", got)
			}
			d |= uint32(b[j]&0x7f) << (7 * j)
			if b[j]&0x80 == 0 {
				break
			}
		}
		if j == 4 && b[j] > 0x0f {
			return fmt.Errorf("sparse: list entry %d overflows 32 bits", got)
		}
		b = b[j+1:]
		if got > 0 && d == 0 || x+d < x {
			return fmt.Errorf("sparse: list entry %d is not above the previous one", got)
		}
		x += d
		if !validSparse(x, p) {
			return fmt.Errorf("sparse: list entry %d (%#x) is not an encoded hash", got, x)
		}
		got++
	}
	if got != count || x != last {
		return fmt.Errorf("sparse: list holds %d entries ending at %#x, header says %d ending at %#x", got, x, count, last)
	}
	return nil
}

// validSparse reports whether k is a value the library's encodeHash can
// produce for precision p: either a p′-bit index whose bits below the top p
// are not all zero, shifted left once; or, with the low bit set, such an
// index with those bits all zero, shifted left 7, and the rank of the rest
// of the hash (1 to 64−p′+1) in bits 1–6.
func validSparse(k uint32, p uint8) bool {
	low := uint32(1)<<(hllPP-p) - 1
	if k&1 == 0 {
		idx := k >> 1
		return idx < 1<<hllPP && idx&low != 0
	}
	rank := k >> 1 & 0x3f
	return k>>7&low == 0 && rank >= 1 && rank <= 64-hllPP+1
}
