package actors

import (
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// The stages of the pipeline, as the queueing model sees them: every task
// actor of a kind on this member is one server of its stage.
var stageNames = []string{KindSpout, KindProcessor, KindAcker, KindCounter}

// stageMeter measures one stage on this member, lock-free and mostly
// without the clock, since it sits on every message's path: messages posted
// to its mailboxes (arrivals, λ) and handled (counted), the time spent
// handling every period-th one (service, μ), and the messages in the stage
// as every period-th arrival finds them. For Poisson arrivals that is the
// time average (PASTA: arrivals see time averages); for others it is what
// an arrival meets, which is what a queue is sized for. It is the mailbox
// middleware and receiver middleware of the stage's props.
type stageMeter struct {
	now    func() time.Time
	period uint64

	posted           atomic.Uint64
	_                [56]byte // posted is bumped by senders, the rest mostly by the stage
	received, served atomic.Uint64
	seenSum, seenN   atomic.Uint64 // messages in the stage that sampled arrivals found
	busy             atomic.Int64  // ns spent handling, estimated from every period-th message
	servers          atomic.Int64  // task actors started and not stopped
}

// stagePeriod is how often the meter samples: one message in 16.
const stagePeriod = 16

// stageSample is a stage meter's cumulative state at a time.
type stageSample struct {
	at                       int64
	posted, received, served uint64
	seenSum, seenN           uint64
	busy                     int64
	servers                  int64
}

func newStageMeter(now func() time.Time, period uint64) *stageMeter {
	return &stageMeter{now: now, period: max(period, 1)}
}

// MailboxStarted, MessagePosted, MessageReceived and MailboxEmpty make the
// meter a mailbox middleware; system messages do not count.
func (m *stageMeter) MailboxStarted() {}
func (m *stageMeter) MailboxEmpty()   {}

func (m *stageMeter) MessagePosted(msg any) {
	if uncounted(msg) {
		return
	}
	if n := m.posted.Add(1); n%m.period == 0 {
		// The others in the stage; concurrent posters can make this a
		// little off, never below zero.
		m.seenSum.Add(uint64(max(int64(n-1-m.received.Load()), 0)))
		m.seenN.Add(1)
	}
}

func (m *stageMeter) MessageReceived(msg any) {
	if !uncounted(msg) {
		m.received.Add(1)
	}
}

// uncounted says whether msg is no work for the stage: a system message,
// or a task's queue-end flush to itself (one per burst of work, which
// would count the burst twice).
func uncounted(msg any) bool {
	switch msg.(type) {
	case actor.SystemMessage, *flushOut, *flushAcks:
		return true
	}
	return false
}

// receive is the receiver middleware: it counts and samples the time of
// user messages, and counts the stage's task actors.
func (m *stageMeter) receive(next actor.ReceiverFunc) actor.ReceiverFunc {
	return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
		switch env.Message.(type) {
		case *actor.Started:
			m.servers.Add(1)
			next(c, env)
			return
		case *actor.Stopped:
			m.servers.Add(-1)
			next(c, env)
			return
		}
		if uncounted(env.Message) {
			next(c, env)
			return
		}
		if m.served.Add(1)%m.period != 0 {
			next(c, env)
			return
		}
		start := m.now()
		next(c, env)
		m.busy.Add(int64(m.now().Sub(start)) * int64(m.period))
	}
}

func (m *stageMeter) sample() stageSample {
	return stageSample{at: m.now().UnixNano(), posted: m.posted.Load(), received: m.received.Load(),
		served: m.served.Load(), seenSum: m.seenSum.Load(), seenN: m.seenN.Load(), busy: m.busy.Load(),
		servers: m.servers.Load()}
}

// Stage is one stage's load over a recent interval (the last few seconds),
// measured and as the M/M/c model predicts it.
type Stage struct {
	Name    string `json:"name"`
	Servers int    `json:"servers"` // task actors of the stage on this member
	// Arrivals and Service are λ (messages posted per second) and μ
	// (messages one server handles per second of handling).
	Arrivals float64 `json:"arrivals_per_second"`
	Service  float64 `json:"service_per_second"`
	// Posted, Handled and BusySeconds are the counts λ and μ are taken
	// from, since the runtime was made, for rates over any span (PromQL's
	// rate): messages posted to the stage's mailboxes (none for the source,
	// whose arrivals are a broker's backlog), messages handled (the
	// source: roots taken) and seconds spent handling them.
	Posted      uint64  `json:"posted"`
	Handled     uint64  `json:"handled"`
	BusySeconds float64 `json:"busy_seconds"`
	// Model is the M/M/c prediction for λ, μ and the servers: one queue
	// that any idle task takes from. Each task actor has a mailbox of its
	// own, though, and groupings split the arrivals among them, so Split
	// is the stage as c M/M/1 queues of λ/c each (its L and Lq summed over
	// them): an even split's truth, which M/M/c underestimates.
	Model MMc `json:"model"`
	Split MMc `json:"model_split"`
	// L is the mean number of messages an arriving message finds in the
	// stage (waiting or handled): the time average for Poisson arrivals,
	// what a queue must hold for others. W is the mean time a message
	// spends there (Little: L/λ).
	L float64       `json:"measured_in_stage"`
	W time.Duration `json:"-"` // in JSON measured_time_in_stage_seconds
	// Lq and Wq are the measured mean messages waiting (L less the mean
	// tasks busy) and the mean wait (Lq/λ), beside Model.Lq and Model.Wq.
	Lq float64       `json:"measured_queued"`
	Wq time.Duration `json:"-"` // in JSON measured_wait_seconds
	// Queued is the messages in the stage now.
	Queued int64 `json:"queued_now"`
	// Warning is set while the stage's utilisation has stayed at or above
	// the threshold (Config.WarnUtilisation) for WarnAfter or longer: its
	// queue is the one that will overflow first.
	Warning string `json:"warning,omitempty"`
}

// stageWindow is the interval over which Stages measures: the rates of the
// last few seconds, not of the whole run.
const stageWindow = 2 * time.Second

// WarnAfter is how long a stage's utilisation must stay at or above the
// threshold before it is warned about.
const WarnAfter = 5 * time.Second

// stages keeps the samples Stages compares and when each stage went over
// the threshold.
type stages struct {
	mu      sync.Mutex
	meters  map[string]*stageMeter
	source  sourceMeter
	history []map[string]stageSample // oldest first, one every quarter second at most
	over    map[string]int64         // stage -> unix ns it went over the threshold
	warned  map[string]bool          // stage -> warned about since
}

func newStages(now func() time.Time, period uint64) *stages {
	s := &stages{meters: map[string]*stageMeter{}, over: map[string]int64{}, warned: map[string]bool{},
		source: sourceMeter{backlog: map[uint32]int64{}}}
	for _, n := range stageNames {
		s.meters[n] = newStageMeter(now, period)
	}
	s.history = append(s.history, s.sample())
	return s
}

// stageJSON is a Stage as JSON has it: times in seconds.
type stageJSON struct {
	plainStage
	W  float64 `json:"measured_time_in_stage_seconds"`
	Wq float64 `json:"measured_wait_seconds"`
}

type plainStage Stage

// MarshalJSON writes the times in seconds.
func (st Stage) MarshalJSON() ([]byte, error) {
	return json.Marshal(stageJSON{plainStage(st), st.W.Seconds(), st.Wq.Seconds()})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (st *Stage) UnmarshalJSON(b []byte) error {
	var v stageJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*st = Stage(v.plainStage)
	st.W, st.Wq = seconds(v.W), seconds(v.Wq)
	return nil
}

// SourceStage names the queue in front of the spout tasks: the records
// their sources' brokers (a Kafka partition, a JetStream consumer, the
// ingest log) hold for them, served by the spout tasks.
const SourceStage = "source"

// sourceMeter counts the roots spout tasks on this member take from their
// sources and, for sources that tell (source.Backlogger), what waits there.
type sourceMeter struct {
	taken   atomic.Uint64
	mu      sync.Mutex
	backlog map[uint32]int64 // by spout task
}

func (m *sourceMeter) setBacklog(task uint32, n int64) {
	m.mu.Lock()
	m.backlog[task] = max(n, 0)
	m.mu.Unlock()
}

func (m *sourceMeter) dropBacklog(task uint32) {
	m.mu.Lock()
	delete(m.backlog, task)
	m.mu.Unlock()
}

// sample is every stage's meter now; the source's sample holds the roots
// taken (received, served), those plus the backlog (posted: what has come),
// the backlog (seenSum, with seenN 1 when a source tells it) and the spout
// stage's busy time and tasks, which serve it.
func (s *stages) sample() map[string]stageSample {
	now := map[string]stageSample{}
	for n, m := range s.meters {
		now[n] = m.sample()
	}
	sp := now[KindSpout]
	taken := s.source.taken.Load()
	s.source.mu.Lock()
	var backlog uint64
	for _, n := range s.source.backlog {
		backlog += uint64(n)
	}
	known := uint64(min(len(s.source.backlog), 1))
	s.source.mu.Unlock()
	now[SourceStage] = stageSample{at: sp.at, posted: taken + backlog, received: taken, served: taken,
		seenSum: backlog, seenN: known, busy: sp.busy, servers: sp.servers}
	return now
}

// props gives a stage's task props its meter.
func (s *stages) props(stage string, mailbox func(...actor.MailboxMiddleware) actor.MailboxProducer) []actor.PropsOption {
	m := s.meters[stage]
	return []actor.PropsOption{actor.WithMailbox(mailbox(m)), actor.WithReceiverMiddleware(m.receive)}
}

// Stages reports each stage's load on this member over about the last two
// seconds (since the runtime was made, at first), with the M/M/c model's
// prediction beside it. threshold is the utilisation to warn at; newly
// warned stages are passed to warn.
func (s *stages) report(threshold float64, warn func(Stage)) []Stage {
	now := s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	base := s.history[0]
	t := now[KindSpout].at
	for _, h := range s.history {
		if t-h[KindSpout].at >= int64(stageWindow) {
			base = h
		}
	}
	if last := s.history[len(s.history)-1]; t-last[KindSpout].at >= int64(stageWindow/8) {
		s.history = append(s.history, now)
	}
	for len(s.history) > 16 && t-s.history[1][KindSpout].at >= int64(stageWindow) {
		s.history = s.history[1:]
	}
	names := stageNames
	if now[SourceStage].seenN > 0 {
		names = append([]string{SourceStage}, names...)
	}
	out := make([]Stage, 0, len(names))
	for _, n := range names {
		st, queue := measure(n, base[n], now[n]), "its mailboxes grow"
		if n == SourceStage {
			st, queue = measureSource(base[n], now[n]), "the backlog at its broker grows"
		}
		if st.Model.Rho >= threshold && st.Model.Rho > 0 {
			since, ok := s.over[n]
			if !ok {
				since = t
				s.over[n] = t
			}
			if d := time.Duration(t - since); d >= WarnAfter {
				st.Warning = fmt.Sprintf("%s: utilisation %.2f for %v (threshold %.2f): %s; give it more tasks or members",
					n, st.Model.Rho, d.Round(time.Second), threshold, queue)
				if !s.warned[n] && warn != nil {
					warn(st)
				}
				s.warned[n] = true
			}
		} else {
			delete(s.over, n)
			delete(s.warned, n)
		}
		out = append(out, st)
	}
	return out
}

// measure is a stage's load between two samples.
func measure(name string, a, b stageSample) Stage {
	st := Stage{Name: name, Servers: int(b.servers), Queued: int64(b.posted - b.received),
		Posted: b.posted, Handled: b.served, BusySeconds: float64(b.busy) / 1e9}
	dt := float64(b.at-a.at) / 1e9
	if dt <= 0 {
		return st
	}
	st.Arrivals = float64(b.posted-a.posted) / dt
	busy := float64(b.busy-a.busy) / 1e9
	if busy > 0 {
		st.Service = float64(b.served-a.served) / busy
	}
	if n := b.seenN - a.seenN; n > 0 {
		st.L = float64(b.seenSum-a.seenSum) / float64(n)
	}
	st.Lq = max(st.L-busy/dt, 0)
	if st.Arrivals > 0 {
		st.W = seconds(st.L / st.Arrivals)
		st.Wq = seconds(st.Lq / st.Arrivals)
	}
	st.model()
	return st
}

// measureSource is the source stage between two samples: records arriving
// (taken, plus the growth of the backlog) per second, roots the spout tasks
// take per second of their work, and the backlog now, all of it waiting.
func measureSource(a, b stageSample) Stage {
	st := Stage{Name: SourceStage, Servers: int(b.servers), Queued: int64(b.seenSum),
		Handled: b.served, BusySeconds: float64(b.busy) / 1e9}
	dt := float64(b.at-a.at) / 1e9
	if dt <= 0 {
		return st
	}
	st.Arrivals = max(float64(int64(b.posted-a.posted)), 0) / dt
	if busy := float64(b.busy-a.busy) / 1e9; busy > 0 {
		st.Service = float64(b.served-a.served) / busy
	}
	st.L, st.Lq = float64(b.seenSum), float64(b.seenSum)
	if st.Arrivals > 0 {
		st.W = seconds(st.L / st.Arrivals)
		st.Wq = st.W
	}
	st.model()
	return st
}

// model puts the M/M/c and the split model beside the measurement.
func (st *Stage) model() {
	c := max(st.Servers, 1)
	st.Model = jsonSafe(ModelMMc(st.Arrivals, st.Service, c))
	st.Split = ModelMMc(st.Arrivals/float64(c), st.Service, 1)
	st.Split.L *= float64(c)
	st.Split.Lq *= float64(c)
	st.Split = jsonSafe(st.Split)
}

// jsonSafe replaces an unstable model's infinities (JSON has none; Stable
// says it) with -1 and 0.
func jsonSafe(m MMc) MMc {
	if math.IsInf(m.L, 1) {
		m.Wq, m.W = 0, 0
		m.Lq, m.L = -1, -1
	}
	return m
}
