package tracker

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/acktor/acktor/internal/assert"
	"github.com/acktor/acktor/messages"
)

// PendingRoot is a root in flight as its spout task keeps it (the tracking
// paper's pending state).
type PendingRoot struct {
	ID       uint64 // the source's id
	Time     int64  // the root's time, unix ns: replays keep it
	Deadline int64  // unix ns: past it the task fails the root itself
	Attempt  int32  // 0 for the first emission
}

// SpoutConfig shapes a Spout.
type SpoutConfig struct {
	// Task is the spout task's id: the high bits of its springIds.
	Task uint32
	// MaxPending bounds the roots in flight: past it the task stops reading.
	MaxPending int
	// MaxReplays is how often a failed root is replayed before it is
	// dead-lettered.
	MaxReplays int
	// BatchSize is the roots a pull reads at most: the task pulls again once
	// a batch worth of room is free (small pulls make small tuple batches
	// all the way down).
	BatchSize int
	// MaxEarly bounds the notifications held before Start.
	MaxEarly int
	// Deadline is how long, in ns, a root may stay open before the task
	// fails it itself: later than any acker's expiry, so that a root whose
	// acker died (with its record) still replays.
	Deadline int64
	// Draw returns a random start for the task's sequence (the task's
	// randomness, injected). It must leave the top bit of SpringBits clear,
	// room to count: 2^33 roots, since each takes a block of 64 numbers.
	Draw func() uint64
	// Track makes an empty Track for the task; the actors reuse theirs. Nil:
	// a fresh message each time.
	Track func(task uint32) *messages.Track
	// Untracked: no acker tracks roots (the topology has none), and a root
	// completes once emitted.
	Untracked bool
	// IdleWait is the longest wait before the source is asked again after
	// it had no root ready; at least MinIdleWait (0 would ask again at
	// once, spinning).
	IdleWait time.Duration
}

// MinIdleWait is the first wait after a source that had roots is not
// ready.
const MinIdleWait = 50 * time.Microsecond

// Verdict is what becomes of a root that left the in-flight set.
type Verdict uint8

const (
	// Done: the root's tree completed; its source may forget it.
	Done Verdict = iota
	// Replay: emit the root again from its source's payload, as attempt
	// Root.Attempt+1.
	Replay
	// Redeliver: hand the root back to its broker, which hands it out
	// again through the source.
	Redeliver
	// DeadLetter: give up on the root, with Reason.
	DeadLetter
)

// Settled is a root that left the in-flight set, and what becomes of it.
type Settled struct {
	Root    PendingRoot
	Verdict Verdict
	// Failed: the root failed (every verdict but Done); TimedOut: at its
	// acker or past the spout's own deadline.
	Failed, TimedOut bool
	Reason           string // why it failed
}

// ErrTooEarly is what Step answers for a notification it cannot hold: the
// task has not started and holds MaxEarly already. Its roots replay at
// their deadline.
var ErrTooEarly = errors.New("spout: too many notifications before start")

// Spout is a spout task's tracking decisions, pure: which springId a root
// gets, which acker hears of it and when, which roots are in flight and
// until when, what becomes of a failed root (replayed, redelivered by its
// broker, dead-lettered), how much to read the source and when again, what
// each answer of the source means, when the task is finished, and the
// task's counts. Its actor reads the source and tells the core what it
// answered (Took, NotReady, Exhausted, BadRecord, Broke, Reread), emits
// the tuples and delivers what Ready, Again and the Settled lists say.
type Spout struct {
	cfg        SpoutConfig
	seq        uint64 // the last springId's block, its last sequence number
	near       []bool // by acker number: on this task's member (SetNear)
	turnSet    []bool // by acker number: whose turn it is (turn); nil: no turns
	turnOf     int    // the ackers of the set it was made for
	turnAt     int    // the last acker in turnSet
	turnLeft   int    // roots turnSet gets yet
	pending    *pendingSet
	tracks     []*messages.Track // per acker, under way
	out        []Out
	started    bool
	redelivers bool          // the source's broker redelivers failed roots
	held       []any         // notifications before Start
	expired    []PendingRoot // scratch of Expire
	// Until shortUntil, roots opened get a deadline of at most short (ns):
	// a member died, and until every member knows, a message can still go
	// to it and be lost.
	shortUntil, short int64
	ended             bool // the source said io.EOF (or broke, or the run stops)
	final             bool // ... and is read no more: a redelivery does not reopen it

	// The pull under way: roots read, whether it stopped, the wait before
	// the next; idle is the wait after the source was last not ready, and
	// queued says a pull is queued or scheduled.
	batch  int
	stop   bool
	wait   time.Duration
	idle   time.Duration
	queued bool

	// The task's counts, for its reports (messages.TaskReport).
	roots, completed, failed, timedOut, replayed, deadLettered, peak uint64

	lat    Latency // complete latencies
	latSum uint64  // µs, the sum of what lat counts
}

// NewSpout makes the spout task cfg.Task's tracker, its sequence started
// at a random point (Draw), so that a restarted task reuses no springId of
// a record still in flight.
func NewSpout(cfg SpoutConfig) *Spout {
	if cfg.Track == nil {
		cfg.Track = func(task uint32) *messages.Track { return &messages.Track{Task: task} }
	}
	return &Spout{cfg: cfg, seq: cfg.Draw(), pending: newPendingSet(cfg.MaxPending), turnAt: int(cfg.Task)}
}

// Len is the roots in flight.
func (s *Spout) Len() int { return s.pending.len() }

// Full says whether the roots in flight reached MaxPending.
func (s *Spout) Full() bool { return s.pending.len() >= s.cfg.MaxPending }

// nearBits sizes the blocks of the sequence that roots take their
// springIds from: one root a block, so that the pending ring stays dense,
// and 64 ids to choose among for one whose acker's turn it is (turn), or
// else a near acker's. With an eighth of the ring's owners in the turn, 1
// root in 5000 finds none; with a third of the ackers near, 1 root in
// 10^11 finds no near one (and takes the block's first). With 8 ids a
// block it was 4 %, and each pull's few far roots still sent a Track to
// each far acker, and each flush of their acks and completions a message:
// about as many messages crossed as without a preference.
const (
	nearBits = 6
	nearMask = 1<<nearBits - 1
)

// turnShare: an acker's turn goes to one in this many of the near ackers
// at a time (at least one), so that finding an id of theirs checks about
// this many ids of a block, whatever the acker count. Below minTurn near
// ackers there are no turns: a pull reaches few ackers anyway, and at 2
// the search cost more than the messages it saved (the word count's CPU
// over 10 alternating runs 1.16× the untracked run's against 1.15×; at 4
// ackers 1.11× against 1.17×).
const (
	turnShare = 8
	minTurn   = 4
)

// SetNear says which ackers, by number, run on the task's own member; nil
// (or none, or all) for no preference. NextSpringID then gives roots whose
// acker is near, so that their inits, their completions and the acks of
// the tasks on this member do not cross the network.
func (s *Spout) SetNear(near []bool) {
	n := 0
	for _, x := range near {
		if x {
			n++
		}
	}
	s.near, s.turnLeft = nil, 0
	if n > 0 && n < len(near) {
		s.near = slices.Clone(near)
	}
}

// NextSpringID is the springId of the next root emitted: a replay never
// shares its id with an earlier attempt, so that a late ack of that attempt
// cannot touch it. It is the first id of the next block that an acker
// owns whose turn it is (turn) under d, else the first a near acker
// (SetNear) owns, else the block's first.
func (s *Spout) NextSpringID(d *Directory) uint64 {
	start := (s.seq | nearMask) + 1
	s.seq = start | nearMask
	first := SpringID(s.cfg.Task, start) // the block's ids differ in their low bits only
	if d == nil || d.Ackers <= 1 {
		return first
	}
	if id, ok := d.FirstOwned(first, nearMask+1, s.turn(d)); ok {
		return id
	}
	if near := s.nearOf(d); near != nil {
		if id, ok := d.FirstOwned(first, nearMask+1, near); ok {
			return id
		}
	}
	return first
}

// turn is the set of ackers, by number, whose turn it is to own the
// roots: turnShare's share of the near ackers (from minTurn of them on),
// each share in turn for BatchSize roots. A pull's roots then go to one
// acker or a few, where spread over the ring they went to every acker:
// one Track for the pull instead of one for each acker, and the acks that
// processors send for them and the completions for the spout in as few
// messages. At 8 ackers on one member that took the word count's messages
// to the ackers from 96 000 to 27 000 for 1M lines; over time the load is
// spread as before.
func (s *Spout) turn(d *Directory) []bool {
	if s.turnLeft > 0 && s.turnOf == d.Ackers {
		s.turnLeft--
		return s.turnSet
	}
	s.turnOf, s.turnLeft = d.Ackers, max(s.cfg.BatchSize, 1)-1
	near := s.nearOf(d)
	n := d.Ackers
	if near != nil {
		n = 0
		for _, x := range near[:d.Ackers] {
			if x {
				n++
			}
		}
	}
	if n == 0 { // none of this set's ackers is near
		near, n = nil, d.Ackers
	}
	if n < minTurn {
		s.turnSet = nil
		return nil
	}
	if len(s.turnSet) != d.Ackers {
		s.turnSet = make([]bool, d.Ackers)
	}
	clear(s.turnSet)
	for k := (n + turnShare - 1) / turnShare; k > 0; {
		s.turnAt = (s.turnAt + 1) % d.Ackers
		if near == nil || near[s.turnAt] {
			s.turnSet[s.turnAt] = true
			k--
		}
	}
	return s.turnSet
}

// nearOf is the near ackers for d's acker set, by number (nil: no
// preference), as long as its ackers at least.
func (s *Spout) nearOf(d *Directory) []bool {
	if s.near != nil && len(s.near) < d.Ackers { // the set grew: the new ones are far
		s.near = append(s.near, make([]bool, d.Ackers-len(s.near))...)
	}
	return s.near
}

// Open records root r emitted under springID at now, the ids of its tuples
// folding to initXor, and queues its init for the acker d names. Untracked,
// the root completes at once instead: true, and its source may forget it.
func (s *Spout) Open(springID uint64, r PendingRoot, initXor uint64, d *Directory, now int64) (done bool) {
	if s.cfg.Untracked {
		s.completed++
		return true
	}
	r.Deadline = now + s.cfg.Deadline
	if now < s.shortUntil {
		r.Deadline = now + min(s.cfg.Deadline, s.short)
	}
	s.pending.put(springID, r)
	s.peak = max(s.peak, uint64(s.pending.len()))
	a := d.AckerOf(springID)
	if a >= len(s.tracks) { // the acker set grew
		s.tracks = append(s.tracks, make([]*messages.Track, a+1-len(s.tracks))...)
	}
	t := s.tracks[a]
	if t == nil {
		t = s.cfg.Track(s.cfg.Task)
		t.Version, t.Routing = d.Version, d.Routing
		s.tracks[a] = t
	} else if t.Routing != d.Routing {
		t.Version, t.Routing = 0, 0 // routed by two acker sets: the acker checks each entry
	}
	t.SpringIds = append(t.SpringIds, springID)
	t.InitXors = append(t.InitXors, initXor)
	return false
}

// settle removes the root of springID, which completed or failed at its
// acker, and returns it; false for a springId no longer in flight (an
// earlier attempt's, or a duplicate: the root moved on).
func (s *Spout) settle(springID uint64) (PendingRoot, bool) { return s.pending.take(springID) }

// expiredRoots removes the roots whose deadline passed by now (their acker may
// be gone) and appends them to out.
func (s *Spout) expiredRoots(now int64, out []PendingRoot) []PendingRoot {
	return s.pending.takeExpired(now, out)
}

// replayable says whether a failed root may be replayed; past MaxReplays it
// is dead-lettered.
func (s *Spout) replayable(r PendingRoot) bool { return int(r.Attempt) < s.cfg.MaxReplays }

// Flush queues the inits gathered since the last Flush, one Track per
// acker, for Ready.
func (s *Spout) Flush() {
	for a, t := range s.tracks {
		if t == nil {
			continue
		}
		s.tracks[a] = nil
		assert.That(len(t.SpringIds) == len(t.InitXors) && len(t.SpringIds) > 0, "spout: a Track with no inits or uneven arrays")
		s.out = append(s.out, Out{Dest: ToAcker, Acker: a, Msg: t})
	}
}

// Ready returns what the calls since the last Ready decided to send.
func (s *Spout) Ready() []Out {
	out := s.out
	s.out = s.out[:0]
	return out
}

// Each calls f with every root in flight, for the task's state when it
// moves; f must not change the Spout.
func (s *Spout) Each(f func(springID uint64, r PendingRoot)) { s.pending.each(f) }

// Start begins the task at now: redelivers says whether its source's
// broker redelivers failed roots itself (source.Redeliverer). The
// notifications held since the activation settle now, after Restore gave
// the roots they concern. A task started again from its checkpoint (its
// member died) then fails the roots still in flight, restarted of them:
// their trees may have died with the member, and a replay costs less than
// waiting for their deadline.
func (s *Spout) Start(redelivers, checkpoint bool, now int64, out []Settled) (_ []Settled, restarted int) {
	if s.started {
		return out, 0
	}
	s.started, s.redelivers = true, redelivers
	for _, m := range s.held {
		out, _ = s.Step(m, now, out)
	}
	s.held = nil
	if checkpoint {
		restarted = s.pending.len()
		out = s.FailAll("started again from its checkpoint", out)
	}
	return out, restarted
}

// Started says whether Start was called.
func (s *Spout) Started() bool { return s.started }

// Step hands the task an acker's or a processor's notification
// (*messages.Completed, *messages.Failed, *messages.Rejected) at now and
// appends the roots it settles to out; a springId no longer in flight (an
// earlier attempt's, a duplicate) settles nothing. Before Start it is
// held: a moved task's new activation hears from ackers before its state
// comes.
func (s *Spout) Step(m any, now int64, out []Settled) ([]Settled, error) {
	if !s.started {
		if len(s.held) >= s.cfg.MaxEarly {
			return out, ErrTooEarly
		}
		s.held = append(s.held, m)
		return out, nil
	}
	switch m := m.(type) {
	case *messages.Completed:
		for _, id := range m.SpringIds {
			if p, ok := s.settle(id); ok {
				s.complete(p, now)
				out = append(out, Settled{Root: p, Verdict: Done})
			}
		}
	case *messages.Failed:
		timeout := m.Reason == messages.FailReason_FAIL_REASON_TIMEOUT
		reason := "failed by a processor"
		if timeout {
			reason = "timed out at its acker"
		}
		for _, id := range m.SpringIds {
			if p, ok := s.settle(id); ok {
				out = append(out, s.fail(p, timeout, reason))
			}
		}
	case *messages.Rejected:
		for _, id := range m.SpringIds {
			if p, ok := s.settle(id); ok { // else replayed already: its Failed came first
				s.failed++
				out = append(out, Settled{Root: p, Verdict: DeadLetter, Failed: true,
					Reason: fmt.Sprintf("rejected by %s: %s", m.Component, m.Reason)})
			}
		}
	default:
		return out, fmt.Errorf("spout: %T is no notification", m)
	}
	return out, nil
}

// Expire fails the roots whose deadline passed by now (their acker may be
// gone) and appends them to out.
func (s *Spout) Expire(now int64, out []Settled) []Settled {
	s.expired = s.expiredRoots(now, s.expired[:0])
	for _, p := range s.expired {
		out = append(out, s.fail(p, true, "passed the spout's deadline"))
	}
	return out
}

// Hasten brings the deadline of the roots of springIDs still in flight
// forward to at most deadline: a message about them could not be
// delivered (no member hosts their acker for now), and they replay once
// it passes, when the cluster has likely settled, rather than a timeout
// later.
func (s *Spout) Hasten(springIDs []uint64, deadline int64) {
	for _, id := range springIDs {
		if p, ok := s.pending.take(id); ok {
			p.Deadline = min(p.Deadline, deadline)
			s.pending.put(id, p)
		}
	}
}

// Shorten gives the roots opened until until a deadline of at most
// deadline (ns) after their opening: while the members learn of a death,
// what is sent to the dead member is lost without a word, and such roots
// replay after deadline instead of a timeout.
func (s *Spout) Shorten(until, deadline int64) { s.shortUntil, s.short = until, deadline }

// FailAll fails every root in flight, for reason, and appends them to out:
// a member died, and which trees crossed it (its ackers' records, tuples
// at its processors) cannot be told; a replay costs less than waiting for
// the deadline.
func (s *Spout) FailAll(reason string, out []Settled) []Settled {
	s.expired = s.pending.takeExpired(math.MaxInt64, s.expired[:0])
	for _, p := range s.expired {
		out = append(out, s.fail(p, false, reason))
	}
	return out
}

// complete counts root p completed at now, and its latency: it was
// emitted a Deadline's length before its deadline.
func (s *Spout) complete(p PendingRoot, now int64) {
	d := time.Duration(now + s.cfg.Deadline - p.Deadline)
	s.lat.Record(d)
	s.latSum += uint64(max(d, 0) / time.Microsecond)
	s.completed++
}

// fail decides what becomes of a root that failed: replayed (or left to
// its broker) until MaxReplays, then dead-lettered.
func (s *Spout) fail(p PendingRoot, timedOut bool, reason string) Settled {
	v := Settled{Root: p, Failed: true, TimedOut: timedOut, Reason: reason}
	s.failed++
	if timedOut {
		s.timedOut++
	}
	switch {
	case !s.replayable(p):
		v.Verdict, v.Reason = DeadLetter, fmt.Sprintf("%s after %d replays", reason, p.Attempt)
	case s.redelivers:
		v.Verdict = Redeliver
		if !s.final { // the end came (io.EOF), and now the root will again
			s.ended = false
		}
		// The root is the broker's again, and counts as a root of
		// whichever task it hands it to next (maybe another): Roots stays
		// a count of distinct roots over the tasks, so that Completed ==
		// Roots at the end.
		s.replayed++
		if s.roots > 0 { // it counted it when it took it, or took its count over
			s.roots--
		}
	default:
		v.Verdict = Replay
	}
	return v
}

// End says the source is exhausted (io.EOF); final says it is to be read
// no more (it broke, or the run is stopping), so that a redelivery does
// not reopen it.
func (s *Spout) End(final bool) { s.ended, s.final = true, s.final || final }

// Ended says whether the source is exhausted.
func (s *Spout) Ended() bool { return s.ended }

// Finished says whether the task is done: its source ended and no root is
// in flight.
func (s *Spout) Finished() bool { return s.ended && s.pending.len() == 0 }

// CanPull says whether a pull may read the source: it has not ended and
// roots in flight are under MaxPending.
func (s *Spout) CanPull() bool { return s.started && !s.ended && !s.Full() }

// WantsPull says whether settled roots freed enough room to pull again: a
// batch worth (small pulls make small tuple batches all the way down), or
// any once the source ended, to finish.
func (s *Spout) WantsPull() bool {
	return s.cfg.MaxPending-s.pending.len() >= min(s.cfg.BatchSize, s.cfg.MaxPending/2+1) || s.ended
}

// TakeHeld returns the notifications held before a Start that will not
// come here (the task moved on), to pass on.
func (s *Spout) TakeHeld() []any {
	h := s.held
	s.held = nil
	return h
}

// Restore takes over the roots in flight of the task's earlier activation.
// The sequence goes on from this activation's random start, not the
// earlier one's: a state can be resumed twice (a task that moved, then died
// with its member, restarts from the state it moved with), and the second
// activation would emit the springIds the first already gave roots whose
// records may still be in flight. A start whose next 2^36 ids would meet a
// restored root's is drawn again.
func (s *Spout) Restore(springIDs []uint64, roots []PendingRoot) {
	assert.That(len(springIDs) == len(roots), "spout: restoring uneven arrays")
	for s.seqMeets(springIDs) {
		s.seq = s.cfg.Draw()
	}
	for i, id := range springIDs {
		s.pending.put(id, roots[i])
	}
}

// seqMeets says whether one of ids lies among the next 2^36 springIds the
// task's sequence gives.
func (s *Spout) seqMeets(ids []uint64) bool {
	const mask = 1<<SpringBits - 1
	for _, id := range ids {
		if (id-s.seq-1)&mask < 1<<36 {
			return true
		}
	}
	return false
}

// Reread is what a source answered when asked for a failed root's payload
// again (source.Source.Replay), to replay it or for its dead letter.
type Reread uint8

const (
	// Read: the payload came.
	Read Reread = iota
	// Released: the source released the root to its broker, which hands
	// it out again elsewhere.
	Released
	// Unreadable: the payload could not be read.
	Unreadable
)

// Reread decides what becomes of a root settled Replay or DeadLetter once
// its source answered got (err: why the payload could not be read): a
// Replay emitted again as its next attempt, or dead-lettered when its
// payload cannot be read; nothing (false) for a root its source released.
func (s *Spout) Reread(v Settled, got Reread, err string) (Settled, bool) {
	assert.That(v.Verdict == Replay || v.Verdict == DeadLetter, "spout: rereading a root neither replayed nor dead-lettered")
	switch {
	case got == Released:
		return v, false
	case v.Verdict == Replay && got == Unreadable:
		v.Verdict, v.Reason = DeadLetter, fmt.Sprintf("%s; replay failed: %s", v.Reason, err)
	case v.Verdict == Replay:
		s.replayed++
		v.Root.Attempt++
		return v, true
	}
	s.deadLettered++ // lettered without its payload if the source kept none
	return v, true
}

// EmitFailed dead-letters root p, which could not be emitted (its tuple
// did not fit the topology's groupings): why says so.
func (s *Spout) EmitFailed(p PendingRoot, why string) Settled {
	s.deadLettered++
	return Settled{Root: p, Verdict: DeadLetter, Reason: why}
}

// Report puts the task's counts in r: roots taken, completed, failed,
// timed out, replayed, dead-lettered, in flight now and at most, and the
// complete latencies.
func (s *Spout) Report(r *messages.TaskReport) {
	r.Roots, r.Completed, r.Failed, r.TimedOut = s.roots, s.completed, s.failed, s.timedOut
	r.Replayed, r.DeadLettered, r.PeakInFlight = s.replayed, s.deadLettered, s.peak
	r.InFlight = uint64(s.pending.len())
	n := len(s.lat)
	for n > 0 && s.lat[n-1] == 0 {
		n--
	}
	r.Latency = slices.Clone(s.lat[:n])
	r.LatencySumMicros = s.latSum
}

// Resume takes over the counts of the task's earlier activation, from its
// last report r.
func (s *Spout) Resume(r *messages.TaskReport) {
	s.roots, s.completed, s.failed, s.timedOut = r.Roots, r.Completed, r.Failed, r.TimedOut
	s.replayed, s.deadLettered, s.peak = r.Replayed, r.DeadLettered, r.PeakInFlight
	s.lat.Add(r.Latency)
	s.latSum += r.LatencySumMicros
}

// Took counts a root the source handed out at now (source.Source.Next),
// and returns it to emit: at now unless the source gave it a time.
func (s *Spout) Took(r PendingRoot, now int64) PendingRoot {
	s.idle = 0
	s.roots++ // new to this task; a redelivery took a root it handed back off
	if r.Time == 0 {
		r.Time = now
	}
	return r
}

// BadRecord counts a record the source read but cannot make a root of
// (source.BadRecord), for why: a root, dead-lettered at once. The pull
// goes on.
func (s *Spout) BadRecord(id uint64, why string) Settled {
	s.roots++
	s.deadLettered++
	return Settled{Root: PendingRoot{ID: id}, Verdict: DeadLetter, Reason: why}
}

// Pull begins a pull: the task reads up to BatchSize roots while Reads
// says so, and hands the core each answer of its source (Took, BadRecord,
// NotReady, Exhausted, Broke). woken says it is the pull Again asked for.
func (s *Spout) Pull(woken bool) {
	if woken {
		s.queued = false
	}
	s.batch, s.stop, s.wait = 0, false, 0
}

// Reads says whether the pull reads another root: up to a batch, while
// there is room under MaxPending and the source answered nothing that
// stops it.
func (s *Spout) Reads() bool {
	if s.stop || s.batch >= s.cfg.BatchSize || !s.CanPull() {
		return false
	}
	s.batch++
	return true
}

// NotReady: the source has no root for now (source.ErrNotReady). The
// pull stops, and the next waits: soon after a root came, backing off to
// IdleWait while the source stays dry (quick under load, idle when idle).
func (s *Spout) NotReady() {
	s.stop = true
	s.idle = min(max(2*s.idle, MinIdleWait), s.cfg.IdleWait)
	s.wait = s.idle
}

// Exhausted: the source has no more roots (io.EOF). The pull stops, and
// the task finishes once none is in flight.
func (s *Spout) Exhausted() {
	s.stop = true
	s.End(false)
}

// Broke: the source failed. The pull stops and the source is read no
// more; the task finishes once none is in flight.
func (s *Spout) Broke() {
	s.stop = true
	s.End(true)
}

// Again says, at the end of a pull, whether to pull again and after how
// long: at once after a full batch, after the idle wait when the source
// was not ready; not while a pull is queued already, nor once the source
// ended or the roots in flight fill MaxPending (a settle pulls then, as
// WantsPull says).
func (s *Spout) Again() (wait time.Duration, ok bool) {
	if s.queued || !s.CanPull() {
		return 0, false
	}
	s.queued = true
	return s.wait, true
}
