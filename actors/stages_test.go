package actors

import (
	"encoding/json"
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
		!near(got.L, want.L, 1e-9) || (got.W-want.W).Abs() > 1 || !near(got.Lq, want.Lq, 1e-9) || (got.Wq-want.Wq).Abs() > 1 || !near(got.Model.Rho, 0.75, 1e-9) || !near(got.Model.L, 3, 1e-9) || got.Queued != 0 {
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

// TestSourceStage: the source row appears once a source tells its backlog;
// records arriving are those taken plus the backlog's growth, the spout
// tasks serve them at the roots they take per second of their work, and
// the backlog is what waits.
func TestSourceStage(t *testing.T) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	s := newStages(c.now, 1)
	for _, st := range s.report(0.9, nil) {
		if st.Name == SourceStage {
			t.Fatal("a source row with no source that tells its backlog")
		}
	}
	spout := s.meters[KindSpout]
	handle(spout, c, &actor.Started{}, 0)
	s.source.setBacklog(3, 100)
	for range 10 { // ten pulls of 5 roots, 0.1 s each
		spout.MessagePosted(work{})
		handle(spout, c, work{}, 100*time.Millisecond)
		s.source.taken.Add(5)
	}
	s.source.setBacklog(3, 80)
	c.add(time.Second)
	rows := s.report(0.9, nil)
	got := rows[0]
	// 50 taken and 80 waiting came in 2 s; 50 roots in 1 s of spout work.
	if got.Name != SourceStage || len(rows) != 5 || got.Servers != 1 || !near(got.Arrivals, 65, 1e-9) ||
		!near(got.Service, 50, 1e-9) || got.L != 80 || got.Lq != 80 || got.Queued != 80 || !near(got.Model.Rho, 1.3, 1e-9) || got.Model.Stable {
		t.Fatalf("source row %+v of %d rows", got, len(rows))
	}
	s.source.dropBacklog(3)
	if rows := s.report(0.9, nil); rows[0].Name == SourceStage {
		t.Fatal("the source row outlived its spout task")
	}
}

// TestStageJSON: a stage's times are seconds in JSON, as every JSON answer
// gives them, and read back as they were.
func TestStageJSON(t *testing.T) {
	st := Stage{Name: KindAcker, Servers: 2, W: 1500 * time.Microsecond, Wq: 250 * time.Microsecond,
		Model: MMc{Rho: 0.5, Wq: 3 * time.Millisecond, W: 8 * time.Millisecond, Stable: true}}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"measured_time_in_stage_seconds":0.0015`, `"measured_wait_seconds":0.00025`,
		`"wait_seconds":0.003`, `"time_in_stage_seconds":0.008`, `"utilisation":0.5`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	if strings.Contains(string(b), "_ns") {
		t.Errorf("%s has a time in ns", b)
	}
	var back Stage
	if err := json.Unmarshal(b, &back); err != nil || back != st {
		t.Fatalf("read back %+v, %v; want %+v", back, err, st)
	}
}
