package sketch

import "math"

// This file holds the analysis of the Count-Min sketch in the speed-layer
// paper (Grigoriev and Ermakov, "Query processing in a lambda
// architecture system at the speed layer", BMSTU), formulas (5)–(8). The
// paper's argument: once the number n of distinct keys exceeds w·d, almost
// every estimate is wrong and light keys are overestimated by hundreds of
// percent, so the speed layer should keep exact vectors (Vector) instead.

// InexactShare returns the probability that the Count-Min estimate of a key
// i is not exact when n distinct keys share a sketch of width w and depth
// d: "the probability that ∀k ∃i₁ ≠ i: h_k(i₁) = h_k(i)", that in every row
// some other key shares the key's counter. The paper's formula (5):
//
//	p = (1 − (1 − 1/w)^(n−1))^d
//
// ("the expression in the outer parentheses is the quantifier ∃, the power
// d the quantifier ∀"). Using (1 − 1/x)^x ≈ 1/e twice — for x = w, "usually
// w > 128", and for x = e^((n−1)/w) ≫ 1, since n > w·d and d ≥ 8 — gives
// formula (6):
//
//	p ≈ exp(−d · e^(−(n−1)/w)),
//
// and "let n = w·d + 1 and d = 8; then (6) gives p = 0.997", that is, "for
// n > w·d and the typical w > 128, d ≥ 8 the estimate differs from the
// exact value with probability almost 1". InexactShare computes (5). It
// assumes fully random hashes and keys with positive counts; with
// conservative update the share can only be lower (an estimate exact without
// it stays exact with it). It returns 0 for n ≤ 1 and NaN for w < 1 or d < 1.
func InexactShare(n, w, d int) float64 {
	if w < 1 || d < 1 {
		return math.NaN()
	}
	if n <= 1 {
		return 0
	}
	alone := math.Exp(float64(n-1) * math.Log1p(-1/float64(w))) // (1 − 1/w)^(n−1)
	return math.Pow(1-alone, float64(d))
}

// RelativeError returns the paper's estimate of the relative error of the
// Count-Min estimate of a key whose true count is a, among n distinct keys
// with mean count mean in a sketch of width w. The d·Σaᵢ added to the
// counters spread evenly over w·d cells, Σaᵢ/w per cell, so an estimate is
// about n·mean/w (formula (7)) and its relative error is formula (8):
//
//	(a* − a)/a = (n/w)·(mean/a) − 1.
//
// Since n/w > d, it is hundreds of percent for keys at or below the mean.
// This is the load of an average counter: one row's expected relative
// error is slightly higher, (n/w)·(mean/a) − 1/w, because the key's own
// counter holds a for sure, while the minimum over d > 1 rows is lower;
// tests measure both. It returns NaN for w < 1, n < 0, mean < 0 or a ≤ 0.
func RelativeError(n, w int, mean, a float64) float64 {
	if w < 1 || n < 0 || !(mean >= 0) || !(a > 0) {
		return math.NaN()
	}
	return float64(n)/float64(w)*mean/a - 1
}
