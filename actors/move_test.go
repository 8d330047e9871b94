package actors

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/acktor/acktor/cluster/grain"
	"github.com/acktor/acktor/messages"
	"github.com/acktor/acktor/source"
	"github.com/acktor/acktor/tracker"
	"github.com/acktor/acktor/window"
)

// stubContext is the part of actor.Context a forwarder uses.
type stubContext struct {
	actor.Context
	msg       any
	forwarded int
}

func (c *stubContext) Message() any       { return c.msg }
func (c *stubContext) Forward(*actor.PID) { c.forwarded++ }

// TestForwarderDropsTimers: a task that moved passes on what other actors
// send it, but not its own timer messages, which are no protobuf messages
// and cannot cross to another member (each logged a serialisation error).
func TestForwarderDropsTimers(t *testing.T) {
	f := &forwarder{to: actor.NewPID("127.0.0.1:1", "elsewhere")}
	for _, tc := range []struct {
		msg     any
		forward bool
	}{
		{&pull{}, false}, {&spoutTick{}, false}, {&startHeld{}, false}, {&rotate{}, false}, {&flushOut{}, false},
		{&flushAcks{}, false}, {&reportNow{}, false}, {&stateLate{}, false}, {&claimed{}, false}, {&memberDied{}, false},
		{&messages.StandbyApplied{}, false}, {&actor.DeadLetterResponse{}, false}, {&standbyFound{}, false}, {&standbyRetry{}, false},
		{&messages.TupleBatch{}, true}, {&messages.AckBatch{}, true}, {&messages.Completed{}, true},
	} {
		t.Run(fmt.Sprintf("%T", tc.msg), func(t *testing.T) {
			c := &stubContext{msg: tc.msg}
			if !f.pass(c) || (c.forwarded == 1) != tc.forward {
				t.Fatalf("forwarded %d times, want forwarded %v", c.forwarded, tc.forward)
			}
		})
	}
}

// TestTakeOverHoldsCheckpointStart: an activation that takes over a moved
// spout task holds a start from a checkpoint (the run sends every spout
// task one for a while after a member left) until the state its earlier
// activation handed over comes, and starts from that; without it, it
// starts from the held one when the wait is over. An activation that
// takes over nothing starts from a checkpoint at once.
func TestTakeOverHoldsCheckpointStart(t *testing.T) {
	checkpoint := &messages.StartSpout{State: &messages.SpoutState{Checkpoint: true, Report: &messages.TaskReport{Emitted: 3}}}
	handed := &messages.StartSpout{State: &messages.SpoutState{Report: &messages.TaskReport{Emitted: 7}}}
	stopped := &messages.StartSpout{Stop: true, State: &messages.SpoutState{Checkpoint: true, Report: &messages.TaskReport{Emitted: 3}}}
	for _, tc := range []struct {
		name    string
		msgs    []any
		started bool
		emitted uint64
		ended   bool // it reads no more: a start said Stop
	}{
		{"handed over after a checkpoint", []any{&grain.Incoming{}, checkpoint, handed}, true, 7, false},
		{"handed over first", []any{&grain.Incoming{}, handed, checkpoint}, true, 7, false},
		{"checkpoint held", []any{&grain.Incoming{}, checkpoint}, false, 0, false},
		{"handover late", []any{&grain.Incoming{}, checkpoint, &startHeld{}, handed}, true, 3, false},
		{"no state held", []any{&grain.Incoming{}, &messages.StartSpout{}}, false, 0, false},
		{"no takeover", []any{checkpoint, handed}, true, 3, false},
		{"a held stop stays", []any{&grain.Incoming{}, stopped, handed}, true, 7, true},
		{"a stop after a held one stays", []any{&grain.Incoming{}, stopped, checkpoint, &startHeld{}}, true, 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ctx := spoutTaskOutside(t)
			for _, m := range tc.msgs {
				ctx.msg = m
				s.Receive(ctx)
			}
			if s.started != tc.started || s.col.emitted != tc.emitted || s.core.Ended() != tc.ended {
				t.Fatalf("started %v with %d emitted, ended %v; want %v with %d, ended %v",
					s.started, s.col.emitted, s.core.Ended(), tc.started, tc.emitted, tc.ended)
			}
		})
	}
}

// TestMoveHandsOnAHeldStart: an activation that holds a start and moves
// before the state it waits for came sends the start on to its new
// activation, which would otherwise wait for a start that never comes.
func TestMoveHandsOnAHeldStart(t *testing.T) {
	s, ctx := spoutTaskOutside(t)
	got := make(chan *messages.StartSpout, 1)
	to := ctx.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*messages.StartSpout); ok {
			got <- m
		}
	}))
	stopped := &messages.StartSpout{Stop: true, State: &messages.SpoutState{Checkpoint: true}}
	for _, m := range []any{&grain.Incoming{}, stopped, &messages.StartSpout{State: &messages.SpoutState{Checkpoint: true}},
		&grain.Moved{Activate: func() (*actor.PID, error) { return to, nil }}} {
		ctx.msg = m
		s.Receive(ctx)
	}
	select {
	case m := <-got:
		if !m.Stop || !m.State.GetCheckpoint() {
			t.Fatalf("the new activation got %v, want the held checkpoint start with Stop", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the new activation got no start")
	}
}

// spoutTaskOutside is a spout task's actor outside a cluster, over a
// source that has nothing yet, and a context to hand it messages with.
func spoutTaskOutside(t *testing.T) (*spoutTask, *taskContext) {
	t.Helper()
	return spoutTaskWith(t, DefaultConfig())
}

// spoutTaskWith is spoutTaskOutside with cfg.
func spoutTaskWith(t *testing.T, cfg Config) (*spoutTask, *taskContext) {
	t.Helper()
	var b Builder
	b.Spout("s", 1, func(int, int) (source.Source, error) { return waitingSource{}, nil })
	b.Processor("p", 1, nopProc).Shuffle("s")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	s := &spoutTask{env: newEnv(topo, cfg, quietLog()), info: topo.taskInfo(0)}
	s.setup(sys.Root, sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {})))
	return s, &taskContext{sys: sys, self: s.self}
}

// waitingSource has no root yet, and never will.
type waitingSource struct{ idleSource }

func (waitingSource) Next() (source.Root, error) { return source.Root{}, source.ErrNotReady }

// TestDeathsByMember: a spout task hastens its roots in flight once for
// each member that dies, and a member that came back on a dead one's
// address and died too is another death, not the first heard again.
func TestDeathsByMember(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	cfg := DefaultConfig()
	cfg.MembershipLag, cfg.Clock = time.Second, func() time.Time { return now }
	s, ctx := spoutTaskWith(t, cfg)
	ctx.msg = &messages.StartSpout{}
	s.Receive(ctx)
	if !s.core.Started() {
		t.Fatal("the spout task did not start")
	}
	d := tracker.NewDirectory(1, 1, 0)
	open := func(id uint64) {
		s.core.Open(id, tracker.PendingRoot{ID: id}, 1, d, now.UnixNano())
	}
	deadline := func(id uint64) time.Time {
		var at int64
		s.core.Each(func(springID uint64, r tracker.PendingRoot) {
			if springID == id {
				at = r.Deadline
			}
		})
		return time.Unix(0, at)
	}
	for i, tc := range []struct {
		death   memberDied
		hastens bool
	}{
		{memberDied{addr: "127.0.0.1:1", member: "first"}, true},
		{memberDied{addr: "127.0.0.1:1", member: "first"}, false},    // heard again
		{memberDied{addr: "127.0.0.1:1", member: "came back"}, true}, // the same address, another member
		{memberDied{addr: "127.0.0.1:2", member: "other"}, true},
	} {
		now = now.Add(time.Minute) // past the last death's short deadlines
		id := uint64(100 + i)
		open(id)
		before := deadline(id)
		ctx.msg = &tc.death
		s.Receive(ctx)
		if hastened := deadline(id).Before(before); hastened != tc.hastens {
			t.Errorf("death %d (%+v): deadline %v, was %v; hastened %v, want %v", i, tc.death, deadline(id), before, hastened, tc.hastens)
		}
	}
}

// TestMoveInTakesEachPartOnce: a handover part sent again is not taken
// again, also after parts of another handover came between; a new move,
// and a standby's unnumbered sync, start afresh.
func TestMoveInTakesEachPartOnce(t *testing.T) {
	var in moveIn
	for i, tc := range []struct {
		move uint64
		part uint32
		take bool
	}{
		{0, 0, true}, {0, 0, true}, // unnumbered: always
		{7, 0, true}, {7, 0, false}, {7, 1, true}, {7, 1, false}, {7, 0, false}, {7, 2, true},
		{9, 0, true}, {9, 0, false}, {9, 1, true}, // another move
		{7, 2, false}, {7, 3, true}, {9, 1, false}, // the two at once
		{0, 0, true}, {9, 1, false},
	} {
		if got := in.take(tc.move, tc.part); got != tc.take {
			t.Fatalf("step %d: take(%d, %d) = %v, want %v", i, tc.move, tc.part, got, tc.take)
		}
		if !in.took(tc.move, tc.part) && tc.move != 0 {
			t.Fatalf("step %d: (%d, %d) not taken after take", i, tc.move, tc.part)
		}
	}
	if in.took(7, 4) || in.took(0, 0) || in.took(8, 0) {
		t.Fatal("took says a part not taken was")
	}
	for m := range uint64(movesKept) { // the oldest moves are forgotten
		in.take(100+m, 0)
	}
	if in.took(7, 0) || !in.took(100, 0) || len(in.moves) != movesKept {
		t.Fatalf("after %d more moves: %v", movesKept, in.moves)
	}
}

// TestMovedTaskAnswersAPartItTook: a task that took a part of a handover
// and then moved on (the membership still settling) answers that part
// itself when it comes again, since the state it handed over holds it;
// passed on, its next activation would take it as new and count it twice.
// A part it did not take is passed on.
func TestMovedTaskAnswersAPartItTook(t *testing.T) {
	p, ctx := counterTask(t)
	p.awaiting = true
	part := bigWindow(3)
	part.Move, part.Last = 5, false
	ctx.give(p, &grain.Incoming{}, part)
	var mu sync.Mutex
	var heard []string
	to := ctx.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(handoverPart); ok {
			mu.Lock()
			if m.GetMove() == 5 {
				heard = append(heard, fmt.Sprintf("part %d", m.GetPart()))
			}
			mu.Unlock()
			if c.Sender() != nil {
				c.Respond(&messages.CounterState{})
			}
		}
	}))
	ctx.give(p, &grain.Moved{Activate: func() (*actor.PID, error) { return to, nil }})
	next := &messages.CounterState{Move: 5, Part: 1, Last: true}
	ctx.give(p, part, next)
	waitHeard(&mu, &heard, 1)
	time.Sleep(50 * time.Millisecond) // what else would come
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(heard) != "[part 1]" {
		t.Fatalf("the next activation heard %v of the handover to this one, want [part 1]", heard)
	}
}

// windowOf is the sum of the counts in k's window, and its cells.
func windowOf(k *Counter) (total uint64, cells int) {
	k.w.Export(func(c window.Cell) bool {
		total += c.Count
		cells++
		return true
	})
	return total, cells
}

// bigWindow is a CounterState of n keys in one pane, counts 1…n.
func bigWindow(n int) *messages.CounterState {
	m := &messages.CounterState{Last: true}
	for i := range n {
		m.Panes, m.Keys = append(m.Panes, int64(time.Hour)), append(m.Keys, fmt.Sprintf("zone-%06d", i))
		m.Counts, m.Sums = append(m.Counts, uint64(i+1)), append(m.Sums, int64(i+1))
	}
	return m
}

// TestMoveSendsALostPartAgain: a handover part that vanishes on the way
// (no answer, no dead letter: Proto.Actor drops what it sends through a
// connection it is replacing) is sent again, and the new activation ends
// with the whole window and the task's counts of tuples, each taken once.
func TestMoveSendsALostPartAgain(t *testing.T) {
	from, ctx := counterTask(t)
	ctx.give(from, bigWindow(20000)) // parts of counterStateBytes
	from.st.Processed, from.col.emitted = 41, 90
	wantTotal, wantCells := windowOf(from.user.(counted).counter())
	parts := 0
	from.user.(counted).counter().export(counterStateBytes, func(*messages.CounterState) { parts++ })
	if parts < 3 {
		t.Fatalf("the window went in %d parts; the test wants 3 or more", parts)
	}
	state := fmt.Sprintf("state %d", parts)
	want := []string{"part 0", "part 1", "part 1"}
	for i := 2; i < parts; i++ {
		want = append(want, fmt.Sprintf("part %d", i))
	}
	want = append(want, state, state)

	into, _ := counterTask(t)
	into.awaiting = true
	var mu sync.Mutex
	var heard []string
	dropped := map[string]bool{}
	to := ctx.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		var what string
		switch m := c.Message().(type) {
		case *messages.CounterState:
			what = fmt.Sprintf("part %d", m.Part)
		case *messages.ProcessorState:
			what = fmt.Sprintf("state %d", m.Part)
		default:
			return
		}
		mu.Lock()
		defer mu.Unlock()
		heard = append(heard, what)
		if (what == "part 1" || what == state) && !dropped[what] {
			dropped[what] = true // lost on the way: no answer
			return
		}
		into.Receive(c)
	}))
	ctx.give(from, &grain.Moved{Activate: func() (*actor.PID, error) { return to, nil }})

	mu.Lock()
	defer mu.Unlock()
	// A part answered later than the test's short handWait (a loaded
	// machine) is sent again too: compare what came, each run of one part
	// as one, and check that the lost ones came again.
	if got := slices.Compact(slices.Clone(heard)); fmt.Sprint(got) != fmt.Sprint(slices.Compact(want)) {
		t.Fatalf("the new activation heard %v, want %v", heard, want)
	}
	for what := range dropped {
		if n := len(slices.DeleteFunc(slices.Clone(heard), func(h string) bool { return h != what })); n < 2 {
			t.Fatalf("the new activation heard the lost %s %d times, want it again: %v", what, n, heard)
		}
	}
	if total, cells := windowOf(into.user.(counted).counter()); total != wantTotal || cells != wantCells {
		t.Fatalf("the new activation holds %d counts in %d cells, want %d in %d", total, cells, wantTotal, wantCells)
	}
	if into.st.Processed != 41 || into.col.emitted != 90 || into.awaiting {
		t.Fatalf("the new activation processed %d, emitted %d, awaiting %v; want 41, 90, false",
			into.st.Processed, into.col.emitted, into.awaiting)
	}
}

// TestMoveTakesARepeatedPartOnce: the new activation that hears a part,
// or the task's state, a second time (its answer was lost, or came after
// the old activation gave up waiting) does not count it twice.
func TestMoveTakesARepeatedPartOnce(t *testing.T) {
	p, ctx := counterTask(t)
	part := bigWindow(3)
	part.Move, part.Last = 5, false
	last := &messages.CounterState{Panes: []int64{int64(time.Hour)}, Keys: []string{"other"}, Counts: []uint64{10}, Sums: []int64{10},
		Move: 5, Part: 1, Last: true}
	st := &messages.ProcessorState{Processed: 7, Emitted: 9, Move: 5, Part: 2}
	ctx.give(p, &grain.Incoming{}, part, part, last, last, st, st)
	if total, cells := windowOf(p.user.(counted).counter()); total != 1+2+3+10 || cells != 4 {
		t.Fatalf("the window holds %d counts in %d cells, want 16 in 4", total, cells)
	}
	if p.st.Processed != 7 || p.col.emitted != 9 || p.awaiting {
		t.Fatalf("processed %d, emitted %d, awaiting %v; want 7, 9, false", p.st.Processed, p.col.emitted, p.awaiting)
	}
}
