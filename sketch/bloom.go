package sketch

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/bits-and-blooms/bloom/v3"
)

// MaxBloomBits bounds the size of a Bloom filter: 2³³ bits, 1 GiB.
const MaxBloomBits = 1 << 33

// maxBloomHashes bounds k when decoding; NewBloom cannot exceed it
// (fpRate ≥ 5e-324 gives k ≤ 1075).
const maxBloomHashes = 1 << 11

// Bloom is a Bloom filter: Test never reports false for a key that was
// added, and reports true for a key that was not with about the false
// positive rate it was sized for, as long as no more than the expected
// number of keys were added. It wraps github.com/bits-and-blooms/bloom/v3
// (m = ⌈−n·ln p / ln²2⌉ bits, k = ⌈ln 2·m/n⌉ probes from a 128-bit
// Murmur3), adding argument checks and a versioned, validated encoding.
//
// A Bloom is not safe for concurrent use. The zero value holds nothing:
// Add ignores keys, Test returns false and MarshalBinary fails; make one
// with NewBloom or UnmarshalBinary.
type Bloom struct {
	f *bloom.BloomFilter
}

// NewBloom returns an empty filter sized for expected keys at false
// positive rate fpRate. expected must be positive, fpRate in (0, 1), and
// the filter no larger than MaxBloomBits.
func NewBloom(expected uint, fpRate float64) (*Bloom, error) {
	if expected == 0 {
		return nil, fmt.Errorf("%w: bloom expected %d, must be at least 1", ErrArgument, expected)
	}
	if !(fpRate > 0 && fpRate < 1) {
		return nil, fmt.Errorf("%w: bloom fpRate %v, must be in (0, 1)", ErrArgument, fpRate)
	}
	// The library's sizing, in floating point first so that it cannot overflow.
	if m := math.Ceil(-float64(expected) * math.Log(fpRate) / (math.Ln2 * math.Ln2)); m > MaxBloomBits {
		return nil, fmt.Errorf("%w: bloom expected %d at fpRate %v needs %v bits, more than %d",
			ErrArgument, expected, fpRate, m, uint64(MaxBloomBits))
	}
	return &Bloom{bloom.NewWithEstimates(expected, fpRate)}, nil
}

// Add adds key to the set.
func (b *Bloom) Add(key []byte) {
	if b.f != nil {
		b.f.Add(key)
	}
}

// Test reports whether key may have been added: false means it was not.
func (b *Bloom) Test(key []byte) bool {
	return b.f != nil && b.f.Test(key)
}

// Bits returns the size of the filter in bits, m.
func (b *Bloom) Bits() uint {
	if b.f == nil {
		return 0
	}
	return b.f.Cap()
}

// Hashes returns the number of bits probed per key, k.
func (b *Bloom) Hashes() uint {
	if b.f == nil {
		return 0
	}
	return b.f.K()
}

// Reset empties b, keeping its size.
func (b *Bloom) Reset() {
	if b.f != nil {
		b.f.ClearAll()
	}
}

// Merge adds o's keys to b: b then holds the union. It fails unless both
// have the same number of bits and of hashes.
func (b *Bloom) Merge(o *Bloom) error {
	switch {
	case o == nil:
		return fmt.Errorf("%w: bloom: other filter is nil", ErrMismatch)
	case b.f == nil || o.f == nil:
		return fmt.Errorf("%w: bloom: zero value", ErrMismatch)
	case b.f.Cap() != o.f.Cap():
		return fmt.Errorf("%w: bloom: %d and %d bits", ErrMismatch, b.f.Cap(), o.f.Cap())
	case b.f.K() != o.f.K():
		return fmt.Errorf("%w: bloom: %d and %d hashes", ErrMismatch, b.f.K(), o.f.K())
	}
	if err := b.f.Merge(o.f); err != nil { // unreachable with equal shapes
		return fmt.Errorf("%w: bloom: %v", ErrMismatch, err)
	}
	return nil
}

// Bloom encoding, after the header: m and k (uint64), then the ⌈m/64⌉ words
// of the bit set; all little-endian.
const (
	bloomMagic = "BLM"
	bloomFixed = 8 + 8
)

// MarshalBinary encodes b (see encoding.BinaryMarshaler); the size is
// 20 + 8·⌈m/64⌉ bytes.
func (b *Bloom) MarshalBinary() ([]byte, error) {
	if b.f == nil {
		return nil, fmt.Errorf("%w: bloom: the zero value has no size; use NewBloom", ErrArgument)
	}
	words := b.f.BitSet().Words()
	out := make([]byte, 0, headerLen+bloomFixed+8*len(words))
	out = appendHeader(out, bloomMagic)
	out = binary.LittleEndian.AppendUint64(out, uint64(b.f.Cap()))
	out = binary.LittleEndian.AppendUint64(out, uint64(b.f.K()))
	for _, w := range words {
		out = binary.LittleEndian.AppendUint64(out, w)
	}
	return out, nil
}

// UnmarshalBinary replaces b with the filter encoded in data by
// MarshalBinary. It checks m, k and the length, and that no bit beyond m is
// set; on error b is unchanged.
func (b *Bloom) UnmarshalBinary(data []byte) error {
	const what = "bloom"
	rest, err := checkHeader(data, bloomMagic, what)
	if err != nil {
		return err
	}
	if len(rest) < bloomFixed {
		return fmt.Errorf("%w: %s: truncated: %d bytes after the header, want at least %d", ErrCorrupt, what, len(rest), bloomFixed)
	}
	m, k := binary.LittleEndian.Uint64(rest), binary.LittleEndian.Uint64(rest[8:])
	body := rest[bloomFixed:]
	switch {
	case m < 1 || m > MaxBloomBits:
		return fmt.Errorf("%w: %s: %d bits, must be in [1, %d]", ErrCorrupt, what, m, uint64(MaxBloomBits))
	case k < 1 || k > maxBloomHashes:
		return fmt.Errorf("%w: %s: %d hashes, must be in [1, %d]", ErrCorrupt, what, k, maxBloomHashes)
	case uint64(len(body)) != 8*((m+63)/64):
		return fmt.Errorf("%w: %s: %d bytes of bits, %d bits need %d", ErrCorrupt, what, len(body), m, 8*((m+63)/64))
	}
	if tail := m % 64; tail != 0 {
		if last := binary.LittleEndian.Uint64(body[len(body)-8:]); last>>tail != 0 {
			return fmt.Errorf("%w: %s: bits set beyond bit %d", ErrCorrupt, what, m)
		}
	}
	f := bloom.New(uint(m), uint(k))
	words := f.BitSet().Words()
	for i := range words {
		words[i] = binary.LittleEndian.Uint64(body[8*i:])
	}
	b.f = f
	return nil
}
