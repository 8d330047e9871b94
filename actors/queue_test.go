package actors

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func near(a, b, rel float64) bool {
	return math.Abs(a-b) <= rel*math.Max(math.Abs(a), math.Abs(b))+1e-12
}

// TestModelMMc checks the model against textbook values: M/M/1 has
// Lq = ρ²/(1−ρ); M/M/2 at a = 1 has C = 1/3; the Erlang C table at c = 10.
func TestModelMMc(t *testing.T) {
	for _, tc := range []struct {
		lambda, mu float64
		c          int
		rho, wait  float64
		lq         float64
		wq         time.Duration
	}{
		{lambda: 5, mu: 10, c: 1, rho: 0.5, wait: 0.5, lq: 0.5, wq: 100 * time.Millisecond},
		{lambda: 9, mu: 10, c: 1, rho: 0.9, wait: 0.9, lq: 8.1, wq: 900 * time.Millisecond},
		{lambda: 1, mu: 1, c: 2, rho: 0.5, wait: 1.0 / 3, lq: 1.0 / 3, wq: time.Second / 3},
		{lambda: 8, mu: 1, c: 10, rho: 0.8, wait: 0.4092, lq: 1.637, wq: 204625 * time.Microsecond},
	} {
		m := ModelMMc(tc.lambda, tc.mu, tc.c)
		if !m.Stable || !near(m.Rho, tc.rho, 1e-9) || !near(m.Wait, tc.wait, 1e-3) || !near(m.Lq, tc.lq, 1e-3) ||
			!near(float64(m.Wq), float64(tc.wq), 1e-3) || !near(m.L, m.Lq+tc.lambda/tc.mu, 1e-9) {
			t.Errorf("M/M/%d λ=%v μ=%v: %+v, want ρ %v C %v Lq %v Wq %v", tc.c, tc.lambda, tc.mu, m, tc.rho, tc.wait, tc.lq, tc.wq)
		}
	}
	if m := ModelMMc(10, 10, 1); m.Stable || !math.IsInf(m.Lq, 1) || m.Rho != 1 {
		t.Errorf("ρ = 1: %+v, want unstable", m)
	}
	for _, m := range []MMc{ModelMMc(0, 1, 1), ModelMMc(1, 0, 1), ModelMMc(1, 1, 0), ModelMMc(math.NaN(), 1, 1)} {
		if m != (MMc{}) {
			t.Errorf("bad arguments gave %+v", m)
		}
	}
}

// TestModelMMcProperties: waiting grows with the load; more servers at the
// same utilisation wait less; the probability of waiting stays in [0, 1]
// even at a thousand servers, where a^c/c! overflows.
func TestModelMMcProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		c := 1 + rng.IntN(1000)
		mu := 0.1 + rng.Float64()*1000
		rho := rng.Float64() * 0.999
		m := ModelMMc(rho*float64(c)*mu, mu, c)
		if !m.Stable || m.Wait < 0 || m.Wait > 1 || m.Lq < 0 || math.IsNaN(m.Lq) {
			t.Fatalf("c=%d μ=%v ρ=%v: %+v", c, mu, rho, m)
		}
		more := ModelMMc(math.Min(rho+0.0005, 0.9995)*float64(c)*mu, mu, c)
		if more.Lq < m.Lq-1e-9 {
			t.Fatalf("c=%d μ=%v: Lq fell from %v to %v as ρ rose from %v", c, mu, m.Lq, more.Lq, rho)
		}
		if c > 1 {
			fewer := ModelMMc(rho*float64(c-1)*mu, mu, c-1)
			if fewer.Wait < m.Wait-1e-9 {
				t.Fatalf("ρ=%v: C(%d)=%v below C(%d)=%v", rho, c-1, fewer.Wait, c, m.Wait)
			}
		}
	}
}
