package mix

import "testing"

// The outputs are part of the protocol (the ring's keys, content ids): they
// must never change. Known values of SplitMix64 seeded with 0 and 1234567.
func TestSplitmix64(t *testing.T) {
	for _, c := range []struct{ seed, want uint64 }{
		{0, 0xe220a8397b1dcdaf},
		{1234567, 0x599ed017fb08fc85},
	} {
		if got := Splitmix64(c.seed + Golden); got != c.want {
			t.Errorf("first value of SplitMix64(%d) = %#x, want %#x", c.seed, got, c.want)
		}
	}
}
