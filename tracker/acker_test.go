package tracker

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/acktor/acktor/messages"
	"github.com/acktor/acktor/tracker/ledger"
	"google.golang.org/protobuf/proto"
)

// spoutTasks is the test topology: tasks 0 and 1 are spout tasks, 2 and 3
// processors.
var spoutTasks = []bool{true, true, false, false}

// net is a set of ackers wired to each other in memory, and what they told
// spout tasks and clients.
type net struct {
	t         *testing.T
	ackers    []*Acker
	completed map[uint64]int // springId -> times told
	failed    map[uint64]int
	timedOut  map[uint64]int
	told      map[uint64]string // springId -> who was told: "task 0", "client a/1"
}

func newNet(t *testing.T, n int, d *Directory) *net {
	t.Helper()
	w := &net{t: t, completed: map[uint64]int{}, failed: map[uint64]int{}, timedOut: map[uint64]int{}, told: map[uint64]string{}}
	for i := range n {
		w.ackers = append(w.ackers, NewAcker(AckerConfig{Num: i, Generations: 3, MaxPending: 64, Spouts: spoutTasks}, d))
	}
	return w
}

// settle flushes every acker and delivers what they send until nothing
// moves.
func (w *net) settle() {
	w.t.Helper()
	for range 100 {
		moved := false
		for _, a := range w.ackers {
			a.Flush()
			for _, o := range a.Ready() {
				moved = true
				w.deliver(o)
			}
		}
		if !moved {
			return
		}
	}
	w.t.Fatal("messages still moving after 100 rounds")
}

func (w *net) deliver(o Out) {
	w.t.Helper()
	switch o.Dest {
	case ToAcker:
		a := w.ackers[o.Acker]
		switch m := o.Msg.(type) {
		case *messages.Track:
			a.Track(m)
		case *messages.AckBatch:
			a.AckBatch(m)
		case *messages.FailRoot:
			a.Fail(m)
		case *messages.Handover:
			a.Handover(m)
		default:
			w.t.Fatalf("acker/%d sent %T to an acker", o.Acker, m)
		}
		return
	}
	who := fmt.Sprintf("task %d", o.Task)
	if o.Dest == ToClient {
		who = "client " + o.Client.Address + "/" + o.Client.Id
	}
	note := func(ids []uint64, seen map[uint64]int) {
		for _, id := range ids {
			seen[id]++
			w.told[id] = who
		}
	}
	switch m := o.Msg.(type) {
	case *messages.Completed:
		note(m.SpringIds, w.completed)
	case *messages.Failed:
		if m.Reason == messages.FailReason_FAIL_REASON_TIMEOUT {
			note(m.SpringIds, w.timedOut)
		} else {
			note(m.SpringIds, w.failed)
		}
	default:
		w.t.Fatalf("%s was sent %T", who, m)
	}
}

// send hands m to acker n as its actor would.
func (w *net) send(n int, m any) { w.deliver(Out{Dest: ToAcker, Acker: n, Msg: m}) }

// totals are the ackers' stats summed.
type totals struct{ InFlight, BadMessages, ClientsRefused, Forwarded uint64 }

func (w *net) stats() (s totals) {
	for i, a := range w.ackers {
		st := a.Stats(AckerIdentity(i))
		s.InFlight += st.InFlight
		s.BadMessages += st.BadMessages
		s.ClientsRefused += st.ClientsRefused
		s.Forwarded += st.Forwarded
	}
	return s
}

// roots are n springIds of spout task task.
func roots(task uint32, n int) []uint64 {
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = SpringID(task, uint64(1000+i))
	}
	return ids
}

// TestAckerCompletes: the tracking paper's acker, whole: a root's init and
// the acks of its tree fold to 0 in any order, and its spout task hears of
// it once, at the next Flush, in one Completed per task.
//
// Reference: the tracking paper §3.3, figure 3.
func TestAckerCompletes(t *testing.T) {
	d := NewDirectory(1, 1, 0)
	w := newNet(t, 1, d)
	ids := append(roots(0, 50), roots(1, 50)...)
	rng := rand.New(rand.NewPCG(1, 2))
	var inits, first, second []uint64
	for range ids {
		e1, e2 := rng.Uint64()|1, rng.Uint64()|1
		inits = append(inits, e1)
		first, second = append(first, e1^e2), append(second, e2) // a tuple that emitted one child, then the child
	}
	w.send(0, &messages.AckBatch{SpringIds: ids, XorDeltas: first}) // acks before the init are kept
	for task := range uint32(2) {
		w.send(0, &messages.Track{Task: task, SpringIds: ids[task*50 : task*50+50], InitXors: inits[task*50 : task*50+50]})
	}
	if len(w.ackers[0].Ready()) != 0 || w.ackers[0].Pending() {
		t.Fatal("something completed before its tree was acked, or was sent before Flush")
	}
	w.send(0, &messages.AckBatch{SpringIds: ids, XorDeltas: second, Routing: d.Routing})
	if !w.ackers[0].Pending() {
		t.Fatal("completions are not pending")
	}
	out := slices.Clone(w.ackers[0].Ready())
	w.ackers[0].Flush()
	out = append(out, w.ackers[0].Ready()...)
	if len(out) != 2 {
		t.Fatalf("%d messages, want one Completed per spout task", len(out))
	}
	for _, o := range out {
		w.deliver(o)
	}
	for _, id := range ids {
		if w.completed[id] != 1 || w.told[id] != fmt.Sprintf("task %d", TaskOf(id)) {
			t.Fatalf("springId %x: completed %d times, told %s", id, w.completed[id], w.told[id])
		}
	}
	if s := w.stats(); s.InFlight != 0 || s.BadMessages != 0 {
		t.Fatalf("stats %+v", s)
	}
	// Reference: the tracking paper §3.3.
}

// TestAckerPassesOn: entries of roots another acker owns go to it, in one
// message per acker and kind; entries whose sender routed by the acker's own
// set are taken without a look at the ring.
func TestAckerPassesOn(t *testing.T) {
	d := NewDirectory(1, 3, 0)
	ids := roots(0, 300)
	for _, tc := range []struct {
		name    string
		routing uint64
		passed  bool
	}{
		{"unstamped", 0, true},
		{"routed by another set", RoutingOf(2, 160), true},
		{"routed by this set", d.Routing, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newNet(t, 3, d)
			a := w.ackers[0]
			inits := make([]uint64, len(ids))
			for i := range inits {
				inits[i] = 7
			}
			a.Track(&messages.Track{Task: 0, SpringIds: ids, InitXors: inits, Routing: tc.routing})
			out := a.Ready()
			mine := 0
			for _, id := range ids {
				if d.AckerOf(id) == 0 {
					mine++
				}
			}
			if !tc.passed {
				if len(out) != 0 || a.Ledger().Len() != len(ids) {
					t.Fatalf("%d messages passed on, %d records; want 0 and %d", len(out), a.Ledger().Len(), len(ids))
				}
				return
			}
			if len(out) != 2 || a.Ledger().Len() != mine {
				t.Fatalf("%d messages passed on, %d records; want 2 and %d", len(out), a.Ledger().Len(), mine)
			}
			for _, o := range out {
				m := o.Msg.(*messages.Track)
				for _, id := range m.SpringIds {
					if d.AckerOf(id) != o.Acker {
						t.Fatalf("springId %x passed to acker/%d, owned by acker/%d", id, o.Acker, d.AckerOf(id))
					}
				}
				if m.Routing != d.Routing || m.Task != 0 {
					t.Fatalf("passed on as %+v", m)
				}
				w.deliver(o)
			}
			w.send(0, &messages.AckBatch{SpringIds: ids, XorDeltas: inits})
			w.settle()
			if len(w.completed) != len(ids) || w.stats().Forwarded != uint64(2*(len(ids)-mine)) {
				t.Fatalf("%d of %d completed, %d forwarded", len(w.completed), len(ids), w.stats().Forwarded)
			}
		})
	}
}

// TestAckerSetChanges: a root opened under one acker set completes under
// another whatever reached which acker when: each acker hands the records
// it no longer owns to their new owner, which folds them into what reached
// it first, and passes on what still reaches it. Nothing is lost, failed
// or told twice, through 1→3→2→4 ackers.
//
// Reference: the tracking paper §3.2, figures 2(c) and 2(d).
func TestAckerSetChanges(t *testing.T) {
	sets := []int{1, 3, 2, 4}
	dirs := make([]*Directory, len(sets))
	for i, n := range sets {
		dirs[i] = NewDirectory(uint64(i+1), n, 0)
	}
	w := newNet(t, 4, dirs[0])
	ids := append(roots(0, 400), roots(1, 400)...)
	rng := rand.New(rand.NewPCG(5, 6))
	check := map[uint64][]uint64{} // springId -> the deltas still to send
	for _, id := range ids {
		var parts []uint64
		x := uint64(0)
		for range 3 {
			p := rng.Uint64() | 1
			parts, x = append(parts, p), x^p
		}
		check[id] = append(parts, x) // init = x, and the three acks fold it to 0
	}
	send := func(step int, d *Directory) {
		for _, id := range ids {
			if len(check[id]) <= step {
				continue
			}
			owner := d.AckerOf(id)
			if step == 0 {
				w.send(owner, &messages.Track{Task: TaskOf(id), SpringIds: []uint64{id}, InitXors: []uint64{check[id][3]}, Routing: d.Routing})
				continue
			}
			w.send(owner, &messages.AckBatch{SpringIds: []uint64{id}, XorDeltas: []uint64{check[id][step-1]}, Routing: d.Routing})
		}
	}
	for step := range 4 {
		d := dirs[step]
		for _, a := range w.ackers[:sets[step]] { // the set reaches the ackers before the senders' messages
			a.SetDirectory(d)
		}
		send(step, d)
		w.settle()
		for _, a := range w.ackers { // and reaches the rest later
			a.SetDirectory(d)
		}
		w.settle()
	}
	for _, id := range ids {
		if w.completed[id] != 1 {
			t.Fatalf("springId %x completed %d times (failed %d)", id, w.completed[id], w.failed[id])
		}
	}
	if s := w.stats(); s.InFlight != 0 || s.BadMessages != 0 || len(w.failed)+len(w.timedOut) != 0 {
		t.Fatalf("stats %+v, failed %d, timed out %d", s, len(w.failed), len(w.timedOut))
	}
	// Reference: the tracking paper §3.2.
}

// TestAckerTimesOut: a record open Generations rotations after its init
// times out and its spout task hears so; a failed root is told at once.
func TestAckerTimesOut(t *testing.T) {
	d := NewDirectory(1, 1, 0)
	w := newNet(t, 1, d)
	a := w.ackers[0]
	w.send(0, &messages.Track{Task: 1, SpringIds: []uint64{1, 2}, InitXors: []uint64{3, 3}})
	w.send(0, &messages.FailRoot{SpringIds: []uint64{2}})
	w.settle()
	if w.failed[2] != 1 || w.told[2] != "task 1" {
		t.Fatalf("failed root told %d times, to %s", w.failed[2], w.told[2])
	}
	for r := range 3 {
		if w.timedOut[1] != 0 {
			t.Fatalf("timed out after %d rotations", r)
		}
		a.Rotate()
		w.settle()
	}
	if w.timedOut[1] != 1 || w.told[1] != "task 1" || a.Ledger().Len() != 0 {
		t.Fatalf("timed out %d times to %s, %d records left", w.timedOut[1], w.told[1], a.Ledger().Len())
	}
}

// TestAckerDropsMalformed: a message whose arrays disagree, or a Track from
// a task that is no spout task and names no client, is dropped and
// counted; the acker goes on serving.
func TestAckerDropsMalformed(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    any
	}{
		{"track arrays", &messages.Track{Task: 0, SpringIds: []uint64{1, 2}, InitXors: []uint64{1}}},
		{"track from a processor", &messages.Track{Task: 2, SpringIds: []uint64{1}, InitXors: []uint64{1}}},
		{"track from past the tasks", &messages.Track{Task: 9, SpringIds: []uint64{1}, InitXors: []uint64{1}}},
		{"client without an actor", &messages.Track{Task: ClientTasks, SpringIds: []uint64{1}, InitXors: []uint64{1}, Notify: &messages.Pid{Address: "x"}}},
		{"client above MaxTask", &messages.Track{Task: ledger.MaxTask + 1, SpringIds: []uint64{1}, InitXors: []uint64{1}, Notify: &messages.Pid{Id: "a"}}},
		{"ack arrays", &messages.AckBatch{SpringIds: []uint64{1}, XorDeltas: []uint64{1, 2}}},
		{"handover arrays", &messages.Handover{SpringIds: []uint64{1}, CheckValues: []uint64{1}, Tasks: []uint32{0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newNet(t, 1, NewDirectory(1, 1, 0))
			w.send(0, tc.m)
			w.settle()
			w.send(0, &messages.Track{Task: 0, SpringIds: []uint64{5}, InitXors: []uint64{1}})
			w.send(0, &messages.AckBatch{SpringIds: []uint64{5}, XorDeltas: []uint64{1}})
			w.settle()
			if s := w.stats(); s.BadMessages != 1 || w.completed[5] != 1 || s.InFlight != 0 {
				t.Fatalf("bad messages %d, later root completed %d times, %d in flight", s.BadMessages, w.completed[5], s.InFlight)
			}
		})
	}
}

// TestAckerClients: a remote client hears of its roots where its Track said;
// a client whose task id another client with records here holds is refused
// (counted) until the first is forgotten, Generations rotations after its
// last record; past MaxClients new clients are refused.
func TestAckerClients(t *testing.T) {
	pid := func(id string) *messages.Pid { return &messages.Pid{Address: "127.0.0.1:1", Id: id} }
	const task = ClientTasks + 9
	t.Run("a task id another client holds", func(t *testing.T) {
		w := newNet(t, 1, NewDirectory(1, 1, 0))
		a := w.ackers[0]
		w.send(0, &messages.Track{Task: task, SpringIds: []uint64{1}, InitXors: []uint64{7}, Notify: pid("first")})
		w.send(0, &messages.Track{Task: task, SpringIds: []uint64{2}, InitXors: []uint64{0}, Notify: pid("second")})
		w.send(0, &messages.AckBatch{SpringIds: []uint64{1}, XorDeltas: []uint64{7}})
		w.settle()
		if w.told[1] != "client 127.0.0.1:1/first" || w.completed[2] != 0 || w.stats().ClientsRefused != 1 {
			t.Fatalf("told %v, refused %d", w.told, w.stats().ClientsRefused)
		}
		for range 3 {
			a.Rotate()
		}
		w.send(0, &messages.Track{Task: task, SpringIds: []uint64{3}, InitXors: []uint64{0}, Notify: pid("second")})
		w.settle()
		if w.told[3] != "client 127.0.0.1:1/second" {
			t.Fatalf("the second client, once the first was forgotten: told %q", w.told[3])
		}
	})
	t.Run("an open root keeps its client until it times out", func(t *testing.T) {
		w := newNet(t, 1, NewDirectory(1, 1, 0))
		w.send(0, &messages.Track{Task: task, SpringIds: []uint64{1}, InitXors: []uint64{7}, Notify: pid("first")})
		for range 3 {
			w.ackers[0].Rotate()
			w.settle()
		}
		if w.timedOut[1] != 1 || w.told[1] != "client 127.0.0.1:1/first" || w.stats().BadMessages != 0 {
			t.Fatalf("timed out %d times, told %q", w.timedOut[1], w.told[1])
		}
	})
	t.Run("a handover restarts its client's time", func(t *testing.T) {
		w := newNet(t, 1, NewDirectory(1, 1, 0))
		a := w.ackers[0]
		w.send(0, &messages.Track{Task: task, SpringIds: []uint64{1}, InitXors: []uint64{7}, Notify: pid("first")})
		a.Rotate()
		a.Rotate()
		// Acks another acker held come over: the record's timeout starts again,
		// and its client must be remembered as long.
		w.send(0, &messages.Handover{SpringIds: []uint64{1}, CheckValues: []uint64{4}, Tasks: []uint32{0}, Flags: []uint32{0}})
		for range 3 {
			a.Rotate()
			w.settle()
		}
		if w.timedOut[1] != 1 || w.told[1] != "client 127.0.0.1:1/first" || w.stats().BadMessages != 0 {
			t.Fatalf("timed out %d times, told %q, bad messages %d", w.timedOut[1], w.told[1], w.stats().BadMessages)
		}
	})
	t.Run("beyond MaxClients", func(t *testing.T) {
		w := newNet(t, 1, NewDirectory(1, 1, 0))
		const over = 5
		for i := range MaxClients + over {
			c := uint32(ClientTasks + i)
			w.send(0, &messages.Track{Task: c, SpringIds: []uint64{SpringID(c, 1)}, InitXors: []uint64{0}, Notify: pid(fmt.Sprint(i))})
		}
		w.settle()
		if len(w.completed) != MaxClients || w.stats().ClientsRefused != over {
			t.Fatalf("%d clients told, %d refused", len(w.completed), w.stats().ClientsRefused)
		}
	})
}

// TestAckerHandoverChecksTasks: a handed-over record whose init names a task
// the acker cannot tell (no spout task, no client whose address the
// Handover carries or it knows) is dropped and counted, and nothing else is:
// the rest of the Handover is adopted.
func TestAckerHandoverChecksTasks(t *testing.T) {
	const (
		client = ClientTasks + 7
		other  = ClientTasks + 1 // a client whose record is well formed
		bad    = uint64(client) << SpringBits
		good   = uint64(other) << SpringBits
		mine   = bad | 1
	)
	lis, elsewhere := &messages.Pid{Address: "h:1", Id: "lis"}, &messages.Pid{Address: "h:1", Id: "elsewhere"}
	for _, tc := range []struct {
		name    string
		task    uint32
		carry   *messages.Pid // the address the Handover carries for task
		known   *messages.Pid // client tracked a root here first, at this address
		bad     uint64
		refused uint64
		told    bool // lis hears that bad completed
	}{
		{name: "past the last task", task: uint32(len(spoutTasks)), bad: 1},
		{name: "last task below clients", task: ClientTasks - 1, bad: 1},
		{name: "a processor task", task: 2, bad: 1},
		{name: "client without address", task: client, bad: 1},
		{name: "client with an empty address", task: client, carry: &messages.Pid{}, bad: 1},
		{name: "above MaxTask", task: ledger.MaxTask + 1, bad: 1},
		{name: "far above MaxTask", task: 1<<31 | 5, carry: lis, bad: 1},
		{name: "client address carried", task: client, carry: lis, told: true},
		{name: "client known here", task: client, known: lis, told: true},
		{name: "client known at another address", task: client, carry: lis, known: elsewhere, bad: 1, refused: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newNet(t, 1, NewDirectory(1, 1, 0))
			if tc.known != nil {
				w.send(0, &messages.Track{Task: client, SpringIds: []uint64{mine}, InitXors: []uint64{1}, Notify: tc.known})
			}
			h := &messages.Handover{SpringIds: []uint64{bad, good}, CheckValues: []uint64{5, 9}, Tasks: []uint32{tc.task, other},
				Flags: []uint32{1, 1}, Clients: map[uint32]*messages.Pid{other: lis}}
			if tc.carry != nil {
				h.Clients[tc.task] = tc.carry
			}
			w.send(0, h)
			w.send(0, &messages.AckBatch{SpringIds: []uint64{bad, good}, XorDeltas: []uint64{5, 9}})
			w.settle()
			s := w.stats()
			toldBad := w.completed[bad] == 1 && w.told[bad] == "client h:1/lis"
			if w.completed[good] != 1 || s.BadMessages != tc.bad || s.ClientsRefused != tc.refused || toldBad != tc.told {
				t.Fatalf("good completed %d; bad messages %d, refused %d, told %v (%q); want %d, %d, %v",
					w.completed[good], s.BadMessages, s.ClientsRefused, toldBad, w.told[bad], tc.bad, tc.refused, tc.told)
			}
		})
	}
}

// TestAckerNotifiesOnlySpoutsAndClients: a record whose task is neither a
// spout task nor a known client (a stray init an older build let through)
// is counted when it settles, and no message is sent for it.
func TestAckerNotifiesOnlySpoutsAndClients(t *testing.T) {
	w := newNet(t, 1, NewDirectory(1, 1, 0))
	a := w.ackers[0]
	for _, task := range []uint32{2, 3, ClientTasks, ledger.MaxTask} {
		id := SpringID(task, 1)
		a.completed.add(task, id)
	}
	a.Flush()
	if out := a.Ready(); len(out) != 0 || a.Stats("").BadMessages != 4 {
		t.Fatalf("%d messages sent, %d counted", len(out), a.Stats("").BadMessages)
	}
	if a.Pending() {
		t.Fatal("the outbox kept them")
	}
	_ = maps.Clone(w.told)
}

// TestAckerTakesNearSpoutsRoots: spout tasks give their roots to the
// ackers on their own member where they can (Spout.SetNear), so an acker
// that shares a member with many spout tasks owns far more than its share
// of the roots in flight; it takes them all, and refuses none.
func TestAckerTakesNearSpoutsRoots(t *testing.T) {
	for _, tc := range []struct {
		name           string
		ackers, spouts int
		maxPending     int
	}{
		{"one of 8 ackers, 50 spout tasks", 8, 50, 2048},
		{"one of 12 ackers, 30 spout tasks", 12, 30, 2048},
		{"one of 16 ackers, 64 spout tasks", 16, 64, 1024},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDirectory(1, tc.ackers, 0)
			spouts := make([]bool, tc.spouts)
			for i := range spouts {
				spouts[i] = true
			}
			a := NewAcker(AckerConfig{Num: 0, Generations: 3, MaxPending: tc.maxPending, Spouts: spouts}, d)
			near := make([]bool, tc.ackers)
			near[0] = true
			owned := 0
			for task := range uint32(tc.spouts) {
				s := NewSpout(SpoutConfig{Task: task, MaxPending: tc.maxPending, MaxReplays: 1, Deadline: 100, Draw: func() uint64 { return uint64(task) << 20 }})
				s.SetNear(near)
				m := &messages.Track{Task: task, Routing: d.Routing, Version: d.Version}
				for range tc.maxPending {
					if id := s.NextSpringID(d); d.AckerOf(id) == 0 {
						m.SpringIds, m.InitXors = append(m.SpringIds, id), append(m.InitXors, id|1)
					}
				}
				owned += len(m.SpringIds)
				a.Track(m)
			}
			share := tc.spouts * tc.maxPending / tc.ackers
			if bound := 4*(share+share/10) + 4096; owned <= bound { // what a bound on the share alone allowed
				t.Fatalf("the acker owns %d roots, within %d for its share %d: the case does not test what it says", owned, bound, share)
			}
			if st := a.Stats(AckerIdentity(0)); st.InFlight != uint64(owned) || st.Rejected != 0 {
				t.Errorf("%d in flight and %d rejected of %d roots given", st.InFlight, st.Rejected, owned)
			}
		})
	}
}

// TestAckerHandOverAllInParts: an acker that moves hands its records over
// in parts of at most MaxHandover, each within what a member takes in one
// message, and a new acker that takes the parts holds every record.
func TestAckerHandOverAllInParts(t *testing.T) {
	const roots = MaxHandover + 3
	d := NewDirectory(1, 1, 0)
	cfg := AckerConfig{Num: 0, Generations: 3, MaxPending: roots, Spouts: []bool{true}}
	a := NewAcker(cfg, d)
	m := &messages.Track{Task: 0, Routing: d.Routing, Version: d.Version}
	for i := range uint64(roots) {
		m.SpringIds, m.InitXors = append(m.SpringIds, SpringID(0, i)), append(m.InitXors, i|1)
	}
	a.Track(m)
	parts := a.HandOverAll()
	if len(parts) != 2 || len(parts[0].SpringIds) != MaxHandover || len(parts[1].SpringIds) != 3 {
		t.Fatalf("%d parts, want 2 of %d and 3 records", len(parts), MaxHandover)
	}
	if size := proto.Size(parts[0]); size > 32<<20 {
		t.Errorf("a part of %d bytes, want at most 32 MiB", size)
	}
	b := NewAcker(cfg, d)
	for _, h := range parts {
		b.Handover(h)
	}
	if st := b.Stats(AckerIdentity(0)); st.InFlight != roots || st.Rejected != 0 || a.Stats(AckerIdentity(0)).InFlight != 0 {
		t.Fatalf("the new acker holds %d records (%d refused), want %d; the old one %d", st.InFlight, st.Rejected, roots, a.Stats(AckerIdentity(0)).InFlight)
	}
}
