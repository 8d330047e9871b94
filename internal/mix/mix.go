// Package mix is the one definition of the 64-bit mixer the project hashes
// integers with: springIds onto the acker ring, content ids into the
// exactly-once table, seeds into sketch rows, identities onto members.
//
// Two structures that hash the same key must not share a hash: the acker's
// ledger, fed the springIds the ring gives it, keeps a mixer of its own.
package mix

// Golden is SplitMix64's increment, 2^64 divided by the golden ratio.
const Golden = 0x9e3779b97f4a7c15

// Splitmix64 is the finalizer of Steele, Lea and Flood's SplitMix64: a
// bijection of 64 bits in which every input bit reaches every output bit,
// so that sequential inputs come out spread.
func Splitmix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
