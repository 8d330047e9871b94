package actors

import (
	"encoding/json"
	"math"
	"time"
)

// The queueing model of the speed-layer paper's collection link: each stage of the
// pipeline (spout tasks, processors, ackers, counters) is c servers (its
// task actors on a member) fed by one arrival stream of messages; with
// Poisson arrivals at rate λ and exponential service at rate μ per server it
// is an M/M/c queue. These functions are pure.

// MMc is what the M/M/c model predicts for arrival rate lambda and service
// rate mu per server (both per second) with c servers.
type MMc struct {
	// Rho is the utilisation λ/(cμ); at 1 or more the queue grows without
	// bound and the other fields are +Inf.
	Rho float64 `json:"utilisation"`
	// Wait is C(c, λ/μ), Erlang's probability that a message has to wait.
	Wait float64 `json:"wait_probability"`
	// Lq and L are the expected messages waiting and in the stage (waiting
	// or in service); Wq and W the expected time waiting and in the stage.
	Lq     float64       `json:"queued"`
	L      float64       `json:"in_stage"`
	Wq     time.Duration `json:"-"` // in JSON wait_seconds
	W      time.Duration `json:"-"` // in JSON time_in_stage_seconds
	Stable bool          `json:"stable"`
}

// mmcJSON is an MMc as JSON has it: times in seconds, as every JSON answer
// of acktor gives them.
type mmcJSON struct {
	plainMMc
	Wq float64 `json:"wait_seconds"`
	W  float64 `json:"time_in_stage_seconds"`
}

type plainMMc MMc

// MarshalJSON writes the times in seconds.
func (m MMc) MarshalJSON() ([]byte, error) {
	return json.Marshal(mmcJSON{plainMMc(m), m.Wq.Seconds(), m.W.Seconds()})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (m *MMc) UnmarshalJSON(b []byte) error {
	var v mmcJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*m = MMc(v.plainMMc)
	m.Wq, m.W = seconds(v.Wq), seconds(v.W)
	return nil
}

// ModelMMc evaluates the M/M/c queue. lambda, mu > 0 and c >= 1, else the
// zero MMc.
func ModelMMc(lambda, mu float64, c int) MMc {
	if !(lambda > 0 && mu > 0) || c < 1 {
		return MMc{}
	}
	a := lambda / mu // offered load, in servers
	m := MMc{Rho: a / float64(c)}
	if m.Rho >= 1 {
		inf := time.Duration(math.MaxInt64)
		m.Wait, m.Lq, m.L, m.Wq, m.W = 1, math.Inf(1), math.Inf(1), inf, inf
		return m
	}
	m.Stable = true
	m.Wait = erlangC(c, a)
	m.Lq = m.Wait * m.Rho / (1 - m.Rho)
	m.L = m.Lq + a
	m.Wq = seconds(m.Lq / lambda)
	m.W = seconds(m.L / lambda)
	return m
}

// erlangC is the probability of waiting in an M/M/c queue with offered
// load a < c, from the Erlang B recursion B(k) = a·B(k−1)/(k + a·B(k−1)),
// which stays in [0, 1] where the textbook sums of a^k/k! overflow.
func erlangC(c int, a float64) float64 {
	b := 1.0
	for k := 1; k <= c; k++ {
		b = a * b / (float64(k) + a*b)
	}
	rho := a / float64(c)
	return b / (1 - rho + rho*b)
}

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * float64(time.Second))) }
