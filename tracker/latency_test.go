package tracker

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestLatencyBuckets(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{
		{-time.Second, 0}, {0, 0}, {999 * time.Nanosecond, 0}, {time.Microsecond, 1}, {3 * time.Microsecond, 3},
		{4 * time.Microsecond, 4}, {5 * time.Microsecond, 5}, {7 * time.Microsecond, 7}, {8 * time.Microsecond, 8},
		{9 * time.Microsecond, 8}, {10 * time.Microsecond, 9}, {time.Hour * 1000, latencyBuckets - 1},
	} {
		if got := latencyBucket(tc.d); got != tc.want {
			t.Errorf("bucket(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

// TestLatencyBucketsProperty: every duration falls into a bucket whose
// bounds hold it, and the buckets' bounds are increasing.
func TestLatencyBucketsProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		d := time.Duration(rng.Int64N(int64(time.Hour)))
		i := latencyBucket(d)
		lo := time.Duration(0)
		if i > 0 {
			lo = latencyUpper(i - 1)
		}
		if us := d.Truncate(time.Microsecond); us < lo || us >= latencyUpper(i) {
			t.Fatalf("%v in bucket %d, bounds [%v, %v)", d, i, lo, latencyUpper(i))
		}
	}
	for i := 1; i < latencyBuckets; i++ {
		if latencyUpper(i) <= latencyUpper(i-1) {
			t.Fatalf("bucket %d ends at %v, before bucket %d at %v", i, latencyUpper(i), i-1, latencyUpper(i-1))
		}
	}
}

// TestLatencyQuantiles: against the exact quantiles of a log-normal sample,
// the histogram's are never below and within a bucket's width above;
// merged histograms give the quantiles of the union.
func TestLatencyQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var a, b Latency
	var all []time.Duration
	for i := range 50_000 {
		d := time.Duration(float64(time.Millisecond) * rng.ExpFloat64() * rng.ExpFloat64())
		all = append(all, d)
		if i%2 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
	}
	a.Add(b[:])
	slices.Sort(all)
	for _, q := range []float64{0, 0.5, 0.9, 0.99, 1} {
		exact := all[int(q*float64(len(all)-1))].Truncate(time.Microsecond)
		got := a.Quantile(q)
		if got <= exact || float64(got) > float64(exact)*1.26+float64(time.Microsecond) {
			t.Errorf("q%.2f = %v, exact %v", q, got, exact)
		}
	}
	var empty Latency
	if empty.Quantile(0.5) != 0 {
		t.Fatal("empty histogram has a median")
	}
}

// TestLatencyPrometheusBuckets: the Prometheus buckets are cumulative at powers of
// two of microseconds; a latency past the last bound counts in no finite
// bucket, only in the count.
func TestLatencyPrometheusBuckets(t *testing.T) {
	var h Latency
	for _, d := range []time.Duration{5 * time.Microsecond, 7 * time.Microsecond, 12 * time.Microsecond, 100 * time.Hour} {
		h.Record(d)
	}
	b, count := h.Buckets()
	if count != 4 || len(b) == 0 || b[0].Upper != 8*time.Microsecond || b[0].Cumulative != 2 || b[1].Upper != 16*time.Microsecond || b[1].Cumulative != 3 {
		t.Fatalf("buckets %v, count %d", b[:min(2, len(b))], count)
	}
	last := b[len(b)-1]
	if last.Cumulative != 3 || last.Upper >= 100*time.Hour {
		t.Fatalf("last finite bucket %+v: the 100 h latency must be in none", last)
	}
	for i := 1; i < len(b); i++ {
		if b[i].Upper != 2*b[i-1].Upper || b[i].Cumulative < b[i-1].Cumulative {
			t.Fatalf("bucket %d: %+v after %+v", i, b[i], b[i-1])
		}
	}
}
