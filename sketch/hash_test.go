package sketch

import (
	"math"
	"testing"
)

// xxh64 is XXH64: xxh64Core followed by the avalanche it leaves out.
func xxh64(b []byte, seed uint64) uint64 {
	h := xxh64Core(b, seed)
	h ^= h >> 33
	h *= prime2
	h ^= h >> 29
	h *= prime3
	return h ^ h>>32
}

// The reference XXH64 values (seed 0) from github.com/Cyan4973/xxHash; the
// lengths cover every tail path (bytes, 4-byte and 8-byte words, the 32-byte
// stripes).
func TestXXH64(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
	}{
		{"", 0xef46db3751d8e999},
		{"a", 0xd24ec4f1a98c6e5b},
		{"abc", 0x44bc2cf5ad770999},
		{"message digest", 0x066ed728fceeb3be},
		{"abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ", 0xd5000c4ac53d14a0},
	} {
		if got := xxh64([]byte(tc.in), 0); got != tc.want {
			t.Errorf("xxh64(%q) = %#x, want %#x", tc.in, got, tc.want)
		}
	}
	if xxh64([]byte("abc"), 1) == xxh64([]byte("abc"), 0) {
		t.Error("the seed does not change the hash")
	}
}

func TestAddSat(t *testing.T) {
	for _, tc := range []struct{ a, b, want uint64 }{
		{1, 2, 3},
		{math.MaxUint64 - 1, 1, math.MaxUint64},
		{math.MaxUint64 - 1, 2, math.MaxUint64},
		{math.MaxUint64, math.MaxUint64, math.MaxUint64},
	} {
		if got := addSat(tc.a, tc.b); got != tc.want {
			t.Errorf("addSat(%d, %d) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

// Row hashes must map into [0, w) for widths that are not powers of two and
// use every column about equally.
func TestCountMinColumnsUniform(t *testing.T) {
	for _, w := range []int{1, 3, 100, 2719} {
		s, err := NewCountMin(w, 2)
		if err != nil {
			t.Fatal(err)
		}
		const perColumn = 200
		hits := make([]int, w)
		for i := range uint64(w * perColumn) {
			x := xxh64Core(key(i), 0)
			hits[s.rows[1].column(x&0xffffffff, x>>32, uint64(w))]++
		}
		// Chi-square with w−1 degrees of freedom: mean w−1, sd √(2(w−1)).
		var chi2 float64
		for _, h := range hits {
			d := float64(h - perColumn)
			chi2 += d * d / perColumn
		}
		if limit := float64(w-1) + 5*math.Sqrt(2*float64(w-1)) + 1; chi2 > limit {
			t.Errorf("width %d: chi-square %.0f > %.0f", w, chi2, limit)
		}
	}
}

func key(i uint64) []byte {
	b := make([]byte, 8)
	for j := range b {
		b[j] = byte(i >> (8 * j))
	}
	return b
}
