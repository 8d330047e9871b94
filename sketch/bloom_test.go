package sketch_test

import (
	"errors"
	"math"
	"testing"

	"github.com/acktor/acktor/sketch"
)

func TestNewBloomArguments(t *testing.T) {
	for _, tc := range []struct {
		expected uint
		fpRate   float64
		ok       bool
	}{
		{1000, 0.01, true},
		{1, 0.5, true},
		{0, 0.01, false},
		{1000, 0, false},
		{1000, 1, false},
		{1000, -0.1, false},
		{1000, math.NaN(), false},
		{1 << 40, 0.01, false}, // more than MaxBloomBits
	} {
		b, err := sketch.NewBloom(tc.expected, tc.fpRate)
		if tc.ok != (err == nil) || err != nil && !errors.Is(err, sketch.ErrArgument) {
			t.Errorf("NewBloom(%d, %v) error = %v, want ok %t", tc.expected, tc.fpRate, err, tc.ok)
		}
		if err == nil && (b.Bits() == 0 || b.Hashes() == 0) {
			t.Errorf("NewBloom(%d, %v): %d bits, %d hashes", tc.expected, tc.fpRate, b.Bits(), b.Hashes())
		}
	}
}

func bloomOf(t testing.TB, expected uint, fpRate float64, from, to uint64) *sketch.Bloom {
	b := must(sketch.NewBloom(expected, fpRate))
	for i := from; i < to; i++ {
		b.Add(key(i))
	}
	return b
}

// No false negatives, and the false positive rate near the target when the
// filter holds the expected number of keys.
func TestBloomRates(t *testing.T) {
	for _, tc := range []struct {
		expected uint
		fpRate   float64
	}{{10000, 0.01}, {10000, 0.001}, {1000, 0.1}} {
		const probes = 200000
		b := bloomOf(t, tc.expected, tc.fpRate, 0, uint64(tc.expected))
		for i := range uint64(tc.expected) {
			if !b.Test(key(i)) {
				t.Fatalf("false negative for key %d", i)
			}
		}
		fp := 0
		for i := range uint64(probes) {
			if b.Test(key(1<<40 + i)) {
				fp++
			}
		}
		rate := float64(fp) / probes
		t.Logf("n %d, target %v: %d bits, %d hashes, false positive rate %.5f", tc.expected, tc.fpRate, b.Bits(), b.Hashes(), rate)
		if rate < tc.fpRate*0.7 || rate > tc.fpRate*1.3 {
			t.Errorf("n %d, target %v: false positive rate %.5f", tc.expected, tc.fpRate, rate)
		}
	}
}

func TestBloomMerge(t *testing.T) {
	a, b := bloomOf(t, 1000, 0.01, 0, 500), bloomOf(t, 1000, 0.01, 500, 1000)
	if err := a.Merge(b); err != nil {
		t.Fatal(err)
	}
	if !sameEncoding(t, a, bloomOf(t, 1000, 0.01, 0, 1000)) {
		t.Error("merged filter differs from the filter of the union")
	}
	otherK := new(sketch.Bloom) // same bits, one hash fewer
	data := mustMarshal(t, a)
	data[12]--
	if err := otherK.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	for _, o := range []*sketch.Bloom{nil, new(sketch.Bloom), must(sketch.NewBloom(1001, 0.01)), otherK} {
		if err := a.Merge(o); !errors.Is(err, sketch.ErrMismatch) {
			t.Errorf("Merge error = %v, want ErrMismatch", err)
		} else {
			t.Log(err)
		}
	}
}

func TestBloomRoundTrip(t *testing.T) {
	for _, n := range []uint{1, 63, 64, 1000} { // m%64 ≠ 0 and = 0
		b := bloomOf(t, n, 0.01, 0, uint64(n))
		var back sketch.Bloom
		if err := back.UnmarshalBinary(mustMarshal(t, b)); err != nil {
			t.Fatalf("n %d: %v", n, err)
		}
		if !sameEncoding(t, b, &back) || back.Bits() != b.Bits() || back.Hashes() != b.Hashes() || !back.Test(key(0)) {
			t.Errorf("n %d: round trip changed the filter", n)
		}
	}
	var zero sketch.Bloom
	zero.Add([]byte("a"))
	if zero.Test([]byte("a")) || zero.Bits() != 0 {
		t.Error("the zero value holds a key")
	}
	if _, err := zero.MarshalBinary(); err == nil {
		t.Error("the zero value marshalled")
	}
}

func TestBloomUnmarshalRejects(t *testing.T) {
	good := mustMarshal(t, bloomOf(t, 10, 0.01, 0, 10)) // m = 96: a partial last word
	edit := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"bad magic", edit(func(b []byte) { b[1] = 'X' })},
		{"cut header", good[:10]},
		{"zero bits", edit(func(b []byte) { clear(b[4:12]) })},
		{"huge bits", edit(func(b []byte) { b[11] = 0xff })},
		{"zero hashes", edit(func(b []byte) { clear(b[12:20]) })},
		{"many hashes", edit(func(b []byte) { b[19] = 1 })},
		{"cut bits", good[:len(good)-1]},
		{"bit beyond m", edit(func(b []byte) { b[len(b)-1] |= 0x80 })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b sketch.Bloom
			err := b.UnmarshalBinary(tc.data)
			if !errors.Is(err, sketch.ErrCorrupt) {
				t.Fatalf("error = %v, want ErrCorrupt", err)
			}
			t.Log(err)
		})
	}
}

func TestBloomReset(t *testing.T) {
	b, err := sketch.NewBloom(100, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	b.Add([]byte("a"))
	bits := b.Bits()
	b.Reset()
	if b.Test([]byte("a")) || b.Bits() != bits {
		t.Fatalf("after Reset: has a %v, %d bits (was %d)", b.Test([]byte("a")), b.Bits(), bits)
	}
	var zero sketch.Bloom
	zero.Reset() // no panic
}
