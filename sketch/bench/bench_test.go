package bench

import (
	"math/rand/v2"
	"testing"

	"github.com/axiomhq/hyperloglog"
	"github.com/bits-and-blooms/bloom/v3"
	boom "github.com/tylertreat/BoomFilters"

	"github.com/acktor/acktor/sketch"
)

const (
	nKeys = 1 << 20
	eps   = 0.001 // Count-Min: 2719 columns
	delta = 0.01  // and 5 rows, in both libraries
)

// keys holds nKeys random 8-byte keys back to back.
var keys = func() []byte {
	b := make([]byte, 8*nKeys)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}()

func key(i int) []byte {
	i &= nKeys - 1
	return keys[8*i : 8*i+8 : 8*i+8]
}

func BenchmarkCountMinAdd(b *testing.B) {
	ours := func(opts ...sketch.CountMinOption) func(*testing.B) {
		return func(b *testing.B) {
			s, err := sketch.NewCountMinWithEstimates(eps, delta, opts...)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				s.Add(key(i), 1)
			}
		}
	}
	b.Run("acktor", ours())
	b.Run("acktor-conservative", ours(sketch.WithConservativeUpdate()))
	b.Run("boomfilters", func(b *testing.B) {
		s := boom.NewCountMinSketch(eps, delta)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			s.Add(key(i))
		}
	})
}

func BenchmarkCountMinEstimate(b *testing.B) {
	b.Run("acktor", func(b *testing.B) {
		s, err := sketch.NewCountMinWithEstimates(eps, delta)
		if err != nil {
			b.Fatal(err)
		}
		for i := range nKeys {
			s.Add(key(i), 1)
		}
		b.ReportAllocs()
		var sum uint64
		for i := 0; b.Loop(); i++ {
			sum += s.Estimate(key(i))
		}
		_ = sum
	})
	b.Run("boomfilters", func(b *testing.B) {
		s := boom.NewCountMinSketch(eps, delta)
		for i := range nKeys {
			s.Add(key(i))
		}
		b.ReportAllocs()
		var sum uint64
		for i := 0; b.Loop(); i++ {
			sum += s.Count(key(i))
		}
		_ = sum
	})
}

// BenchmarkVector measures the paper's exact alternative on the same keys,
// once all of them have columns.
func BenchmarkVector(b *testing.B) {
	v := sketch.NewVector()
	for i := range nKeys {
		v.Add(key(i), 1)
	}
	b.Run("Add", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			v.Add(key(i), 1)
		}
	})
	b.Run("Estimate", func(b *testing.B) {
		b.ReportAllocs()
		var sum uint64
		for i := 0; b.Loop(); i++ {
			sum += v.Estimate(key(i))
		}
		_ = sum
	})
}

// Both HyperLogLogs are precision 14 and filled with every key first, so
// they measure the dense representation.
func BenchmarkHyperLogLogAdd(b *testing.B) {
	b.Run("wrapper", func(b *testing.B) {
		h, err := sketch.NewHyperLogLog(14)
		if err != nil {
			b.Fatal(err)
		}
		for i := range nKeys {
			h.Add(key(i))
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			h.Add(key(i))
		}
	})
	b.Run("axiomhq", func(b *testing.B) {
		h, err := hyperloglog.NewSketch(14, true)
		if err != nil {
			b.Fatal(err)
		}
		for i := range nKeys {
			h.Insert(key(i))
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			h.Insert(key(i))
		}
	})
}

// Both Bloom filters are sized for all the keys at 1%.
func BenchmarkBloomAdd(b *testing.B) {
	b.Run("wrapper", func(b *testing.B) {
		f, err := sketch.NewBloom(nKeys, 0.01)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			f.Add(key(i))
		}
	})
	b.Run("bloom", func(b *testing.B) {
		f := bloom.NewWithEstimates(nKeys, 0.01)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			f.Add(key(i))
		}
	})
}

func BenchmarkBloomTest(b *testing.B) {
	b.Run("wrapper", func(b *testing.B) {
		f, err := sketch.NewBloom(nKeys, 0.01)
		if err != nil {
			b.Fatal(err)
		}
		for i := range nKeys {
			f.Add(key(i))
		}
		b.ReportAllocs()
		n := 0
		for i := 0; b.Loop(); i++ {
			if f.Test(key(i)) {
				n++
			}
		}
		_ = n
	})
	b.Run("bloom", func(b *testing.B) {
		f := bloom.NewWithEstimates(nKeys, 0.01)
		for i := range nKeys {
			f.Add(key(i))
		}
		b.ReportAllocs()
		n := 0
		for i := 0; b.Loop(); i++ {
			if f.Test(key(i)) {
				n++
			}
		}
		_ = n
	})
}
