package sketch

import (
	"encoding/binary"
	"math/bits"

	"github.com/acktor/acktor/internal/mix"
)

// XXH64 primes (github.com/Cyan4973/xxHash, xxhash_spec.md).
const (
	prime1 uint64 = 0x9E3779B185EBCA87
	prime2 uint64 = 0xC2B2AE3D27D4EB4F
	prime3 uint64 = 0x165667B19E3779F9
	prime4 uint64 = 0x85EBCA77C2B2AE63
	prime5 uint64 = 0x27D4EB2F165667C5
)

// xxh64Core is XXH64 of b with the given seed without its final avalanche
// (the xor-shifts and two multiplications that hash_test.go adds back to
// check it against the reference vectors). Count-Min needs of its key
// hash only that distinct keys rarely collide — the row hashes supply the
// randomness — and the avalanche, a bijection, cannot change collisions, so
// it is left out: two multiplications fewer per key. It is written out so
// that Count-Min hashes the same on every machine and in every process
// (hash/maphash cannot take a fixed seed, so its values cannot be stored).
func xxh64Core(b []byte, seed uint64) uint64 {
	n := len(b)
	var h uint64
	if n >= 32 {
		v1, v2, v3, v4 := seed+prime1+prime2, seed+prime2, seed, seed-prime1
		for ; len(b) >= 32; b = b[32:] {
			v1 = xxRound(v1, binary.LittleEndian.Uint64(b[0:8]))
			v2 = xxRound(v2, binary.LittleEndian.Uint64(b[8:16]))
			v3 = xxRound(v3, binary.LittleEndian.Uint64(b[16:24]))
			v4 = xxRound(v4, binary.LittleEndian.Uint64(b[24:32]))
		}
		h = bits.RotateLeft64(v1, 1) + bits.RotateLeft64(v2, 7) +
			bits.RotateLeft64(v3, 12) + bits.RotateLeft64(v4, 18)
		h = xxMerge(h, v1)
		h = xxMerge(h, v2)
		h = xxMerge(h, v3)
		h = xxMerge(h, v4)
	} else {
		h = seed + prime5
	}
	h += uint64(n)
	for ; len(b) >= 8; b = b[8:] {
		h ^= xxRound(0, binary.LittleEndian.Uint64(b[:8]))
		h = bits.RotateLeft64(h, 27)*prime1 + prime4
	}
	if len(b) >= 4 {
		h ^= uint64(binary.LittleEndian.Uint32(b[:4])) * prime1
		h = bits.RotateLeft64(h, 23)*prime2 + prime3
		b = b[4:]
	}
	for _, c := range b {
		h ^= uint64(c) * prime5
		h = bits.RotateLeft64(h, 11) * prime1
	}
	return h
}

func xxRound(acc, in uint64) uint64 {
	return bits.RotateLeft64(acc+in*prime2, 31) * prime1
}

func xxMerge(acc, v uint64) uint64 {
	return (acc^xxRound(0, v))*prime1 + prime4
}

// splitmix64 advances *state and returns the next value of Steele, Lea and
// Flood's SplitMix64 generator; it expands a seed into row parameters.
func splitmix64(state *uint64) uint64 {
	*state += mix.Golden
	return mix.Splitmix64(*state)
}

// addSat adds without wrapping: counters stick at math.MaxUint64.
func addSat(a, b uint64) uint64 {
	s, carry := bits.Add64(a, b, 0)
	return s | -carry // all ones on overflow, without a branch
}
