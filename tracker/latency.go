package tracker

import (
	"math/bits"
	"time"
)

// latencyBuckets is the size of a latency histogram: exact below 4 µs,
// then four buckets per power of two (at most 25 % wide) up to 2^32 µs
// (71 minutes); longer times land in the last bucket.
const latencyBuckets = 4 + 4*30

// Latency counts complete latencies (a root's emission to its tree's
// completion) in log-linear buckets of microseconds: fixed size, mergeable
// by adding, cheap to ship in every task report.
type Latency [latencyBuckets]uint64

// latencyBucket is the bucket of d.
func latencyBucket(d time.Duration) int {
	us := uint64(max(d, 0) / time.Microsecond)
	if us < 4 {
		return int(us)
	}
	oct := bits.Len64(us) - 1 // >= 2
	sub := int(us>>(oct-2)) & 3
	return min(4+(oct-2)*4+sub, latencyBuckets-1)
}

// latencyUpper is the upper bound of bucket i, exclusive.
func latencyUpper(i int) time.Duration {
	if i < 4 {
		return time.Duration(i+1) * time.Microsecond
	}
	oct, sub := (i-4)/4+2, (i-4)%4
	return time.Duration(uint64(5+sub)<<(oct-2)) * time.Microsecond
}

// Record counts latency d.
func (h *Latency) Record(d time.Duration) { h[latencyBucket(d)]++ }

// LatencyBucket is a bucket of a Prometheus-style histogram of complete
// latencies: how many were at most Upper.
type LatencyBucket struct {
	Upper      time.Duration
	Cumulative uint64
}

// Buckets is h as cumulative buckets at every power of two of
// microseconds, from 8 µs (where the log-linear buckets align), and the
// count of all. A bucket counts latencies below its bound (a latency of
// exactly 8 µs is in the next), and the last one holds every latency past
// 2^32 µs as well, so it has no finite bound: only the count covers it.
func (h *Latency) Buckets() (out []LatencyBucket, count uint64) {
	for i, c := range h {
		count += c
		if i >= 4 && (i-4)%4 == 3 && i < len(h)-1 {
			out = append(out, LatencyBucket{Upper: latencyUpper(i), Cumulative: count})
		}
	}
	return out, count
}

// Add counts the latencies of another histogram's counts.
func (h *Latency) Add(counts []uint64) {
	for i, n := range counts[:min(len(counts), latencyBuckets)] {
		h[i] += n
	}
}

// Quantile is the upper bound of the bucket holding the q-quantile, or 0
// for an empty histogram: within 25 % (1 µs below 4 µs) above the truth.
func (h *Latency) Quantile(q float64) time.Duration {
	var n uint64
	for _, c := range h {
		n += c
	}
	if n == 0 {
		return 0
	}
	rank := uint64(q*float64(n-1)) + 1 // the rank-th smallest, 1-based
	var seen uint64
	for i, c := range h {
		seen += c
		if seen >= rank {
			return latencyUpper(i)
		}
	}
	return latencyUpper(latencyBuckets - 1)
}
