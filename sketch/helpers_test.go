package sketch_test

import (
	"bytes"
	"encoding"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// key returns the i-th distinct test key, 8 bytes.
func key(i uint64) []byte { return binary.LittleEndian.AppendUint64(nil, i) }

type item struct {
	key   []byte
	count uint64
}

// stream returns updates for n distinct keys, each appearing 1 to 3 times
// with a count drawn from a Zipf law (s = 1.1, at most maxCount), in a
// shuffled order, and the exact total per key. It is a pure function of seed.
func stream(seed uint64, n int, maxCount uint64) ([]item, map[string]uint64) {
	r := rand.New(rand.NewPCG(seed, 0x5ce7c4))
	z := rand.NewZipf(rand.New(rand.NewPCG(seed, 1)), 1.1, 1, maxCount-1)
	var s []item
	exact := make(map[string]uint64, n)
	for i := range uint64(n) {
		k := key(seed<<32 | i)
		for range 1 + r.IntN(3) {
			c := z.Uint64() + 1
			s = append(s, item{k, c})
			exact[string(k)] += c
		}
	}
	r.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	return s, exact
}

func mustMarshal(t testing.TB, m encoding.BinaryMarshaler) []byte {
	t.Helper()
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatalf("MarshalBinary: %v", err)
	}
	return b
}

// sameEncoding reports whether a and b marshal to the same bytes: for the
// types of this package that means equal state.
func sameEncoding(t testing.TB, a, b encoding.BinaryMarshaler) bool {
	t.Helper()
	return bytes.Equal(mustMarshal(t, a), mustMarshal(t, b))
}
