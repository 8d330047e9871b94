package sketch_test

import (
	"math"
	"testing"

	"github.com/acktor/acktor/sketch"
)

// The tests in this file check the claims of the speed-layer paper
// (Grigoriev and Ermakov, "Query processing in a lambda-architecture system
// at the speed layer") about the Count-Min sketch, each citing
// its formula, in the style of etcd raft's paper tests.

// "Let n = w·d + 1 and d = 8. Then from (6) we get p = 0.997."
// Reference: formulas (5) and (6).
func TestPaperInexactShareAtWD(t *testing.T) {
	const d = 8
	for _, w := range []int{128, 256, 1024, 2719} {
		n := w*d + 1
		p := sketch.InexactShare(n, w, d)
		approx := math.Exp(-d * math.Exp(-float64(n-1)/float64(w))) // (6)
		if math.Abs(p-0.997) > 0.0005 || math.Abs(p-approx) > 0.0005 {
			t.Errorf("w %d: InexactShare(%d, %d, %d) = %.5f, (6) gives %.5f, the paper 0.997", w, n, w, d, p, approx)
		}
	}
	for _, tc := range []struct {
		n, w, d int
		want    float64
	}{
		{1, 64, 8, 0},    // a lone key is exact
		{0, 64, 8, 0},    // no keys at all
		{2, 1, 3, 1},     // one column: always shared
		{100, 1e9, 1, 0}, // (almost) no collisions
	} {
		if got := sketch.InexactShare(tc.n, tc.w, tc.d); math.Abs(got-tc.want) > 1e-6 {
			t.Errorf("InexactShare(%d, %d, %d) = %v, want %v", tc.n, tc.w, tc.d, got, tc.want)
		}
	}
	if !math.IsNaN(sketch.InexactShare(10, 0, 1)) || !math.IsNaN(sketch.InexactShare(10, 1, 0)) {
		t.Error("InexactShare accepts w < 1 or d < 1")
	}
}

// Formula (5) against a simulation: n keys counted once each in a w×d
// sketch; the measured share of keys whose estimate is not exact must match
// (5) for plain update, and can only be lower with conservative update (an
// estimate exact without it stays exact with it, checked key by key).
// Reference: formula (5).
func TestPaperInexactShareSimulated(t *testing.T) {
	const w, d = 64, 8
	for _, n := range []int{64, 128, 256, w * d, w*d + 1, 2 * w * d} {
		var plainInexact, cuInexact, all int
		for trial := uint64(0); all < 40000; trial++ {
			plain := must(sketch.NewCountMin(w, d, sketch.WithSeed(trial)))
			cu := must(sketch.NewCountMin(w, d, sketch.WithSeed(trial), sketch.WithConservativeUpdate()))
			for i := range uint64(n) {
				plain.Add(key(trial<<32|i), 1)
				cu.Add(key(trial<<32|i), 1)
			}
			for i := range uint64(n) {
				p, c := plain.Estimate(key(trial<<32|i)) != 1, cu.Estimate(key(trial<<32|i)) != 1
				if c && !p {
					t.Fatalf("n %d trial %d key %d: exact with plain update, not with conservative", n, trial, i)
				}
				plainInexact += b2i(p)
				cuInexact += b2i(c)
				all++
			}
		}
		want := sketch.InexactShare(n, w, d)
		plain, cu := float64(plainInexact)/float64(all), float64(cuInexact)/float64(all)
		t.Logf("n %4d = %.2f·w·d: formula (5) %.4f, plain %.4f, conservative %.4f", n, float64(n)/(w*d), want, plain, cu)
		if math.Abs(plain-want) > 0.02 {
			t.Errorf("n %d: measured inexact share %.4f, formula (5) %.4f", n, plain, want)
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Formula (8), (a* − a)/a = (n/w)·(mean/a) − 1, against a simulation with
// counts 1 to 10 (mean 5.5) and n = 32·w. For one row the expected error is
// (n/w)·(mean/a) − 1/w, within a few percent of (8); the minimum over d = 8
// rows is lower, by the spread of a counter's load, but (8) still gives its
// size: "hundreds of percent" for keys at or below the mean.
// Reference: formulas (7) and (8).
func TestPaperRelativeErrorSimulated(t *testing.T) {
	const w, ratio = 256, 32
	n := w * ratio
	for _, tc := range []struct {
		depth    int
		min, max float64 // measured / formula (8)
	}{
		{1, 0.97, 1.08},
		{8, 0.6, 1.0},
	} {
		var sum [11]float64 // relative error summed by true count
		var keys [11]int
		for trial := range uint64(4) {
			s := must(sketch.NewCountMin(w, tc.depth, sketch.WithSeed(trial)))
			count := func(i uint64) uint64 { return 1 + (i*7+trial)%10 }
			for i := range uint64(n) {
				s.Add(key(trial<<32|i), count(i))
			}
			for i := range uint64(n) {
				a := count(i)
				sum[a] += float64(s.Estimate(key(trial<<32|i))-a) / float64(a)
				keys[a]++
			}
		}
		for _, a := range []int{1, 3, 5, 10} {
			measured := sum[a] / float64(keys[a])
			formula := sketch.RelativeError(n, w, 5.5, float64(a))
			t.Logf("d %d, a %2d: formula (8) %6.1f%%, measured %6.1f%%", tc.depth, a, 100*formula, 100*measured)
			if r := measured / formula; r < tc.min || r > tc.max {
				t.Errorf("d %d, a %d: measured %.3f is %.2f× formula (8) %.3f, want [%v, %v]", tc.depth, a, measured, r, formula, tc.min, tc.max)
			}
		}
	}
	for _, bad := range [][4]float64{{10, 0, 1, 1}, {-1, 10, 1, 1}, {10, 10, -1, 1}, {10, 10, 1, 0}, {10, 10, math.NaN(), 1}} {
		if got := sketch.RelativeError(int(bad[0]), int(bad[1]), bad[2], bad[3]); !math.IsNaN(got) {
			t.Errorf("RelativeError%v = %v, want NaN", bad, got)
		}
	}
}
