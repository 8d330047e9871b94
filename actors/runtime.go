package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/sirupsen/logrus"

	"github.com/acktor/acktor/messages"
	"github.com/acktor/acktor/tracker"
	"github.com/acktor/acktor/tracker/ledger"
	"github.com/acktor/acktor/tracker/ring"
	"github.com/acktor/acktor/window"
)

// Cluster kinds of acktor's virtual actors.
const (
	KindSpout     = "spout"
	KindProcessor = "processor"
	KindCounter   = "counter" // the tasks of counter components
	KindAcker     = tracker.AckerKind
)

// Config tunes the runtime. Zero values are not defaults: start from
// DefaultConfig.
type Config struct {
	// Ackers is the number of acker actors at the start (SetAckers changes
	// it while running); 0 turns tracking off (a root counts as done once
	// emitted, like Storm's topology.acker.executors: 0).
	Ackers int
	// Replicas is the points per acker on the ring that spreads roots over
	// ackers; 0 means ring.DefaultReplicas.
	Replicas int
	// MaxPending bounds the roots in flight per spout task; a full spout
	// stops pulling from its source (backpressure).
	MaxPending int
	// Timeout is how long a root may stay in flight before it is failed and
	// replayed. Ackers expire records between Timeout and
	// Timeout*Generations/(Generations-1); spout tasks keep their own
	// deadline a little later, for roots whose acker died.
	Timeout     time.Duration
	Generations int
	// MaxReplays is how often a failed root is replayed before it goes to
	// the dead-letter sink.
	MaxReplays int
	// BatchSize bounds tuples per TupleBatch, folded roots per AckBatch and
	// roots a spout pulls at a time.
	BatchSize int
	// AckDelay is how long a processor may hold ack deltas to fold more of
	// them into fewer messages; 0 sends them once the input batches already
	// queued at the task are handled (at once when it is idle), or after
	// four input batches if sooner. A batch that reaches BatchSize goes at
	// once. At high rates 0 is best (holding acks
	// holds roots in flight); a few ms pays off when input arrives a few
	// tuples at a time.
	AckDelay time.Duration
	// MailboxSize bounds each processor's mailbox when tracking is off, where
	// no max pending holds the spouts back: a full mailbox blocks its sender.
	MailboxSize int
	// ReportEvery is how often tasks report progress.
	ReportEvery time.Duration
	// MembershipLag is how long after one member learns of a death the
	// others may still not know (cluster.Config.MembershipLag): a spout
	// task replays its roots in flight that long after it learns, so that
	// their replays are not sent to the dead member by one that has not
	// heard yet. 0 replays them at once.
	MembershipLag time.Duration
	// Standby keeps a standby replica of every counter task on another
	// member, where there is one (KindStandby).
	Standby bool
	// Seed seeds the tuple id generators (per task).
	Seed uint64
	// Clock tells the time to spout deadlines; nil means time.Now.
	Clock func() time.Time
	// DeadLetters receives roots given up on; nil logs them.
	DeadLetters DeadLetterSink
	// Log receives the runtime's log lines; nil means logrus's standard logger.
	Log logrus.FieldLogger
	// IdleWait is the longest a spout task waits before it asks again a
	// source that had nothing ready (it starts at 50 µs and doubles while
	// the source stays dry); 0 means 2 ms, and it is at least 50 µs.
	IdleWait time.Duration
	// WarnUtilisation is the utilisation (λ/cμ) at which a stage that stays
	// there for WarnAfter is warned about (Stages, the log); 0 means 0.9.
	WarnUtilisation float64
}

// maxBatchSize bounds Config.BatchSize, and so the tuples of a batch from
// another member.
const maxBatchSize = 1 << 16

// maxPending bounds Config.MaxPending: the roots one spout task keeps.
const maxPending = 1 << 20

// DefaultConfig is a configuration for one machine. MaxPending is eight
// batches: at four (2048) a word count's cores idled while a pull's roots
// waited for their acks, and tracking cost it 17 % at 8 ackers against 11 %
// (docs/performance.md).
func DefaultConfig() Config {
	return Config{
		Ackers: 2, MaxPending: 4096, Timeout: 30 * time.Second, Generations: 3,
		MaxReplays: 5, BatchSize: 512, AckDelay: 0, MailboxSize: 64, ReportEvery: 200 * time.Millisecond, Seed: 1, Standby: true,
	}
}

// Validate names the first field out of range, as a *FieldError.
func (c Config) Validate() error {
	switch {
	case c.Ackers < 0 || c.Ackers > tracker.MaxAckers:
		return fieldError("Ackers", c.Ackers, "0..%d", tracker.MaxAckers)
	case c.Replicas < 0 || c.Replicas > ring.MaxReplicas:
		return fieldError("Replicas", c.Replicas, "0..%d (0: %d)", ring.MaxReplicas, ring.DefaultReplicas)
	case c.MaxPending < 1 || c.MaxPending > maxPending:
		return fieldError("MaxPending", c.MaxPending, "1..%d", maxPending)
	case c.Timeout < 10*time.Millisecond:
		return fieldError("Timeout", c.Timeout, ">= 10ms")
	case c.Generations < 2 || c.Generations > ledger.MaxGenerations:
		return fieldError("Generations", c.Generations, "2..%d", ledger.MaxGenerations)
	case c.IdleWait != 0 && (c.IdleWait < tracker.MinIdleWait || c.IdleWait > time.Second):
		return fieldError("IdleWait", c.IdleWait, "%v..1s (0: 2ms)", tracker.MinIdleWait)
	case c.WarnUtilisation < 0 || c.WarnUtilisation > 10:
		return fieldError("WarnUtilisation", c.WarnUtilisation, "0..10 (0: 0.9)")
	case c.MaxReplays < 0:
		return fieldError("MaxReplays", c.MaxReplays, ">= 0")
	case c.BatchSize < 1 || c.BatchSize > maxBatchSize:
		return fieldError("BatchSize", c.BatchSize, "1..%d", maxBatchSize)
	case c.AckDelay < 0 || c.AckDelay > c.Timeout/4:
		return fieldError("AckDelay", c.AckDelay, "0..timeout/4")
	case c.MailboxSize < 2 || c.MailboxSize > 1<<16: // a ring buffer of 1 cannot tell full from empty
		return fieldError("MailboxSize", c.MailboxSize, "2..65536")
	case c.ReportEvery <= 0:
		return fieldError("ReportEvery", c.ReportEvery, "> 0")
	}
	return nil
}

// rotateEvery is the acker's rotation interval.
func (c Config) rotateEvery() time.Duration { return c.Timeout / time.Duration(c.Generations-1) }

// spoutDeadline is later than any acker expiry, by one rotation.
func (c Config) spoutDeadline() time.Duration {
	return c.Timeout*time.Duration(c.Generations)/time.Duration(c.Generations-1) + c.rotateEvery()
}

// DeadLetter is a root given up on.
type DeadLetter struct {
	Component string
	Task      uint32
	RootID    uint64 // the source's id of the root (a file offset, a sequence number)
	Payload   string
	Attempts  int
	Reason    string
}

// DeadLetterSink receives roots that will not be replayed again. It is called
// from spout task actors, possibly concurrently.
type DeadLetterSink interface {
	DeadLetter(d DeadLetter)
}

// env is what every task of a runtime shares: read-only after start.
type env struct {
	topo     *Topology
	cfg      Config
	log      logrus.FieldLogger
	reporter atomic.Pointer[actor.PID] // the local Run's, for progress between drains
	stages   *stages                   // the queueing model's meters
	recycle  recycler                  // consumed tracking messages, for reuse
	workers  *workers                  // the goroutines that run the tasks' mailboxes

	dir       atomic.Pointer[tracker.Directory] // the acker set; SetAckers replaces it
	epoch     atomic.Uint64                     // topology changes seen by this member
	topoOnce  sync.Once
	maxAckers atomic.Int32  // the most ackers there have been
	setMu     sync.Mutex    // serialises SetAckers
	standbys  sync.Map      // counter task identity → the PID of its standby on this member
	handWait  time.Duration // for a move's handover part to be answered (tests shorten it)
}

// props gives a stage's task props its meter and the runtime's workers.
func (e *env) props(stage string, mailbox func(...actor.MailboxMiddleware) actor.MailboxProducer) []actor.PropsOption {
	return append(e.stages.props(stage, mailbox), actor.WithDispatcher(e.workers))
}

func (e *env) tracking() bool { return e.cfg.Ackers > 0 }

func (e *env) now() time.Time {
	if e.cfg.Clock != nil {
		return e.cfg.Clock()
	}
	return time.Now()
}

// Runtime runs one topology on a Proto.Actor cluster, once.
type Runtime struct {
	env *env
	ran atomic.Bool
	run atomic.Pointer[reporter] // the run under way, for Progress
	// stopping: StopSources was called; spout tasks started from now on
	// read nothing.
	stopping atomic.Bool
	serving  atomic.Pointer[serving] // set while the runtime serves a service
	start    time.Time
}

// Stages reports the load of each stage of the pipeline on this member
// (spout tasks, processors, ackers, counters) over about the last two
// seconds: arrival and service rates, the messages in the stage and the
// time spent there, measured and as the M/M/c model predicts them.
func (rt *Runtime) Stages() []Stage {
	return rt.env.stages.report(rt.env.warnUtilisation(), func(st Stage) { rt.env.log.Warn("stage " + st.Warning) })
}

func (c Config) idleWait() time.Duration {
	if c.IdleWait == 0 {
		return 2 * time.Millisecond
	}
	return c.IdleWait
}

func (e *env) warnUtilisation() float64 {
	if e.cfg.WarnUtilisation == 0 {
		return 0.9
	}
	return e.cfg.WarnUtilisation
}

// Topology is the topology this runtime runs.
func (rt *Runtime) Topology() *Topology { return rt.env.topo }

// Progress is the progress of the run this runtime drives, and false
// before Run was called.
func (rt *Runtime) Progress() (Progress, bool) {
	rep := rt.run.Load()
	if rep == nil {
		return Progress{}, false
	}
	p := rep.progress()
	p.Elapsed = time.Since(rt.start)
	return p, true
}

// RunProgress is the progress of the job this member takes part in: of the
// run it drives, as Progress, or of the service it serves, as the lead
// counts it (asked within a second; false when the lead does not answer).
func (rt *Runtime) RunProgress() (Progress, bool) {
	sv := rt.serving.Load()
	if sv == nil || sv.leader() == sv.c.ActorSystem.Address() {
		return rt.Progress()
	}
	res, err := sv.c.ActorSystem.Root.RequestFuture(actor.NewPID(sv.leader(), reporterName), &messages.ProgressRequest{}, time.Second).Result()
	s, ok := res.(*messages.TaskReport)
	if err != nil || !ok {
		return Progress{}, false
	}
	p := progressOf(s)
	p.Elapsed = time.Since(rt.start)
	return p, true
}

// askWithin bounds the wait for one task's or acker's answer to a
// question about the run (stats, a query without a deadline of its own):
// while a member dies, the others' answers come on time.
const askWithin = 2 * time.Second

// finalQueryWithin bounds the query of a finished run's final windows.
const finalQueryWithin = 30 * time.Second

// Ackers asks every acker there has been for its counters, all at once.
// An acker that does not answer within askWithin (its member is down) is
// left out and named in the error; the others' counters come back all the
// same.
func (rt *Runtime) Ackers(c *cluster.Cluster) ([]AckerStats, error) {
	n := int(rt.env.maxAckers.Load())
	type answer struct {
		i   int
		a   AckerStats
		err error
	}
	answers := make(chan answer, n) // a late answer lands here, unread
	for i := range n {
		go func() {
			// The lookup of a grain whose member just died may wait for its
			// own timeout before the request starts: the wait below bounds both.
			res, err := c.Request(tracker.AckerIdentity(i), KindAcker, &messages.AckerStatsRequest{}, cluster.WithTimeout(askWithin))
			a, ok := res.(*messages.AckerStats)
			switch {
			case err != nil:
				answers <- answer{i: i, err: fmt.Errorf("stats of %s: %w", tracker.AckerIdentity(i), err)}
			case !ok:
				answers <- answer{i: i, err: fmt.Errorf("stats of %s: unexpected %T", tracker.AckerIdentity(i), res)}
			default:
				answers <- answer{i: i, a: AckerStats{ID: a.Id, Member: a.Member, Tracked: a.Tracked, InFlight: a.InFlight, PeakInFlight: a.PeakInFlight,
					Completed: a.Completed, Failed: a.Failed, Expired: a.Expired, Orphaned: a.Orphaned, Bytes: a.Bytes,
					HandedOver: a.HandedOver, Adopted: a.Adopted, Forwarded: a.Forwarded,
					BadMessages: a.BadMessages, Rejected: a.Rejected, Dropped: a.Dropped, ClientsRefused: a.ClientsRefused}}
			}
		}()
	}
	out := make([]AckerStats, n)
	errs := make([]error, n)
	got := make([]bool, n)
	deadline := time.NewTimer(askWithin)
	defer deadline.Stop()
wait:
	for range n {
		select {
		case a := <-answers:
			out[a.i], errs[a.i], got[a.i] = a.a, a.err, true
		case <-deadline.C:
			break wait
		}
	}
	answered := out[:0]
	for i, a := range out {
		if !got[i] {
			errs[i] = fmt.Errorf("stats of %s: no answer in %v", tracker.AckerIdentity(i), askWithin)
		}
		if errs[i] == nil {
			answered = append(answered, a)
		}
	}
	return answered, errors.Join(errs...)
}

// New checks cfg and makes a runtime for topo.
func New(topo *Topology, cfg Config) (*Runtime, error) {
	if topo == nil {
		return nil, errors.New("runtime: nil topology")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	log := cfg.Log
	if log == nil {
		log = logrus.StandardLogger()
	}
	if cfg.DeadLetters == nil {
		cfg.DeadLetters = logSink{log}
	}
	return &Runtime{env: newEnv(topo, cfg, log)}, nil
}

func newEnv(topo *Topology, cfg Config, log logrus.FieldLogger) *env {
	e := &env{topo: topo, cfg: cfg, log: log, handWait: handWait}
	e.stages = newStages(e.now, stagePeriod)
	e.workers = newWorkers(mailboxThroughput, idleWorkers, workerWait)
	replicas := cfg.Replicas
	if replicas == 0 {
		replicas = ring.DefaultReplicas
	}
	e.dir.Store(tracker.NewDirectory(1, cfg.Ackers, replicas))
	e.maxAckers.Store(int32(cfg.Ackers))
	return e
}

type logSink struct{ log logrus.FieldLogger }

func (s logSink) DeadLetter(d DeadLetter) {
	s.log.WithFields(logrus.Fields{"component": d.Component, "task": d.Task, "root": d.RootID,
		"attempts": d.Attempts}).Errorf("dead letter: %s", d.Reason)
}

// Kinds are the cluster kinds of every task: register them on a member
// that hosts tasks of every sort, such as the embedded single member.
func (rt *Runtime) Kinds() []*cluster.Kind {
	counter := cluster.NewKind(KindCounter, actor.PropsFromProducer(func() actor.Actor { return &processorTask{env: rt.env} },
		rt.env.props(KindCounter, actor.Unbounded)...))
	if !rt.env.cfg.Standby {
		return append(rt.WorkerKinds(), counter)
	}
	standby := cluster.NewKind(KindStandby, actor.PropsFromProducer(func() actor.Actor { return &standbyTask{env: rt.env} },
		actor.WithDispatcher(rt.env.workers)))
	return append(rt.WorkerKinds(), counter, standby)
}

// WorkerKinds are the kinds of the stateless tasks (spout tasks, processor
// tasks, ackers) whose loss a replay repairs: register them on members
// that may fail. Counter tasks hold the results; register their kind
// (Kinds) only on the members that must keep them.
func (rt *Runtime) WorkerKinds() []*cluster.Kind {
	e := rt.env
	procMailbox := actor.Unbounded
	if !e.tracking() {
		procMailbox = func(m ...actor.MailboxMiddleware) actor.MailboxProducer {
			return actor.Bounded(e.cfg.MailboxSize, m...)
		}
	}
	return []*cluster.Kind{
		cluster.NewKind(KindSpout, actor.PropsFromProducer(func() actor.Actor { return &spoutTask{env: e} },
			e.props(KindSpout, actor.Unbounded)...)),
		cluster.NewKind(KindProcessor, actor.PropsFromProducer(func() actor.Actor { return &processorTask{env: e} },
			e.props(KindProcessor, procMailbox)...)),
		cluster.NewKind(KindAcker, actor.PropsFromProducer(func() actor.Actor { return &ackerTask{env: e} },
			e.props(KindAcker, actor.Unbounded)...)),
	}
}

// Progress is a snapshot of a run, summed over tasks.
type Progress struct {
	Roots, Completed, Failed, TimedOut, Replayed, DeadLettered uint64
	InFlight, PeakInFlight                                     uint64
	Tuples                                                     uint64 // emitted, roots included
	Total                                                      int64  // roots the sources will yield, -1 if unknown
	Elapsed                                                    time.Duration
	// LatencyP50 and LatencyP99 are quantiles of the complete latency, a
	// root's last emission to its tree's completion, over the whole run
	// (log buckets: at most 25 % above the truth).
	LatencyP50, LatencyP99 time.Duration
	// Latency holds the same latencies as a histogram: cumulative counts at
	// every power of two of microseconds, with their count and sum.
	Latency      []LatencyBucket
	LatencyCount uint64
	LatencySum   time.Duration
}

// LatencyBucket is a bucket of Progress.Latency: how many complete
// latencies were at most Upper.
type LatencyBucket = tracker.LatencyBucket

// announceFor is how long after a membership change a run keeps announcing
// its acker set, at each report.
const announceFor = 3 * time.Second

// running says whether a run is under way.
func (rt *Runtime) running() bool {
	rep := rt.run.Load()
	if rep == nil {
		return false
	}
	select {
	case <-rep.allDone:
		return false
	default:
		return true
	}
}

// AckerStats is one acker's share of a run.
type AckerStats struct {
	ID           string `json:"id"`
	Member       string `json:"member"` // the address of the member that hosts it
	Tracked      uint64 `json:"tracked"`
	InFlight     uint64 `json:"in_flight"`
	PeakInFlight uint64 `json:"peak_in_flight"`
	Completed    uint64 `json:"completed"`
	Failed       uint64 `json:"failed"`
	Expired      uint64 `json:"expired"`
	Orphaned     uint64 `json:"orphaned"`
	Bytes        uint64 `json:"bytes"`
	HandedOver   uint64 `json:"handed_over"` // records moved to a new owner by SetAckers
	Adopted      uint64 `json:"adopted"`     // records taken over from another acker
	Forwarded    uint64 `json:"forwarded"`   // messages' entries passed on to a root's new acker
	// BadMessages counts what the acker dropped as malformed: messages,
	// handed-over records naming no spout task or client it can tell, and
	// notifications for no spout task. Their roots replay at their deadline.
	BadMessages uint64 `json:"bad_messages"`
	Rejected    uint64 `json:"rejected"` // inits refused (duplicate, task too large, the ledger full) and handed-over records refused
	Dropped     uint64 `json:"dropped"`  // acks and fails for unknown roots refused: the ledger was full
	// ClientsRefused counts remote clients' Tracks refused: too many clients
	// at once (tracker.MaxClients), or a task id another client still uses.
	ClientsRefused uint64 `json:"clients_refused"`
}

// RunStats is the account of a finished run.
type RunStats struct {
	Progress
	Ackers []AckerStats
	// Counters holds each counter component's final window, every key.
	Counters map[string]*CounterResult
}

// Run starts every spout task on c and waits until every task has drained,
// calling progress (if not nil) every ReportEvery. It returns early with the
// context's error, or with the errors tasks report. A runtime runs once: its
// tasks keep their state, so a second Run is an error.
func (rt *Runtime) Run(ctx context.Context, c *cluster.Cluster, progress func(Progress)) (*RunStats, error) {
	if !rt.ran.CompareAndSwap(false, true) {
		return nil, errors.New("run: this runtime has run already; make a new one")
	}
	e := rt.env
	start := time.Now()
	rep := newReporter(e.topo, true, e.log)
	rt.start = start
	rt.run.Store(rep)
	root := c.ActorSystem.Root
	pid := root.Spawn(actor.PropsFromFunc(rep.receive))
	defer root.Stop(pid)
	e.reporter.Store(pid)
	defer e.reporter.Store(nil)
	defer rt.stopTasks(c) // their timers and sources go with them

	rpid := &messages.Pid{Address: pid.Address, Id: pid.Id}
	// Every member routes by this member's acker set, whatever it missed.
	if err := rt.announce(ctx, c, true); err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	if err := rt.startSpouts(c, rep, rpid); err != nil {
		return nil, err
	}
	// A member that leaves takes its tasks' state along; repair it. Ackers
	// and tasks that start on a member that joined or took them over learn
	// the acker set again.
	var lostAt, changedAt atomic.Int64
	sub := c.ActorSystem.EventStream.Subscribe(func(evt any) {
		t, ok := evt.(*cluster.ClusterTopology)
		if !ok || len(t.Left)+len(t.Joined) == 0 {
			return
		}
		changedAt.Store(time.Now().UnixNano())
		if len(t.Left) > 0 {
			lostAt.Store(time.Now().UnixNano())
			e.log.Warnf("run: %d member(s) left; restarting their spout tasks and re-sending drains", len(t.Left))
		}
	})
	defer c.ActorSystem.EventStream.Unsubscribe(sub)
	tick := time.NewTicker(e.cfg.ReportEvery)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("run: %w", ctx.Err())
		case <-rep.allDone:
			done = true
		case <-rep.moved: // a spout task moved to another member: start it there
			for _, task := range rep.restarts() {
				if err := rt.startSpout(c, rep, task, rpid); err != nil {
					e.log.WithError(err).Warn("run: restarting a moved spout task")
				}
			}
			continue
		case <-tick.C:
			rt.Stages() // logs a stage that stays overloaded
			if l := lostAt.Load(); l != 0 && time.Since(time.Unix(0, l)) < e.cfg.spoutDeadline()+5*time.Second {
				rt.resume(c, rep, rpid)
			}
			// Placement settles over a moment: announce for a few seconds.
			if ch := changedAt.Load(); ch != 0 && time.Since(time.Unix(0, ch)) < announceFor {
				if err := rt.announce(ctx, c, true); err != nil {
					e.log.WithError(err).Warn("run: announcing the acker set after a membership change")
				}
			}
		}
		if err := rep.err(); err != nil {
			return nil, fmt.Errorf("run: %w", err)
		}
		if progress != nil {
			p := rep.progress()
			p.Elapsed = time.Since(start)
			progress(p)
		}
	}
	st := &RunStats{Progress: rep.progress()}
	st.Elapsed = time.Since(start)
	ackers, err := rt.Ackers(c)
	if err != nil { // the roots are all done: the stats of the ackers that answered will do
		e.log.WithError(err).Warn("run: acker stats")
	}
	st.Ackers = ackers
	for _, comp := range e.topo.Components {
		if !comp.counter {
			continue
		}
		qctx, cancel := context.WithTimeout(ctx, finalQueryWithin) // every key of a big window takes a while
		res, err := rt.Query(qctx, c, comp.Name, &messages.CounterQuery{All: true})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("run: final window: %w", err)
		}
		if st.Counters == nil {
			st.Counters = map[string]*CounterResult{}
		}
		st.Counters[comp.Name] = res
	}
	return st, nil
}

// startSpouts sends StartSpout to every spout task not done yet: at the
// start, after a spout task moved (its new activation resumes from the
// state it handed over) and after a member left (a started task ignores
// it; one that died with its member starts afresh elsewhere, from the last
// state it handed over if it ever moved, and re-reads its source, so its
// roots are processed at least once).
func (rt *Runtime) startSpouts(c *cluster.Cluster, rep *reporter, reporter *messages.Pid) error {
	e := rt.env
	for task := range uint32(e.topo.Tasks()) {
		if !e.topo.tasks[task].Spout || rep.isDone(task) {
			continue
		}
		if err := rt.startSpout(c, rep, task, reporter); err != nil {
			return err
		}
	}
	return nil
}

// startSpout sends StartSpout to one spout task, with its latest state.
func (rt *Runtime) startSpout(c *cluster.Cluster, rep *reporter, task uint32, reporter *messages.Pid) error {
	e := rt.env
	p := c.Get(e.topo.identity(task), KindSpout)
	if p == nil {
		return fmt.Errorf("run: no member hosts spout task %s", e.topo.identity(task))
	}
	c.ActorSystem.Root.Send(p, &messages.StartSpout{Reporter: reporter, State: rep.stateOf(task), Stop: rt.stopping.Load(), ShareSplits: rep.share})
	return nil
}

// StopSources ends the run under way as if its sources had ended: every
// spout task, wherever it runs (and one that starts later, moved or
// restarted after a crash), reads no more, finishes its roots in flight,
// closes its source (which commits what finished: a Kafka group's
// offsets, JetStream acks, the ingest log's reader offset) and drains, and
// Run returns as for a finite input. It is how a batch job over a source
// that never ends by itself (a broker, the ingest log) is stopped.
func (rt *Runtime) StopSources(c *cluster.Cluster) error {
	rt.stopping.Store(true) // a run about to start its spout tasks starts them stopped
	rep, pid := rt.run.Load(), rt.env.reporter.Load()
	if rep == nil || pid == nil {
		return errors.New("stop sources: no run under way")
	}
	return rt.startSpouts(c, rep, &messages.Pid{Address: pid.Address, Id: pid.Id})
}

// resume repairs what a member took along when it left: spout tasks start
// again, and every task that is done drains its downstream tasks again (a
// task that restarted lost the drains it had; the others ignore repeats).
func (rt *Runtime) resume(c *cluster.Cluster, rep *reporter, reporter *messages.Pid) {
	e := rt.env
	if err := rt.startSpouts(c, rep, reporter); err != nil {
		e.log.WithError(err).Warn("run: restarting spout tasks")
	}
	var res resolver
	res.c, res.watch = c, func(*actor.PID) {}
	for task := range uint32(e.topo.Tasks()) {
		if rep.isDone(task) {
			sendDrains(e, task, &res, c.ActorSystem.Root, pidOf(reporter))
		}
	}
}

// stopTasks stops every task and acker of the topology, wherever they
// run, and waits a moment for them to have stopped: no timer keeps a
// finished run's state alive, and the next run (a driver started again
// against the same workers) activates fresh tasks, not ones that ran —
// a spout task that has started ignores another StartSpout.
func (rt *Runtime) stopTasks(c *cluster.Cluster) {
	e := rt.env
	var pids []*actor.PID
	for task := range uint32(e.topo.Tasks()) {
		if p := c.Get(e.topo.identity(task), e.topo.kindOf(task)); p != nil {
			pids = append(pids, p)
		}
	}
	for n := range int(e.maxAckers.Load()) {
		if p := c.Get(tracker.AckerIdentity(n), KindAcker); p != nil {
			pids = append(pids, p)
		}
	}
	var wg sync.WaitGroup
	for _, p := range pids {
		f := c.ActorSystem.Root.StopFuture(p)
		wg.Go(func() { _ = f.Wait() })
	}
	stopped := make(chan struct{})
	go func() { wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(stopWait):
		e.log.Warnf("run: not every task had stopped %v after the run", stopWait)
	}
}

// stopWait bounds how long a run waits for its tasks to stop at its end.
const stopWait = 5 * time.Second

// reporter collects TaskReports; it runs as a local actor, read by Run.
type reporter struct {
	log     logrus.FieldLogger
	mu      sync.Mutex
	tasks   map[uint32]*messages.TaskReport
	states  map[uint32]*messages.SpoutState // of spout tasks: handed over as they moved, or their checkpoints
	restart map[uint32]bool                 // moved spout tasks to start again
	moved   chan struct{}                   // a spout task moved: start it again
	total   map[uint32]int64
	want    int
	done    int
	errs    map[uint32]string // first error per task
	allDone chan struct{}
	share   bool                    // spout tasks share their sources' splits: grant them
	splits  map[uint32]*splitGrants // by spout component (its first task)
	topo    *Topology               // what split requests are checked against
	// sharing is, by spout component (its first task) and whether a task
	// shares its source's splits, a task that said so
	sharing map[uint32]map[bool]uint32
	// emitted is the highest sum of the tasks' Emitted: a task that started
	// again after its member died counts from zero, and a counter of
	// tuples must not go down.
	emitted uint64
}

// splitGrants is who holds which split of a spout component's source.
type splitGrants struct {
	splits int32              // the source's splits, as the first request said
	next   int32              // the first split nobody holds
	held   map[uint32][]int32 // by task, in the order granted (ascending)
}

// newReporter makes the reporter of a run of topo; share says that its
// spout tasks share their sources' splits, and it grants them.
func newReporter(topo *Topology, share bool, log logrus.FieldLogger) *reporter {
	return &reporter{log: log, tasks: map[uint32]*messages.TaskReport{}, errs: map[uint32]string{}, want: topo.Tasks(),
		allDone: make(chan struct{}), states: map[uint32]*messages.SpoutState{}, restart: map[uint32]bool{},
		moved: make(chan struct{}, 1), share: share, splits: map[uint32]*splitGrants{}, topo: topo,
		sharing: map[uint32]map[bool]uint32{}}
}

// grant answers a spout task's SplitRequest: the split it was granted
// after m.Last before, if any (it started again from a state older than
// that grant), else the next split nobody holds, else -1. Each split is so
// held by one task, and a task that starts again from an older state is
// granted again what it held since. It says what is wrong with a
// malformed request instead.
func (r *reporter) grant(m *messages.SplitRequest) (split int32, err error) {
	if err := r.checkSplitRequest(m); err != nil {
		return 0, fmt.Errorf("spout task %d's split request: %w", m.Task, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.splits[m.FirstTask]
	if g == nil {
		g = &splitGrants{splits: int32(m.Splits), next: int32(m.Parallel), held: map[uint32][]int32{}}
		r.splits[m.FirstTask] = g
	}
	if g.splits != int32(m.Splits) { // a member with another build
		return 0, fmt.Errorf("spout task %d's split request: its source has %d splits, its component's first request said %d", m.Task, m.Splits, g.splits)
	}
	held, ok := g.held[m.Task]
	if !ok {
		held = []int32{int32(m.Task - m.FirstTask)} // its first split
	}
	i := slices.Index(held, m.Last)
	switch {
	case i >= 0 && i+1 < len(held):
		return held[i+1], nil
	case i < 0:
		r.log.Warnf("reporter: spout task %d asks for the split after %d, which it was never granted; granting the next", m.Task, m.Last)
	}
	if g.next >= int32(m.Splits) {
		return -1, nil
	}
	split = g.next
	g.next++
	g.held[m.Task] = append(held, split)
	return split, nil
}

// checkSharing says what is wrong if m's spout task shares its source's
// splits and another task of its spout does not, or the other way round:
// a task that reads its own share would read splits granted to the
// others. r.mu is held.
func (r *reporter) checkSharing(m *messages.TaskReport) error {
	if !r.share || !m.Started || int(m.Task) >= len(r.topo.tasks) || !r.topo.tasks[m.Task].Spout {
		return nil
	}
	c := r.topo.tasks[m.Task]
	seen := r.sharing[c.FirstTask]
	if seen == nil {
		seen = map[bool]uint32{}
		r.sharing[c.FirstTask] = seen
	}
	seen[m.SharesSplits] = m.Task
	if other, ok := seen[!m.SharesSplits]; ok {
		sharing, not := m.Task, other
		if !m.SharesSplits {
			sharing, not = other, m.Task
		}
		return fmt.Errorf("spout %s: task %d shares its source's splits and task %d does not; their sources must all implement source.Splits or none (a wrapper must pass it on)", c.Name, sharing, not)
	}
	return nil
}

// checkSplitRequest says what is wrong with m, if anything: it must come
// from a spout task of the run's topology, name its component as the
// topology does, and ask after a split the source has.
func (r *reporter) checkSplitRequest(m *messages.SplitRequest) error {
	if int(m.Task) >= len(r.topo.tasks) || !r.topo.tasks[m.Task].Spout {
		return fmt.Errorf("task %d is no spout task of the topology", m.Task)
	}
	c := r.topo.tasks[m.Task]
	switch {
	case m.FirstTask != c.FirstTask || int(m.Parallel) != c.Parallel:
		return fmt.Errorf("its component is tasks %d..+%d, not %d..+%d", c.FirstTask, c.Parallel, m.FirstTask, m.Parallel)
	case m.Splits < m.Parallel:
		return fmt.Errorf("%d splits for %d tasks", m.Splits, m.Parallel)
	case m.Last < 0 || uint32(m.Last) >= m.Splits:
		return fmt.Errorf("no split %d of %d", m.Last, m.Splits)
	}
	return nil
}

func (r *reporter) receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*messages.ProgressRequest); ok {
		ctx.Respond(r.sum())
		return
	}
	if m, ok := ctx.Message().(*messages.SplitRequest); ok {
		from := pidOf(m.From)
		if from == nil {
			r.log.Errorf("reporter: dropping a split request that names no sender: %v", m)
			return
		}
		split, err := r.grant(m)
		answer := &messages.SplitGrant{Split: split, After: m.Last}
		if err != nil {
			r.log.WithError(err).Error("reporter: refusing a split request")
			answer.Error = err.Error()
		}
		ctx.Send(from, answer)
		return
	}
	if m, ok := ctx.Message().(*messages.SpoutMoved); ok && m.State != nil {
		r.mu.Lock()
		r.keep(m.Task, m.State)
		r.restart[m.Task] = true
		r.mu.Unlock()
		ctx.Respond(&messages.SpoutMoved{Task: m.Task}) // the state is safe here
		select {
		case r.moved <- struct{}{}:
		default: // a start is pending already
		}
		return
	}
	m, ok := ctx.Message().(*messages.TaskReport)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	prev := r.tasks[m.Task]
	if prev != nil && prev.Done {
		return
	}
	if m.Checkpoint != nil { // newer than what the task handed over when it last moved
		r.keep(m.Task, m.Checkpoint)
		m.Checkpoint = nil
	}
	r.tasks[m.Task] = m
	if _, seen := r.errs[m.Task]; m.Error != "" && !seen {
		r.errs[m.Task] = m.Error
	}
	if err := r.checkSharing(m); err != nil {
		r.errs[m.Task] = err.Error()
	}
	if m.Done {
		if r.done++; r.done == r.want {
			close(r.allDone)
		}
	}
}

// keep takes st as where task starts again, unless it is malformed: then
// the one before stays (the task re-reads a little more), and the refusal
// is logged. r.mu is held.
func (r *reporter) keep(task uint32, st *messages.SpoutState) {
	if err := checkSpoutState(st); err != nil {
		r.log.WithError(err).Errorf("reporter: spout task %d's state; keeping the one before", task)
		return
	}
	r.states[task] = st
}

// restarts takes the moved spout tasks waiting to be started again.
func (r *reporter) restarts() []uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []uint32
	for t := range r.restart {
		out = append(out, t)
	}
	clear(r.restart)
	return out
}

// stateOf is the latest state a spout task handed over when it moved.
func (r *reporter) stateOf(task uint32) *messages.SpoutState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.states[task]
}

func (r *reporter) isDone(task uint32) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.tasks[task]
	return t != nil && t.Done
}

func (r *reporter) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.errLocked()
}

// takeErr is err, forgetting the errors: a service logs them and goes on.
func (r *reporter) takeErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.errLocked()
	clear(r.errs)
	return err
}

func (r *reporter) errLocked() error {
	if len(r.errs) == 0 {
		return nil
	}
	errs := make([]string, 0, len(r.errs))
	for _, e := range r.errs {
		errs = append(errs, e)
	}
	sort.Strings(errs)
	return errors.New(strings.Join(errs, "; "))
}

func (r *reporter) progress() Progress { return progressOf(r.sum()) }

// sum is the reports of every task summed, their latency histograms
// merged.
func (r *reporter) sum() *messages.TaskReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s messages.TaskReport
	var lat tracker.Latency
	for _, t := range r.tasks {
		lat.Add(t.Latency)
		s.LatencySumMicros += t.LatencySumMicros
		s.Roots += t.Roots
		s.Completed += t.Completed
		s.Failed += t.Failed
		s.TimedOut += t.TimedOut
		s.Replayed += t.Replayed
		s.DeadLettered += t.DeadLettered
		s.InFlight += t.InFlight
		s.PeakInFlight += t.PeakInFlight
		s.Emitted += t.Emitted
		if t.Total >= 0 && s.Total >= 0 {
			s.Total += t.Total
		} else {
			s.Total = -1
		}
	}
	r.emitted = max(r.emitted, s.Emitted)
	s.Emitted = r.emitted
	s.Latency = lat[:]
	return &s
}

// progressOf is the Progress a summed report says.
func progressOf(s *messages.TaskReport) Progress {
	var lat tracker.Latency
	lat.Add(s.Latency)
	p := Progress{Roots: s.Roots, Completed: s.Completed, Failed: s.Failed, TimedOut: s.TimedOut, Replayed: s.Replayed,
		DeadLettered: s.DeadLettered, InFlight: s.InFlight, PeakInFlight: s.PeakInFlight, Tuples: s.Emitted, Total: s.Total,
		LatencySum: time.Duration(s.LatencySumMicros) * time.Microsecond}
	p.LatencyP50, p.LatencyP99 = lat.Quantile(0.5), lat.Quantile(0.99)
	p.Latency, p.LatencyCount = lat.Buckets()
	return p
}

// pidOf converts a wire Pid.
func pidOf(p *messages.Pid) *actor.PID {
	if p == nil || p.Id == "" {
		return nil
	}
	return actor.NewPID(p.Address, p.Id)
}

// resolver finds and caches the PIDs of virtual actors. It watches every
// PID it hands out, so that the owner forgets one whose actor stopped (the
// next get re-activates the grain, on whichever member now owns it), and
// it forgets them all when the cluster's members change (grains move).
type resolver struct {
	c     *cluster.Cluster
	watch func(*actor.PID)
	cache map[string]*actor.PID
	epoch *atomic.Uint64 // bumped by every topology change
	seen  uint64
}

func newResolver(ctx actor.Context, e *env, c *cluster.Cluster) resolver {
	e.watchTopology(c)
	return resolver{c: c, watch: ctx.Watch, epoch: &e.epoch}
}

// watchTopology counts the member's topology changes, and the evacuations
// announced by members about to leave, in e.epoch.
func (e *env) watchTopology(c *cluster.Cluster) {
	e.topoOnce.Do(func() {
		c.ActorSystem.EventStream.Subscribe(func(ev any) {
			switch ev.(type) {
			case *cluster.ClusterTopology, *messages.MemberEvacuated:
				e.epoch.Add(1)
			}
		})
	})
}

// forget drops a PID whose actor terminated.
func (r *resolver) forget(who *actor.PID) {
	for k, p := range r.cache {
		if p.Equal(who) {
			delete(r.cache, k)
		}
	}
}

func (r *resolver) get(kind, identity string) *actor.PID {
	if r.epoch != nil {
		if n := r.epoch.Load(); n != r.seen {
			clear(r.cache)
			r.seen = n
		}
	}
	key := kind + "\x00" + identity
	if p, ok := r.cache[key]; ok {
		return p
	}
	if r.cache == nil {
		r.cache = map[string]*actor.PID{}
	}
	p := r.c.Get(identity, kind)
	if p != nil {
		r.cache[key] = p
		r.watch(p)
	}
	return p
}

// local says whether task target of e's topology runs on this member;
// asking activates it where the placement puts it.
func (r *resolver) local(e *env, target uint32) bool {
	p := r.get(e.topo.kindOf(target), e.topo.identity(target))
	return p != nil && p.Address == r.c.ActorSystem.Address()
}

// Query asks every task of counter component name and merges the answers:
// the window values of q.Keys, the q.Top entries, or all of them. It can be
// called while the topology runs, from any member.
func (rt *Runtime) Query(ctx context.Context, c *cluster.Cluster, name string, q *messages.CounterQuery) (*CounterResult, error) {
	comp, ok := rt.env.topo.Component(name)
	if !ok || !comp.counter {
		return nil, fmt.Errorf("query %s: no counter component of that name", name)
	}
	if q == nil {
		q = &messages.CounterQuery{}
	}
	timeout := askWithin
	if d, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(d), time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type answer struct {
		task int
		m    *messages.CounterResult
		err  error
	}
	answers := make(chan answer, comp.Parallel)
	for i := range comp.Parallel {
		id := rt.env.topo.identity(comp.FirstTask + uint32(i))
		go func() {
			res, err := c.Request(id, KindCounter, q, cluster.WithTimeout(timeout))
			m, ok := res.(*messages.CounterResult)
			if err == nil && !ok {
				err = fmt.Errorf("unexpected answer %T", res)
			}
			if err != nil {
				err = fmt.Errorf("%s: %w", id, err)
			}
			answers <- answer{i, m, err}
		}()
	}
	r := &CounterResult{Keys: make([]window.Entry, len(q.Keys)), Distinct: map[string]uint64{},
		Repeats: map[string]uint64{}, Seen: map[string]bool{}}
	for i, k := range q.Keys {
		r.Keys[i].Key = k
	}
	top := map[string]window.Value{}
	answered := make([]bool, comp.Parallel)
	var errs []error
wait:
	for range comp.Parallel {
		select {
		case <-ctx.Done():
			break wait
		case a := <-answers:
			if a.err == nil {
				a.err = r.merge(a.m, len(q.Keys), top)
			}
			answered[a.task] = a.err == nil
			if a.err != nil {
				errs = append(errs, a.err)
			}
		}
	}
	for i, ok := range answered {
		if !ok {
			r.Missing = append(r.Missing, rt.env.topo.identity(comp.FirstTask+uint32(i)))
		}
	}
	n := int(q.Top)
	if q.All {
		n = -1
	}
	r.Top = rank(top, q.BySum, n)
	r.trim()
	if len(r.Missing) > 0 {
		if len(errs) == 0 {
			errs = append(errs, ctx.Err())
		}
		if len(r.Missing) == comp.Parallel { // r holds nothing but Missing
			return r, fmt.Errorf("query %s: no counter task answered (%s): %w", name, strings.Join(r.Missing, ", "), errors.Join(errs...))
		}
		return r, fmt.Errorf("query %s: %w: %d of %d counter tasks did not answer (%s): %w", name, ErrPartial,
			len(r.Missing), comp.Parallel, strings.Join(r.Missing, ", "), errors.Join(errs...))
	}
	return r, nil
}

// ErrPartial is wrapped by the error of a query that some counter tasks did
// not answer in time (their member is down, say): the result holds the
// others' answers, and CounterResult.Missing names the tasks. When none
// answered there is no result.
var ErrPartial = errors.New("partial answer")
