package tracker

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acktor/acktor/messages"
)

// newSpout is spout task 5's tracker with a sequence starting at seq.
func newSpout(seq uint64) *Spout {
	return NewSpout(SpoutConfig{Task: 5, MaxPending: 4, MaxReplays: 2, BatchSize: 2, MaxEarly: 8, Deadline: 100, Draw: func() uint64 { return seq }})
}

// TestSeqMeets: a resumed spout task's sequence start is drawn again when a
// restored root's springId lies among the ids it is about to give.
func TestSeqMeets(t *testing.T) {
	const task = uint64(5) << SpringBits
	for _, tc := range []struct {
		name string
		seq  uint64
		ids  []uint64
		want bool
	}{
		{"none restored", 1000, nil, false},
		{"the next id", 1000, []uint64{task | 1001}, true},
		{"the current id (given already)", 1000, []uint64{task | 1000}, false},
		{"2^36 ahead", 1000, []uint64{task | (1000 + 1<<36)}, true},
		{"past 2^36 ahead", 1000, []uint64{task | (1001 + 1<<36)}, false},
		{"behind", 1000, []uint64{task | 10}, false},
		{"across the wrap of the sequence", 1<<SpringBits - 2, []uint64{task | 3}, true},
		{"one of several", 1000, []uint64{task | 10, task | 5000, task | 1<<39}, true},
	} {
		if got := newSpout(tc.seq).seqMeets(tc.ids); got != tc.want {
			t.Errorf("%s: seqMeets = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSpoutRestoreDrawsAgain: a task resumed from a state whose roots'
// springIds its sequence would give again draws another start, and keeps
// the roots.
func TestSpoutRestoreDrawsAgain(t *testing.T) {
	draws := []uint64{1000, 1000, 1 << 30}
	s := NewSpout(SpoutConfig{Task: 5, MaxPending: 4, MaxReplays: 2, Deadline: 100, Draw: func() uint64 {
		d := draws[0]
		draws = draws[1:]
		return d
	}})
	restored := []uint64{SpringID(5, 1001)}
	s.Restore(restored, []PendingRoot{{ID: 7, Deadline: 50}})
	if id := s.NextSpringID(nil); id != SpringID(5, 1<<30+nearMask+1) || s.Len() != 1 { // the next block
		t.Fatalf("next springId %x after restore, %d in flight", id, s.Len())
	}
	if r, ok := s.settle(restored[0]); !ok || r.ID != 7 {
		t.Fatalf("restored root %+v %v", r, ok)
	}
}

// TestSpoutTracks: a spout task's inits go to the acker the ring names for
// each springId, one Track per acker per flush, stamped with the acker set
// they were routed by, and with none once they were routed by two; a root
// stays in flight until it settles or its deadline passes.
//
// Reference: the tracking paper §3.2 (roots placed on ackers by the ring).
func TestSpoutTracks(t *testing.T) {
	s := newSpout(1000)
	d := NewDirectory(1, 3, 0)
	var ids []uint64
	inits := map[uint64]uint64{}
	for i := range 4 {
		id := s.NextSpringID(nil)
		ids, inits[id] = append(ids, id), uint64(i)+1
		s.Open(id, PendingRoot{ID: uint64(i)}, uint64(i)+1, d, 10)
	}
	if !s.Full() || s.Len() != 4 {
		t.Fatalf("%d in flight, full %v; want 4, full", s.Len(), s.Full())
	}
	s.Flush()
	seen := 0
	for _, o := range s.Ready() {
		m := o.Msg.(*messages.Track)
		if o.Dest != ToAcker || m.Task != 5 || m.Routing != d.Routing || m.Version != 1 {
			t.Fatalf("out %+v: %+v", o, m)
		}
		for i, id := range m.SpringIds {
			if d.AckerOf(id) != o.Acker || m.InitXors[i] != inits[id] {
				t.Fatalf("springId %x sent to acker/%d with init %d; owned by acker/%d, init %d", id, o.Acker, m.InitXors[i], d.AckerOf(id), inits[id])
			}
			seen++
		}
	}
	if seen != 4 || len(s.Ready()) != 0 {
		t.Fatalf("%d inits sent, want 4 once", seen)
	}
	// Routed by two acker sets between flushes: the Track says none.
	d2 := NewDirectory(2, 1, 0)
	one := NewDirectory(1, 1, 7)
	s.Open(s.NextSpringID(nil), PendingRoot{}, 1, one, 10)
	s.Open(s.NextSpringID(nil), PendingRoot{}, 1, d2, 10)
	s.Flush()
	if out := s.Ready(); len(out) != 1 || out[0].Msg.(*messages.Track).Routing != 0 || out[0].Msg.(*messages.Track).Version != 0 {
		t.Fatalf("a Track routed by two sets: %+v", out)
	}
	if r, ok := s.settle(ids[1]); !ok || r.ID != 1 || r.Deadline != 110 {
		t.Fatalf("settled %+v %v", r, ok)
	}
	if _, ok := s.settle(ids[1]); ok {
		t.Fatal("settled twice")
	}
	if exp := s.expiredRoots(110, nil); len(exp) != 0 {
		t.Fatalf("expired at the deadline: %v", exp)
	}
	if exp := s.expiredRoots(111, nil); len(exp) != 5 || s.Len() != 0 {
		t.Fatalf("expired past the deadline: %d, %d left", len(exp), s.Len())
	}
}

// TestSpoutReplayable: a failed root replays until MaxReplays, then is
// dead-lettered.
func TestSpoutReplayable(t *testing.T) {
	s := newSpout(1)
	for attempt, want := range []bool{true, true, false, false} {
		if got := s.replayable(PendingRoot{Attempt: int32(attempt)}); got != want {
			t.Errorf("attempt %d: replayable %v", attempt, got)
		}
	}
}

// TestSpoutSettles: what becomes of each root a notification or a deadline
// settles, for a source that replays and for one whose broker redelivers;
// notifications before Start wait for it, and a full hold refuses more.
func TestSpoutSettles(t *testing.T) {
	type want struct {
		v        Verdict
		timedOut bool
		reason   string
	}
	for _, tc := range []struct {
		name       string
		redelivers bool
		attempt    int32
		msg        func(id uint64) any // nil: the deadline passes
		want       want
	}{
		{"completed", false, 0, func(id uint64) any { return &messages.Completed{SpringIds: []uint64{id}} }, want{Done, false, ""}},
		{"failed by a processor", false, 0, func(id uint64) any { return &messages.Failed{SpringIds: []uint64{id}} }, want{Replay, false, "failed by a processor"}},
		{"timed out at its acker", false, 1, func(id uint64) any {
			return &messages.Failed{SpringIds: []uint64{id}, Reason: messages.FailReason_FAIL_REASON_TIMEOUT}
		}, want{Replay, true, "timed out at its acker"}},
		{"out of replays", false, 2, func(id uint64) any { return &messages.Failed{SpringIds: []uint64{id}} }, want{DeadLetter, false, "failed by a processor after 2 replays"}},
		{"redelivered by its broker", true, 0, func(id uint64) any { return &messages.Failed{SpringIds: []uint64{id}} }, want{Redeliver, false, "failed by a processor"}},
		{"out of redeliveries", true, 2, func(id uint64) any { return &messages.Failed{SpringIds: []uint64{id}} }, want{DeadLetter, false, "failed by a processor after 2 replays"}},
		{"rejected", false, 0, func(id uint64) any {
			return &messages.Rejected{SpringIds: []uint64{id}, Component: "split", Reason: "bad"}
		}, want{DeadLetter, false, "rejected by split: bad"}},
		{"past the deadline", false, 0, nil, want{Replay, true, "passed the spout's deadline"}},
		{"past the deadline, redelivered", true, 0, nil, want{Redeliver, true, "passed the spout's deadline"}},
	} {
		for _, early := range []bool{false, true} {
			s := newSpout(1000)
			if !early {
				s.Start(tc.redelivers, false, 0, nil)
			}
			id := s.NextSpringID(nil)
			s.Open(id, PendingRoot{ID: 9, Attempt: tc.attempt}, 1, NewDirectory(1, 2, 0), 10)
			var got []Settled
			var err error
			if tc.msg == nil {
				if early {
					continue // a deadline passes only on a started task's tick
				}
				got = s.Expire(111, nil)
			} else if got, err = s.Step(tc.msg(id), 0, nil); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if early {
				if len(got) != 0 || s.Len() != 1 {
					t.Fatalf("%s: settled %v before start", tc.name, got)
				}
				got, _ = s.Start(tc.redelivers, false, 0, nil)
			}
			w := want{got[0].Verdict, got[0].TimedOut, got[0].Reason}
			if len(got) != 1 || w != tc.want || got[0].Root.ID != 9 || got[0].Failed != (tc.want.v != Done) || s.Len() != 0 {
				t.Errorf("%s (early %v): settled %+v, want %+v", tc.name, early, got, tc.want)
			}
			// Counted as settled: a redelivered root is its broker's again,
			// and no longer this task's (it took none here).
			var r messages.TaskReport
			s.Report(&r)
			wr := counts{completed: b2u(tc.want.v == Done), failed: b2u(tc.want.v != Done), timedOut: b2u(tc.want.timedOut),
				replayed: b2u(tc.want.v == Redeliver), peak: 1}
			if c := countsOf(&r); c != wr {
				t.Errorf("%s (early %v): counts %+v, want %+v", tc.name, early, c, wr)
			}
			again := s.Expire(1000, nil)
			if tc.msg != nil {
				again, _ = s.Step(tc.msg(id), 0, again)
			}
			if len(again) != 0 {
				t.Errorf("%s: settled twice: %+v", tc.name, again)
			}
		}
	}
	s := NewSpout(SpoutConfig{Task: 5, MaxPending: 4, MaxEarly: 1, Draw: func() uint64 { return 0 }})
	if _, err := s.Step(&messages.Completed{}, 0, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Step(&messages.Completed{}, 0, nil); err != ErrTooEarly {
		t.Fatalf("a second early notification with room for one: %v", err)
	}
	if h := s.TakeHeld(); len(h) != 1 {
		t.Fatalf("held %d, want 1", len(h))
	}
}

// TestSpoutPullsAndFinishes: a task pulls while under MaxPending and its
// source has roots, pulls again once a batch worth of room is free, and is
// finished when its source ended and nothing is in flight; a redelivery
// reopens an ended source (the root comes back through it), one to be read
// no more (it broke, or the run stops) stays ended.
func TestSpoutPullsAndFinishes(t *testing.T) {
	for _, final := range []bool{false, true} {
		s := newSpout(0)
		if s.CanPull() {
			t.Fatal("pulls before start")
		}
		s.Start(true, false, 0, nil)
		d := NewDirectory(1, 1, 0)
		var ids []uint64
		for range 4 {
			ids = append(ids, s.NextSpringID(nil))
			s.Open(ids[len(ids)-1], PendingRoot{}, 1, d, 0)
		}
		if s.CanPull() || s.WantsPull() {
			t.Fatal("pulls at MaxPending")
		}
		s.Step(&messages.Completed{SpringIds: ids[:1]}, 0, nil)
		if !s.CanPull() || s.WantsPull() {
			t.Fatalf("one free of 4 (batch 2): can %v, wants %v", s.CanPull(), s.WantsPull())
		}
		s.Step(&messages.Completed{SpringIds: ids[1:2]}, 0, nil)
		if !s.WantsPull() {
			t.Fatal("a batch free and no pull wanted")
		}
		s.End(final)
		s.Step(&messages.Completed{SpringIds: ids[2:3]}, 0, nil)
		if s.CanPull() || !s.WantsPull() || s.Finished() {
			t.Fatalf("ended with a root in flight: can %v, wants %v, finished %v", s.CanPull(), s.WantsPull(), s.Finished())
		}
		got, _ := s.Step(&messages.Failed{SpringIds: ids[3:]}, 0, nil)
		if len(got) != 1 || got[0].Verdict != Redeliver {
			t.Fatalf("settled %+v", got)
		}
		if s.Ended() == !final || s.Finished() == !final {
			t.Fatalf("final %v: after a redelivery ended %v, finished %v", final, s.Ended(), s.Finished())
		}
	}
}

// TestSpoutFailAll: when a member dies every root in flight fails at once,
// each replayed or dead-lettered as its attempts say.
func TestSpoutFailAll(t *testing.T) {
	s := newSpout(0)
	s.Start(false, false, 0, nil)
	d := NewDirectory(1, 2, 0)
	for i := range 3 {
		s.Open(s.NextSpringID(nil), PendingRoot{ID: uint64(i), Attempt: int32(i)}, 1, d, 0)
	}
	got := s.FailAll("member x died", nil)
	verdicts := map[uint64]Verdict{}
	for _, v := range got {
		if !v.Failed || v.TimedOut || !strings.HasPrefix(v.Reason, "member x died") {
			t.Fatalf("settled %+v", v)
		}
		verdicts[v.Root.ID] = v.Verdict
	}
	if s.Len() != 0 || len(got) != 3 || verdicts[0] != Replay || verdicts[1] != Replay || verdicts[2] != DeadLetter {
		t.Fatalf("%d left in flight; verdicts %v", s.Len(), verdicts)
	}
}

// TestSpoutHasten: a root whose messages could not be delivered expires
// at the earlier deadline; others keep theirs, and a later deadline moves
// none.
func TestSpoutHasten(t *testing.T) {
	s := newSpout(0)
	s.Start(false, false, 0, nil)
	d := NewDirectory(1, 1, 0)
	a, b := s.NextSpringID(nil), s.NextSpringID(nil)
	s.Open(a, PendingRoot{ID: 1}, 1, d, 0) // deadline 100
	s.Open(b, PendingRoot{ID: 2}, 1, d, 0)
	s.Hasten([]uint64{a, 12345}, 20)
	s.Hasten([]uint64{b}, 500)
	if got := s.Expire(21, nil); len(got) != 1 || got[0].Root.ID != 1 || got[0].Verdict != Replay {
		t.Fatalf("expired at 21: %+v", got)
	}
	if got := s.Expire(101, nil); len(got) != 1 || got[0].Root.ID != 2 {
		t.Fatalf("expired at 101: %+v", got)
	}
}

// counts is a TaskReport's counts, comparable.
type counts struct {
	roots, completed, failed, timedOut, replayed, deadLettered, inFlight, peak uint64
}

func countsOf(r *messages.TaskReport) counts {
	return counts{r.Roots, r.Completed, r.Failed, r.TimedOut, r.Replayed, r.DeadLettered, r.InFlight, r.PeakInFlight}
}

func (s *Spout) counts() counts {
	var r messages.TaskReport
	s.Report(&r)
	return countsOf(&r)
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// TestSpoutReread: what becomes of a failed root once its source answered
// for its payload: a replay is emitted again as its next attempt (counted
// replayed), or dead-lettered with why when the payload cannot be read; a
// dead letter is lettered whether or not it could be; a root its source
// released comes to nothing, uncounted.
func TestSpoutReread(t *testing.T) {
	for _, tc := range []struct {
		name     string
		verdict  Verdict
		got      Reread
		ok       bool
		want     Verdict
		attempt  int32
		reason   string
		replayed uint64
		lettered uint64
	}{
		{"replay read", Replay, Read, true, Replay, 2, "failed", 1, 0},
		{"replay released", Replay, Released, false, Replay, 1, "failed", 0, 0},
		{"replay unreadable", Replay, Unreadable, true, DeadLetter, 1, "failed; replay failed: gone", 0, 1},
		{"dead letter read", DeadLetter, Read, true, DeadLetter, 1, "failed", 0, 1},
		{"dead letter released", DeadLetter, Released, false, DeadLetter, 1, "failed", 0, 0},
		{"dead letter unreadable", DeadLetter, Unreadable, true, DeadLetter, 1, "failed", 0, 1},
	} {
		s := newSpout(0)
		why := ""
		if tc.got == Unreadable {
			why = "gone"
		}
		v, ok := s.Reread(Settled{Root: PendingRoot{ID: 3, Attempt: 1}, Verdict: tc.verdict, Failed: true, Reason: "failed"}, tc.got, why)
		c := s.counts()
		if ok != tc.ok || v.Verdict != tc.want || v.Root.Attempt != tc.attempt || v.Root.ID != 3 || v.Reason != tc.reason ||
			c != (counts{replayed: tc.replayed, deadLettered: tc.lettered}) {
			t.Errorf("%s: %+v %v, counts %+v", tc.name, v, ok, c)
		}
	}
}

// TestSpoutCounts: what a task counts for its reports as its source hands
// out roots and bad records and its roots settle, and what a moved task's
// new activation resumes from.
func TestSpoutCounts(t *testing.T) {
	const ms = int64(time.Millisecond)
	s := NewSpout(SpoutConfig{Task: 5, MaxPending: 4, MaxReplays: 1, BatchSize: 4, Deadline: 10 * ms, Draw: func() uint64 { return 0 }})
	s.Start(false, false, 0, nil)
	d := NewDirectory(1, 1, 0)
	var ids []uint64
	for i := range 3 {
		r := s.Took(PendingRoot{ID: uint64(i), Time: int64(i)}, 7)
		want := int64(i)
		if i == 0 { // no time of its own: the pull's
			want = 7
		}
		if r.Time != want {
			t.Fatalf("root %d emitted with time %d, want %d", i, r.Time, want)
		}
		ids = append(ids, s.NextSpringID(nil))
		if s.Open(ids[i], r, 1, d, int64(i)*ms) {
			t.Fatal("a tracked root completed when opened")
		}
	}
	if v := s.BadRecord(9, "no json"); v.Verdict != DeadLetter || v.Root.ID != 9 || v.Reason != "no json" {
		t.Fatalf("bad record: %+v", v)
	}
	if v := s.EmitFailed(PendingRoot{ID: 8, Attempt: 1}, "no field 2"); v.Verdict != DeadLetter || v.Root.ID != 8 || v.Reason != "no field 2" || v.Root.Attempt != 1 {
		t.Fatalf("emit failed: %+v", v)
	}
	if c := s.counts(); c != (counts{roots: 4, deadLettered: 2, inFlight: 3, peak: 3}) {
		t.Fatalf("counts %+v", c)
	}
	// Root 0 completes 5 µs after its emission, root 1 fails (replayed),
	// root 2 times out at its acker, past its replays (dead-lettered).
	s.Step(&messages.Completed{SpringIds: ids[:1]}, 5_000, nil)
	s.Step(&messages.Failed{SpringIds: ids[1:2]}, 6_000, nil)
	s.Step(&messages.Failed{SpringIds: ids[2:], Reason: messages.FailReason_FAIL_REASON_TIMEOUT}, 6_000, nil)
	var r messages.TaskReport
	s.Report(&r)
	if c := countsOf(&r); c != (counts{roots: 4, completed: 1, failed: 2, timedOut: 1, deadLettered: 2, peak: 3}) {
		t.Fatalf("counts %+v", c)
	}
	if r.LatencySumMicros != 5 || len(r.Latency) != latencyBucket(5*time.Microsecond)+1 || r.Latency[len(r.Latency)-1] != 1 {
		t.Fatalf("latency %v, sum %d µs; want one of 5 µs", r.Latency, r.LatencySumMicros)
	}
	// A new activation resumes the counts and the latencies.
	s2 := newSpout(0)
	s2.Resume(&r)
	var r2 messages.TaskReport
	s2.Report(&r2)
	if countsOf(&r2) != countsOf(&r) || r2.LatencySumMicros != 5 || !slices.Equal(r2.Latency, r.Latency) {
		t.Fatalf("resumed %+v from %+v", &r2, &r)
	}
	// Without ackers a root completes once emitted, and none is in flight.
	u := NewSpout(SpoutConfig{Task: 5, MaxPending: 4, Untracked: true, Draw: func() uint64 { return 0 }})
	u.Start(false, false, 0, nil)
	if !u.Open(u.NextSpringID(nil), u.Took(PendingRoot{ID: 1}, 0), 0, nil, 0) || u.counts() != (counts{roots: 1, completed: 1}) {
		t.Fatalf("untracked: counts %+v", u.counts())
	}
}

// TestSpoutRedeliverCounts: a root a task hands back to its broker counts
// no longer as its own; the task the broker hands it to counts it, so
// that over the tasks Completed == Roots at the end.
func TestSpoutRedeliverCounts(t *testing.T) {
	d := NewDirectory(1, 1, 0)
	a, b := newSpout(0), newSpout(1<<20)
	a.Start(true, false, 0, nil)
	b.Start(true, false, 0, nil)
	take := func(s *Spout, id uint64, attempt int32) uint64 {
		springID := s.NextSpringID(nil)
		s.Open(springID, s.Took(PendingRoot{ID: id, Attempt: attempt}, 0), 1, d, 0)
		return springID
	}
	x, y := take(a, 1, 0), take(a, 2, 0)
	a.Step(&messages.Completed{SpringIds: []uint64{x}}, 1, nil)
	got, _ := a.Step(&messages.Failed{SpringIds: []uint64{y}}, 1, nil)
	if len(got) != 1 || got[0].Verdict != Redeliver {
		t.Fatalf("settled %+v", got)
	}
	z := take(b, 2, got[0].Root.Attempt+1) // the broker hands it to b
	b.Step(&messages.Completed{SpringIds: []uint64{z}}, 1, nil)
	ca, cb := a.counts(), b.counts()
	if ca != (counts{roots: 1, completed: 1, failed: 1, replayed: 1, peak: 2}) || cb != (counts{roots: 1, completed: 1, peak: 1}) {
		t.Fatalf("counts a %+v, b %+v", ca, cb)
	}
	if ca.roots+cb.roots != ca.completed+cb.completed {
		t.Fatalf("roots %d, completed %d", ca.roots+cb.roots, ca.completed+cb.completed)
	}
	// A task that took over a count of none does not go below it.
	c := newSpout(0)
	c.Start(true, false, 0, nil)
	id := c.NextSpringID(nil)
	c.Restore([]uint64{id}, []PendingRoot{{ID: 4, Deadline: 100}})
	c.Step(&messages.Failed{SpringIds: []uint64{id}}, 1, nil)
	if cc := c.counts(); cc != (counts{failed: 1, replayed: 1}) {
		t.Fatalf("redelivered a root it did not count: %+v", cc)
	}
}

// answer is what a test source answers a read.
type answer uint8

const (
	root answer = iota
	notReady
	eof
	bad
	broke
)

// pullOnce drives one pull as the spout actor does, the source answering
// answers in turn (then notReady), and returns how many reads it made and
// what Again says after it.
func pullOnce(s *Spout, d *Directory, now int64, woken bool, answers ...answer) (reads int, wait time.Duration, again bool) {
	for s.Pull(woken); s.Reads(); reads++ {
		a := notReady
		if reads < len(answers) {
			a = answers[reads]
		}
		switch a {
		case root:
			s.Open(s.NextSpringID(nil), s.Took(PendingRoot{ID: uint64(reads)}, now), 1, d, now)
		case notReady:
			s.NotReady()
		case eof:
			s.Exhausted()
		case bad:
			s.BadRecord(uint64(reads), "bad")
		case broke:
			s.Broke()
		}
	}
	wait, again = s.Again()
	return reads, wait, again
}

// TestSpoutPull: what each answer of the source means for the pull under
// way and the next: a pull reads a batch at most, and no more than
// MaxPending allows; a bad record is dead-lettered and the pull goes on;
// no root ready waits; the source's end or failure stops pulling for
// good, and the task finishes once no root is in flight.
func TestSpoutPull(t *testing.T) {
	for _, tc := range []struct {
		name     string
		inFlight int // roots in flight before the pull
		answers  []answer
		reads    int
		wait     time.Duration
		again    bool
		ended    bool
		finished bool
		lettered uint64
		roots    uint64 // counted, those in flight before included
	}{
		{"a batch", 0, []answer{root, root, root}, 2, 0, true, false, false, 0, 2},
		{"no root ready", 0, []answer{notReady}, 1, MinIdleWait, true, false, false, 0, 0},
		{"a root, then none ready", 0, []answer{root, notReady}, 2, MinIdleWait, true, false, false, 0, 1},
		{"a bad record, then a root", 0, []answer{bad, root}, 2, 0, true, false, false, 1, 2},
		{"two bad records", 0, []answer{bad, bad}, 2, 0, true, false, false, 2, 2},
		{"the end", 0, []answer{eof}, 1, 0, false, true, true, 0, 0},
		{"the end with roots in flight", 1, []answer{eof}, 1, 0, false, true, false, 0, 1},
		{"a root, then the end", 0, []answer{root, eof}, 2, 0, false, true, false, 0, 1},
		{"broken", 0, []answer{broke}, 1, 0, false, true, true, 0, 0},
		{"a root, then broken", 0, []answer{root, broke}, 2, 0, false, true, false, 0, 1},
		{"room for one", 3, []answer{root, root}, 1, 0, false, false, false, 0, 4},
		{"full", 4, []answer{root}, 0, 0, false, false, false, 0, 4},
	} {
		s := NewSpout(SpoutConfig{Task: 5, MaxPending: 4, MaxReplays: 2, BatchSize: 2, Deadline: 100, IdleWait: time.Millisecond, Draw: func() uint64 { return 0 }})
		s.Start(false, false, 0, nil)
		d := NewDirectory(1, 1, 0)
		for range tc.inFlight {
			s.Open(s.NextSpringID(nil), s.Took(PendingRoot{}, 0), 1, d, 0)
		}
		reads, wait, again := pullOnce(s, d, 0, false, tc.answers...)
		c := s.counts()
		if reads != tc.reads || wait != tc.wait || again != tc.again || s.Ended() != tc.ended || s.Finished() != tc.finished ||
			c.deadLettered != tc.lettered || c.roots != tc.roots {
			t.Errorf("%s: %d reads, again %v after %v, ended %v, finished %v, counts %+v", tc.name, reads, again, wait, s.Ended(), s.Finished(), c)
		}
	}
}

// TestSpoutIdleBackoff: while the source has no root ready the wait
// before the next pull doubles from MinIdleWait up to IdleWait; a root
// that comes resets it.
func TestSpoutIdleBackoff(t *testing.T) {
	const us = time.Microsecond
	for _, tc := range []struct {
		name     string
		idleWait time.Duration
		pulls    [][]answer // one pull's answers each
		waits    []time.Duration
	}{
		{"backs off to IdleWait", 2 * time.Millisecond,
			[][]answer{{notReady}, {notReady}, {notReady}, {notReady}, {notReady}, {notReady}, {notReady}, {notReady}},
			[]time.Duration{50 * us, 100 * us, 200 * us, 400 * us, 800 * us, 1600 * us, 2000 * us, 2000 * us}},
		{"a root resets it", 2 * time.Millisecond,
			[][]answer{{notReady}, {notReady}, {notReady}, {root, notReady}, {notReady}, {root, root}, {notReady}},
			[]time.Duration{50 * us, 100 * us, 200 * us, 50 * us, 100 * us, 0, 50 * us}},
		{"a bad record does not", 2 * time.Millisecond,
			[][]answer{{notReady}, {notReady}, {bad, notReady}},
			[]time.Duration{50 * us, 100 * us, 200 * us}},
		{"IdleWait at its least", MinIdleWait,
			[][]answer{{notReady}, {notReady}},
			[]time.Duration{50 * us, 50 * us}},
	} {
		s := NewSpout(SpoutConfig{Task: 5, MaxPending: 64, MaxReplays: 2, BatchSize: 2, Deadline: 100, IdleWait: tc.idleWait, Draw: func() uint64 { return 0 }})
		s.Start(false, false, 0, nil)
		d := NewDirectory(1, 1, 0)
		for i, answers := range tc.pulls {
			_, wait, again := pullOnce(s, d, 0, i > 0, answers...) // the pull Again queued
			if !again || wait != tc.waits[i] {
				t.Errorf("%s: pull %d waits %v (again %v), want %v", tc.name, i, wait, again, tc.waits[i])
			}
		}
	}
}

// TestSpoutPullQueued: one pull at a time is queued: another pull before
// the queued one comes (a settle's) queues none, and the queued one,
// when it comes, queues the next; none while MaxPending roots are in
// flight (a settle pulls once a batch is free), and none once the source
// ended.
func TestSpoutPullQueued(t *testing.T) {
	s := NewSpout(SpoutConfig{Task: 5, MaxPending: 8, MaxReplays: 2, BatchSize: 2, Deadline: 100, IdleWait: time.Millisecond, Draw: func() uint64 { return 0 }})
	d := NewDirectory(1, 1, 0)
	if _, _, again := pullOnce(s, d, 0, false, root); again || s.Len() != 0 {
		t.Fatal("pulled before start")
	}
	s.Start(false, false, 0, nil)
	for i, tc := range []struct {
		woken bool
		again bool
	}{{false, true}, {false, false}, {true, true}, {true, false}} { // the last fills MaxPending
		if _, _, again := pullOnce(s, d, 0, tc.woken, root, root); again != tc.again {
			t.Fatalf("pull %d (woken %v): again %v", i, tc.woken, again)
		}
	}
	if s.Len() != 8 || s.WantsPull() {
		t.Fatalf("%d in flight, wants a pull %v", s.Len(), s.WantsPull())
	}
	var ids []uint64
	s.Each(func(id uint64, _ PendingRoot) { ids = append(ids, id) })
	s.Step(&messages.Completed{SpringIds: ids[:4]}, 1, nil)
	if !s.WantsPull() {
		t.Fatal("a batch free and no pull wanted")
	}
	if _, _, again := pullOnce(s, d, 0, false, root); !again { // a settle's pull, none queued
		t.Fatal("no pull queued after a settle's")
	}
	if _, _, again := pullOnce(s, d, 0, true, root, eof); again || !s.Ended() {
		t.Fatal("pulls again after the end")
	}
}

// TestSpoutEndReopens: a root the broker redelivers after the source's
// end comes back through it, so the source is read again; not after it
// broke (or the run stops): it is read no more.
func TestSpoutEndReopens(t *testing.T) {
	for _, tc := range []struct {
		name   string
		end    answer
		reopen bool
	}{{"exhausted", eof, true}, {"broken", broke, false}} {
		s := newSpout(0)
		s.Start(true, false, 0, nil)
		d := NewDirectory(1, 1, 0)
		pullOnce(s, d, 0, false, root, tc.end)
		var ids []uint64
		s.Each(func(id uint64, _ PendingRoot) { ids = append(ids, id) })
		got, _ := s.Step(&messages.Failed{SpringIds: ids}, 1, nil)
		if len(got) != 1 || got[0].Verdict != Redeliver || s.Ended() == tc.reopen || s.CanPull() != tc.reopen || s.Finished() == tc.reopen {
			t.Errorf("%s: settled %+v; ended %v, can pull %v, finished %v", tc.name, got, s.Ended(), s.CanPull(), s.Finished())
		}
	}
}

// TestSpoutStartFromCheckpoint: a task started again from its checkpoint
// (its member died) settles what it heard before the start, then fails the
// roots still in flight, each replayed or dead-lettered as its attempts
// say; a task resumed from a move's state fails none.
func TestSpoutStartFromCheckpoint(t *testing.T) {
	for _, checkpoint := range []bool{false, true} {
		s := newSpout(1 << 30)
		ids := []uint64{SpringID(5, 10), SpringID(5, 11), SpringID(5, 12)}
		if _, err := s.Step(&messages.Completed{SpringIds: ids[:1]}, 50, nil); err != nil { // heard before the start
			t.Fatal(err)
		}
		s.Restore(ids, []PendingRoot{{ID: 1, Deadline: 100}, {ID: 2, Deadline: 100}, {ID: 3, Deadline: 100, Attempt: 2}})
		got, restarted := s.Start(false, checkpoint, 50, nil)
		verdicts := map[uint64]Verdict{}
		for _, v := range got {
			verdicts[v.Root.ID] = v.Verdict
		}
		want := map[uint64]Verdict{1: Done}
		wantRestarted, left := 0, 2
		if checkpoint {
			want[2], want[3] = Replay, DeadLetter
			wantRestarted, left = 2, 0
		}
		if !maps.Equal(verdicts, want) || restarted != wantRestarted || s.Len() != left {
			t.Errorf("checkpoint %v: verdicts %v, %d restarted, %d in flight", checkpoint, verdicts, restarted, s.Len())
		}
		if c := s.counts(); c.completed != 1 || c.failed != uint64(wantRestarted) {
			t.Errorf("checkpoint %v: counts %+v", checkpoint, c)
		}
	}
}

// TestSpoutFinishes: a task is finished only once its source ended and no
// root is in flight: a root replayed after the end keeps it going until
// that root settles.
func TestSpoutFinishes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		end     bool
		attempt int32
		fail    bool
		// finished after the root settles (but for a replay), and after
		// its replay (if any) completes
		settled, replayed bool
	}{
		{"not ended", false, 0, false, false, false},
		{"completes after the end", true, 0, false, true, true},
		{"replayed after the end", true, 0, true, false, true},
		{"dead-lettered after the end", true, 2, true, true, true},
		{"replayed, not ended", false, 0, true, false, false},
	} {
		s := newSpout(0)
		s.Start(false, false, 0, nil)
		d := NewDirectory(1, 1, 0)
		id := s.NextSpringID(nil)
		s.Open(id, s.Took(PendingRoot{ID: 1, Attempt: tc.attempt}, 0), 1, d, 0)
		if tc.end {
			s.Exhausted()
		}
		if s.Finished() {
			t.Fatalf("%s: finished with a root in flight", tc.name)
		}
		var m any = &messages.Completed{SpringIds: []uint64{id}}
		if tc.fail {
			m = &messages.Failed{SpringIds: []uint64{id}}
		}
		got, _ := s.Step(m, 1, nil)
		replay := len(got) == 1 && got[0].Verdict == Replay
		if !replay && s.Finished() != tc.settled { // (a replay is emitted again before the task asks)
			t.Errorf("%s: finished %v once the root settled (%+v)", tc.name, s.Finished(), got)
		}
		if replay {
			v, _ := s.Reread(got[0], Read, "")
			id = s.NextSpringID(nil)
			s.Open(id, v.Root, 1, d, 1)
			if s.Finished() {
				t.Errorf("%s: finished with its replay in flight", tc.name)
			}
			s.Step(&messages.Completed{SpringIds: []uint64{id}}, 2, nil)
		}
		if s.Finished() != tc.replayed {
			t.Errorf("%s: finished %v at the end", tc.name, s.Finished())
		}
	}
}

// TestNextSpringIDTakesTurns: each root takes the next block of the
// sequence, and of it the first id that an acker whose turn it is owns,
// else the first a near acker owns, else the block's first. The turn goes
// to an eighth of the near ackers (all of them when none, or all, are
// near; at least one; no turns below minTurn of them) for BatchSize
// roots, then to the next ones in order, so that every near acker owns
// about as many roots and no far one gets a turn; with a third of the
// ackers near every root is a near acker's. The roots stay in the pending
// ring, none spilled.
func TestNextSpringIDTakesTurns(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ackers   int
		near     []int
		wantNear float64 // at least this share of roots owned by a near acker
		turn     int     // ackers in a turn; 0: no turns (fewer than minTurn near)
	}{
		{"no preference", 3, nil, 0, 0},
		{"none near", 3, []int{}, 0, 0},
		{"all near", 3, []int{0, 1, 2}, 1, 0},
		{"one of three", 3, []int{1}, 1, 0},
		{"two of three", 3, []int{0, 2}, 1, 0},
		{"one of eight", 8, []int{5}, 0.998, 0},
		{"three of eight", 8, []int{0, 3, 7}, 1, 0},
		{"four", 4, nil, 0, 1},
		{"four of eight", 8, []int{1, 2, 5, 6}, 1, 1},
		{"eight", 8, nil, 0, 1},
		{"nine", 9, nil, 0, 2},
		{"one of 32", 32, []int{9}, 0.85, 0},
		{"32", 32, nil, 0, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const roots, batch = 20000, 100
			d := NewDirectory(1, tc.ackers, 0)
			var near []bool
			eligible := make([]bool, tc.ackers)
			for a := range eligible {
				eligible[a] = len(tc.near) == 0
			}
			if tc.near != nil {
				near = make([]bool, tc.ackers)
				for _, a := range tc.near {
					near[a], eligible[a] = true, true
				}
			}
			rng := rand.New(rand.NewPCG(uint64(tc.ackers), uint64(len(tc.near))))
			s := NewSpout(SpoutConfig{Task: 9, MaxPending: roots, MaxReplays: 1, BatchSize: batch, Deadline: 100, Draw: func() uint64 { return rng.Uint64N(1 << 39) }})
			s.SetNear(near)
			if preferring := len(tc.near) > 0 && len(tc.near) < tc.ackers; (s.near != nil) != preferring {
				t.Fatalf("SetNear(%v) keeps %v: want a preference %v", near, s.near, preferring)
			}
			prev, hits, owned := uint64(0), 0, make([]int, tc.ackers)
			var turn []bool
			for i := range roots {
				id := s.NextSpringID(d)
				block := id &^ nearMask
				if i > 0 && block != prev+nearMask+1 {
					t.Fatalf("root %d: springId %x not in the block after %x", i, id, prev)
				}
				prev = block
				if tc.turn == 0 {
					if s.turnSet != nil {
						t.Fatalf("root %d: a turn %v among %d near ackers", i, s.turnSet, countTrue(eligible))
					}
				} else if i%batch == 0 { // a new turn: the next eligible ackers, in order
					next := nextTurn(turn, eligible, tc.turn)
					if turn != nil && !slices.Equal(s.turnSet, next) {
						t.Fatalf("root %d: turn %v after %v, want %v", i, s.turnSet, turn, next)
					}
					turn = slices.Clone(s.turnSet)
					if n := countTrue(turn); n != tc.turn {
						t.Fatalf("root %d: %d ackers in the turn %v, want %d", i, n, turn, tc.turn)
					}
					for a, in := range turn {
						if in && !eligible[a] {
							t.Fatalf("root %d: far acker %d in the turn %v", i, a, turn)
						}
					}
				} else if !slices.Equal(s.turnSet, turn) {
					t.Fatalf("root %d: the turn changed within a batch: %v, then %v", i, turn, s.turnSet)
				}
				want, found := uint64(0), false
				if tc.turn > 0 {
					want, found = firstOf(d, block, turn)
				}
				if !found && near != nil {
					want, found = firstOf(d, block, near)
				}
				if !found {
					want = block
				}
				if id != want {
					t.Fatalf("root %d: springId %x, want %x", i, id, want)
				}
				owned[d.AckerOf(id)]++
				if near != nil && near[d.AckerOf(id)] {
					hits++
				}
				s.Open(id, PendingRoot{ID: uint64(i)}, 1, d, 0)
			}
			if got := float64(hits) / roots; got < tc.wantNear {
				t.Errorf("%.3f of roots owned by a near acker, want at least %.2f", got, tc.wantNear)
			}
			fair := float64(roots) / float64(countTrue(eligible))
			for a, n := range owned {
				if eligible[a] && (float64(n) < 0.7*fair || float64(n) > 1.3*fair) {
					t.Errorf("acker %d owns %d roots, a fair share is %.0f: %v", a, n, fair, owned)
				}
			}
			if s.Len() != roots || len(s.pending.spill) != 0 {
				t.Errorf("%d in flight, %d of them spilled from the pending ring, want %d and none", s.Len(), len(s.pending.spill), roots)
			}
		})
	}
}

// nextTurn is the turn after turn: the k eligible ackers after its last
// one (the one whose next eligible acker is not in it), in order.
func nextTurn(turn, eligible []bool, k int) []bool {
	n, last := len(eligible), 0
	for a, in := range turn {
		if !in {
			continue
		}
		last = a
		b := (a + 1) % n
		for !eligible[b] {
			b = (b + 1) % n
		}
		if !turn[b] {
			break
		}
	}
	next := make([]bool, n)
	for a := (last + 1) % n; k > 0; a = (a + 1) % n {
		if eligible[a] {
			next[a] = true
			k--
		}
	}
	return next
}

// firstOf is the first id of block that an acker in set owns.
func firstOf(d *Directory, block uint64, set []bool) (uint64, bool) {
	for c := block; c <= block|nearMask; c++ {
		if set[d.AckerOf(c)] {
			return c, true
		}
	}
	return 0, false
}

func countTrue(b []bool) int {
	n := 0
	for _, x := range b {
		if x {
			n++
		}
	}
	return n
}

// BenchmarkNextSpringID: the springId of a root (ns/op), with no turns (2
// ackers) and where the turn's ackers own an eighth of the ring (8, 32).
func BenchmarkNextSpringID(b *testing.B) {
	for _, ackers := range []int{2, 8, 32} {
		b.Run(fmt.Sprintf("ackers=%d", ackers), func(b *testing.B) {
			d := NewDirectory(1, ackers, 0)
			s := NewSpout(SpoutConfig{Task: 5, MaxPending: 2048, BatchSize: 512, Draw: func() uint64 { return 0 }})
			var sink uint64
			for b.Loop() {
				sink += s.NextSpringID(d)
			}
			_ = sink
		})
	}
}
