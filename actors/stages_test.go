package actors

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// fakeClock is a clock a test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func handle(m *stageMeter, c *fakeClock, msg any, took time.Duration) {
	m.receive(func(actor.ReceiverContext, *actor.MessageEnvelope) { c.add(took) })(nil, &actor.MessageEnvelope{Message: msg})
	m.MessageReceived(msg)
}

type work struct{}

// TestStageMeter: three messages posted at once and handled in 0.5 s each,
// over 2 s: λ = 1.5/s, μ = 2/s; the arrivals found 0, 1 and 2 others, so
// L = 1 and W = L/λ = 2/3 s; busy 1.5 s of 2 leaves Lq = 0.25. The model
// says ρ = 0.75. (The time average was 1.5: a batch is no Poisson stream.)
func TestStageMeter(t *testing.T) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	s := newStages(c.now, 1)
	m := s.meters[KindProcessor]
	handle(m, c, &actor.Started{}, 0)
	for range 3 {
		m.MessagePosted(work{})
	}
	m.MessagePosted(&actor.Stop{}) // system messages do not count
	for range 3 {
		handle(m, c, work{}, 500*time.Millisecond)
	}
	c.add(500 * time.Millisecond)
	var got Stage
	for _, st := range s.report(0.9, nil) {
		if st.Name == KindProcessor {
			got = st
		}
	}
	want := Stage{Name: KindProcessor, Servers: 1, Arrivals: 1.5, Service: 2, L: 1, W: 2 * time.Second / 3, Lq: 0.25, Wq: time.Second / 6}
	if got.Servers != want.Servers || !near(got.Arrivals, want.Arrivals, 1e-9) || !near(got.Service, want.Service, 1e-9) ||
		!near(got.L, want.L, 1e-9) || got.W != want.W || !near(got.Lq, want.Lq, 1e-9) || got.Wq != want.Wq || !near(got.Model.Rho, 0.75, 1e-9) || !near(got.Model.L, 3, 1e-9) || got.Queued != 0 {
		t.Fatalf("stage %+v, want %+v with ρ 0.75 and model L 3", got, want)
	}
}

// TestStageWarning: a stage over the threshold is warned about once it has
// stayed there WarnAfter, once, and no more once it is under it again.
func TestStageWarning(t *testing.T) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	s := newStages(c.now, 1)
	m := s.meters[KindAcker]
	handle(m, c, &actor.Started{}, 0)
	var warned []Stage
	round := func(busy bool) Stage {
		if busy { // λ = 0.5/s, μ = 1/1.5 s: ρ = 0.75
			m.MessagePosted(work{})
			handle(m, c, work{}, 1500*time.Millisecond)
			c.add(500 * time.Millisecond)
		} else {
			c.add(2 * time.Second)
		}
		for _, st := range s.report(0.5, func(st Stage) { warned = append(warned, st) }) {
			if st.Name == KindAcker {
				return st
			}
		}
		t.Fatal("no acker stage")
		return Stage{}
	}
	for i, want := range []struct {
		busy    bool
		warning bool
		warned  int
	}{
		{true, false, 0}, // over from here on
		{true, false, 0}, // 2 s
		{true, false, 0}, // 4 s
		{true, true, 1},  // 6 s: warned
		{true, true, 1},  // still over, not warned again
		{false, false, 1},
		{false, false, 1},
	} {
		st := round(want.busy)
		if (st.Warning != "") != want.warning || len(warned) != want.warned {
			t.Fatalf("round %d: ρ %.2f, warning %q, %d warned", i, st.Model.Rho, st.Warning, len(warned))
		}
	}
	if !strings.Contains(warned[0].Warning, "acker: utilisation 0.75 for 6s (threshold 0.50)") {
		t.Fatalf("warning %q", warned[0].Warning)
	}
}

// TestStagesJSONSafe: an overloaded stage's model has no infinities (JSON
// has none).
func TestStagesJSONSafe(t *testing.T) {
	st := measure("x", stageSample{at: 0}, stageSample{at: int64(time.Second), posted: 10, received: 10, served: 10, busy: int64(2 * time.Second), servers: 1})
	if st.Model.Stable || math.IsInf(st.Model.L, 0) || math.IsInf(st.Model.Lq, 0) || st.Model.Rho != 2 {
		t.Fatalf("%+v", st.Model)
	}
}

// BenchmarkStageMeter is what the meter adds to one message: posted,
// handled (timed) and received, with the real clock.
func BenchmarkStageMeter(b *testing.B) {
	m := newStageMeter(time.Now, stagePeriod)
	next := func(actor.ReceiverContext, *actor.MessageEnvelope) {}
	recv := m.receive(next)
	env := &actor.MessageEnvelope{Message: work{}}
	for b.Loop() {
		m.MessagePosted(work{})
		recv(nil, env)
		m.MessageReceived(work{})
	}
}
