package sketch_test

import (
	"bytes"
	"encoding"
	"testing"

	"github.com/acktor/acktor/sketch"
)

// fuzzUnmarshal feeds arbitrary bytes to a fresh value's UnmarshalBinary: it
// must not panic, and whatever it accepts must encode and decode back to the
// same bytes. The seeds are valid encodings and their truncations.
func fuzzUnmarshal[T any, P interface {
	*T
	encoding.BinaryMarshaler
	encoding.BinaryUnmarshaler
}](f *testing.F, valid ...encoding.BinaryMarshaler) {
	for _, v := range valid {
		data := mustMarshal(f, v)
		f.Add(data)
		for _, cut := range []int{1, 4, 8, len(data) / 2, len(data) - 1} {
			if cut < len(data) {
				f.Add(data[:cut])
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v T
		if P(&v).UnmarshalBinary(data) != nil {
			return
		}
		once := mustMarshal(t, P(&v))
		var w T
		if err := P(&w).UnmarshalBinary(once); err != nil {
			t.Fatalf("accepted input re-encodes to bytes it rejects: %v", err)
		}
		if !bytes.Equal(once, mustMarshal(t, P(&w))) {
			t.Fatal("encoding is not stable")
		}
	})
}

func FuzzCountMinUnmarshal(f *testing.F) {
	plain := must(sketch.NewCountMin(7, 2))
	cu := must(sketch.NewCountMin(3, 3, sketch.WithConservativeUpdate(), sketch.WithSeed(5)))
	for i := range uint64(20) {
		plain.Add(key(i), i)
		cu.Add(key(i), i)
	}
	fuzzUnmarshal[sketch.CountMin](f, plain, cu)
}

func FuzzHyperLogLogUnmarshal(f *testing.F) {
	fuzzUnmarshal[sketch.HyperLogLog](f, hllOf(f, 4, 0, 0), hllOf(f, 4, 0, 3), hllOf(f, 6, 0, 40), hllOf(f, 4, 0, 500))
}

func FuzzBloomUnmarshal(f *testing.F) {
	fuzzUnmarshal[sketch.Bloom](f, bloomOf(f, 5, 0.1, 0, 5), bloomOf(f, 64, 0.5, 0, 10))
}

func FuzzVectorUnmarshal(f *testing.F) {
	v := sketch.NewVector(sketch.WithMaxKeys(3))
	for i := range uint64(5) {
		v.Add(key(i%4), i+1)
	}
	fuzzUnmarshal[sketch.Vector](f, v, new(sketch.Vector))
}
