package ring

import (
	"fmt"
	"slices"
	"testing"
)

// BenchmarkLocate is one root's lookup: Ring.Locate (a binary search over
// the running points) and Table.Owner (the bucket index the runtime uses).
func BenchmarkLocate(b *testing.B) {
	for _, ackers := range []int{6, 64} {
		r := running(b, DefaultReplicas, ackerNames(ackers)...)
		ids := springIDs(1<<12, 1)
		b.Run(fmt.Sprintf("ring/ackers=%d", ackers), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				r.Locate(ids[i&(len(ids)-1)])
				i++
			}
		})
		tab := r.Table()
		b.Run(fmt.Sprintf("table/ackers=%d", ackers), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				tab.Owner(ids[i&(len(ids)-1)])
				i++
			}
		})
	}
}

// BenchmarkBalance is the paper's experiment 3 (§4.3, figure 4(c)): six
// ackers, 100k, 200k and 300k acktor-shaped roots, and the largest acker's
// load over the mean ("max/mean", 1 is perfect) for several points per
// acker. replicas=2 is the paper's own example of two locations per acker.
// An op is placing every root once.
func BenchmarkBalance(b *testing.B) {
	replicas := []int{2, 16, 64, 160, DefaultReplicas}
	slices.Sort(replicas)
	replicas = slices.Compact(replicas)
	for _, n := range replicas {
		r := running(b, n, ackerNames(6)...)
		for _, roots := range []int{100_000, 200_000, 300_000} {
			springs := springIDs(roots, 1)
			b.Run(fmt.Sprintf("replicas=%d/roots=%d", n, roots), func(b *testing.B) {
				var spread float64
				for b.Loop() {
					spread = maxOverMean(r, springs)
				}
				b.ReportMetric(spread, "max/mean")
			})
		}
	}
}
