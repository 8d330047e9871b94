package sketch_test

import (
	"errors"
	"math"
	"testing"

	"github.com/acktor/acktor/sketch"
)

func TestNewHyperLogLogArguments(t *testing.T) {
	for p := range uint8(20) {
		_, err := sketch.NewHyperLogLog(p)
		ok := p >= sketch.MinHyperLogLogPrecision && p <= sketch.MaxHyperLogLogPrecision
		if ok != (err == nil) || err != nil && !errors.Is(err, sketch.ErrArgument) {
			t.Errorf("NewHyperLogLog(%d) error = %v, want ok %t", p, err, ok)
		}
	}
}

// hllOf returns a sketch of keys [from, to), each added twice.
func hllOf(t testing.TB, p uint8, from, to uint64) *sketch.HyperLogLog {
	h := must(sketch.NewHyperLogLog(p))
	for range 2 {
		for i := from; i < to; i++ {
			h.Add(key(i))
		}
	}
	return h
}

// Count is within 3 standard errors (1.04/√m) of the true number of
// distinct keys, in the sparse and the dense representation.
func TestHyperLogLogAccuracy(t *testing.T) {
	for _, p := range []uint8{10, 14} {
		for _, n := range []uint64{10, 1000, 20000, 300000} {
			got := hllOf(t, p, 1<<40, 1<<40+n).Count()
			rel := (float64(got) - float64(n)) / float64(n)
			se := 1.04 / math.Sqrt(float64(uint64(1)<<p))
			t.Logf("p %d, n %6d: count %6d, error %+.3f%% (3 SE %.2f%%)", p, n, got, 100*rel, 300*se)
			if math.Abs(rel) > 3*se {
				t.Errorf("p %d, n %d: count %d, off by %.2f standard errors", p, n, got, math.Abs(rel)/se)
			}
		}
	}
}

// Merging the sketches of two overlapping sets gives the count of the
// sketch of their union, in every combination of representations.
func TestHyperLogLogMerge(t *testing.T) {
	for _, tc := range []struct{ a, b uint64 }{{100, 100}, {100, 50000}, {50000, 100}, {50000, 60000}} {
		a, b := hllOf(t, 12, 0, tc.a), hllOf(t, 12, tc.a/2, tc.a/2+tc.b)
		union := hllOf(t, 12, 0, max(tc.a, tc.a/2+tc.b))
		if err := a.Merge(b); err != nil {
			t.Fatal(err)
		}
		if a.Count() != union.Count() {
			t.Errorf("%d ∪ %d: merged count %d, union %d", tc.a, tc.b, a.Count(), union.Count())
		}
	}
	a := must(sketch.NewHyperLogLog(12))
	for _, o := range []*sketch.HyperLogLog{nil, must(sketch.NewHyperLogLog(13)), new(sketch.HyperLogLog)} {
		if err := a.Merge(o); !errors.Is(err, sketch.ErrMismatch) {
			t.Errorf("Merge error = %v, want ErrMismatch", err)
		}
	}
}

func TestHyperLogLogRoundTrip(t *testing.T) {
	for _, n := range []uint64{0, 30, 5000, 100000} { // empty, sparse, dense
		h := hllOf(t, 14, 0, n)
		data := mustMarshal(t, h)
		var back sketch.HyperLogLog
		if err := back.UnmarshalBinary(data); err != nil {
			t.Fatalf("n %d: %v", n, err)
		}
		data[len(data)-1] ^= 0xff // the decoded sketch must not share the input
		if back.Count() != h.Count() || back.Precision() != 14 || !sameEncoding(t, h, &back) {
			t.Errorf("n %d: round trip changed the sketch: count %d, want %d", n, back.Count(), h.Count())
		}
	}
	var zero sketch.HyperLogLog
	zero.Add([]byte("a"))
	if zero.Count() != 0 {
		t.Error("the zero value counted a key")
	}
	if _, err := zero.MarshalBinary(); err == nil {
		t.Error("the zero value marshalled")
	}
}

func TestHyperLogLogUnmarshalRejects(t *testing.T) {
	sparse, dense := mustMarshal(t, hllOf(t, 8, 0, 5)), mustMarshal(t, hllOf(t, 8, 0, 3000))
	edit := func(src []byte, f func(b []byte)) []byte {
		b := append([]byte(nil), src...)
		f(b)
		return b
	}
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"header only", dense[:4]},
		{"library header cut", dense[:9]},
		{"library version", edit(dense, func(b []byte) { b[4] = 1 })},
		{"precision", edit(dense, func(b []byte) { b[5] = 19 })},
		{"register base", edit(dense, func(b []byte) { b[6] = 1 })},
		{"sparse flag", edit(dense, func(b []byte) { b[7] = 2 })},
		{"dense cut", dense[:len(dense)-1]},
		{"register too large", edit(dense, func(b []byte) { b[len(b)-1] = 58 })},
		{"sparse cut", sparse[:len(sparse)-1]},
		{"sparse set entry", edit(sparse, func(b []byte) { b[12], b[13], b[14], b[15] = 0xff, 0xff, 0xff, 0xfe })},
		{"sparse set count", edit(sparse, func(b []byte) { b[8] = 0x7f })},
		{"trailing byte", append(append([]byte(nil), sparse...), 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h sketch.HyperLogLog
			err := h.UnmarshalBinary(tc.data)
			if !errors.Is(err, sketch.ErrCorrupt) {
				t.Fatalf("error = %v, want ErrCorrupt", err)
			}
			t.Log(err)
		})
	}
}

func TestHyperLogLogReset(t *testing.T) {
	h, err := sketch.NewHyperLogLog(12)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		h.Add([]byte{byte(i), byte(i >> 8)})
	}
	h.Reset()
	if h.Count() != 0 || h.Precision() != 12 {
		t.Fatalf("after Reset: count %d, precision %d", h.Count(), h.Precision())
	}
	h.Add([]byte("a"))
	if h.Count() != 1 {
		t.Fatalf("count %d after one key", h.Count())
	}
	var zero sketch.HyperLogLog
	zero.Reset() // no panic
}
