package tracker

import (
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
	// Deadline is how long, in ns, a root may stay open before the task
	// fails it itself: later than any acker's expiry, so that a root whose
	// acker died (with its record) still replays.
	Deadline int64
	// Draw returns a random start for the task's sequence (the task's
	// randomness, injected). It must leave the top bit of SpringBits clear,
	// room to count.
	Draw func() uint64
	// Track makes an empty Track for the task; the actors reuse theirs. Nil:
	// a fresh message each time.
	Track func(task uint32) *messages.Track
}

// Spout is a spout task's tracking decisions, pure: which springId a root
// gets, which acker hears of it and when, which roots are in flight and
// until when, and whether a failed root may be replayed. Its actor reads
// the source, emits the tuples and delivers what Ready returns.
type Spout struct {
	cfg     SpoutConfig
	seq     uint64
	pending *pendingSet
	tracks  []*messages.Track // per acker, under way
	out     []Out
}

// NewSpout makes the spout task cfg.Task's tracker, its sequence started
// at a random point (Draw), so that a restarted task reuses no springId of
// a record still in flight.
func NewSpout(cfg SpoutConfig) *Spout {
	if cfg.Track == nil {
		cfg.Track = func(task uint32) *messages.Track { return &messages.Track{Task: task} }
	}
	return &Spout{cfg: cfg, seq: cfg.Draw(), pending: newPendingSet(cfg.MaxPending)}
}

// Len is the roots in flight.
func (s *Spout) Len() int { return s.pending.len() }

// Full says whether the roots in flight reached MaxPending.
func (s *Spout) Full() bool { return s.pending.len() >= s.cfg.MaxPending }

// NextSpringID is the springId of the next root emitted: a replay never
// shares its id with an earlier attempt, so that a late ack of that attempt
// cannot touch it.
func (s *Spout) NextSpringID() uint64 {
	s.seq++
	return SpringID(s.cfg.Task, s.seq)
}

// Open records root r emitted under springID at now, the ids of its tuples
// folding to initXor, and queues its init for the acker d names.
func (s *Spout) Open(springID uint64, r PendingRoot, initXor uint64, d *Directory, now int64) {
	r.Deadline = now + s.cfg.Deadline
	s.pending.put(springID, r)
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
}

// Settle removes the root of springID, which completed or failed at its
// acker, and returns it; false for a springId no longer in flight (an
// earlier attempt's, or a duplicate: the root moved on).
func (s *Spout) Settle(springID uint64) (PendingRoot, bool) { return s.pending.take(springID) }

// Expired removes the roots whose deadline passed by now (their acker may
// be gone) and appends them to out.
func (s *Spout) Expired(now int64, out []PendingRoot) []PendingRoot {
	return s.pending.takeExpired(now, out)
}

// Replayable says whether a failed root may be replayed; past MaxReplays it
// is dead-lettered.
func (s *Spout) Replayable(r PendingRoot) bool { return int(r.Attempt) < s.cfg.MaxReplays }

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
