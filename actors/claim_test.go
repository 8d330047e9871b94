package actors

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/acktor/acktor/cluster/grain"
	"github.com/acktor/acktor/messages"
)

// taskContext is what a processor task's Receive uses of its context.
type taskContext struct {
	actor.Context
	sys  *actor.ActorSystem
	self *actor.PID
	msg  any
}

func (c *taskContext) Message() any                    { return c.msg }
func (c *taskContext) Sender() *actor.PID              { return nil }
func (c *taskContext) Self() *actor.PID                { return c.self }
func (c *taskContext) ActorSystem() *actor.ActorSystem { return c.sys }
func (c *taskContext) Respond(any)                     {}
func (c *taskContext) Forward(to *actor.PID)           { c.sys.Root.Send(to, c.msg) }

// oneCounter is a topology of a spout and one counter task with options o,
// and the counter's task.
func oneCounter(t *testing.T, o CounterOptions) (*Topology, uint32) {
	t.Helper()
	var b Builder
	b.Spout("s", 1, nopSource)
	b.Counter("zones", 1, o, nil).Fields("s", 0)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo, topo.tasks[len(topo.tasks)-1].FirstTask
}

// counterTask is a counter task's actor outside a cluster, and a context
// to hand it messages with.
func counterTask(t *testing.T) (*processorTask, *taskContext) {
	t.Helper()
	opts := CounterOptions{Value: -1, ExactlyOnce: true}
	topo, task := oneCounter(t, opts)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	e := newEnv(topo, DefaultConfig(), quietLog())
	e.handWait = 50 * time.Millisecond
	k, _ := NewCounter(opts)
	p := &processorTask{env: e, task: task, info: topo.taskInfo(task), user: k, root: sys.Root,
		self: sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {})), drained: map[uint32]bool{}, decided: true}
	p.col = newCollector(e, task, p.sendTuples, p.sendAcks, p.sendFails)
	p.rep = &replica{none: true, epoch: e.epoch.Load()} // no member to hold a standby
	return p, &taskContext{sys: sys, self: p.self}
}

// waitHeard waits up to 5 s until got, guarded by mu, holds n entries.
func waitHeard(mu *sync.Mutex, got *[]string, n int) {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		k := len(*got)
		mu.Unlock()
		if k >= n {
			return
		}
	}
}

func (c *taskContext) give(p *processorTask, msgs ...any) {
	for _, m := range msgs {
		c.msg = m
		p.Receive(c)
	}
}

// TestMoveHandsOnHeldInput: a counter task that moves while it holds input
// (waiting for an earlier activation's state) hands that input on to its
// new activation, after its state; none is lost.
func TestMoveHandsOnHeldInput(t *testing.T) {
	p, ctx := counterTask(t)
	var mu sync.Mutex
	var got []string
	to := ctx.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch c.Message().(type) {
		case *messages.CounterState:
			if c.Sender() != nil {
				c.Respond(&messages.CounterState{})
			}
		case *messages.TupleBatch:
			mu.Lock()
			got = append(got, "batch")
			mu.Unlock()
		case *messages.Drain:
			mu.Lock()
			got = append(got, "drain")
			mu.Unlock()
		case *messages.ProcessorState:
			mu.Lock()
			got = append(got, "state")
			mu.Unlock()
			c.Respond(&messages.ProcessorState{})
		}
	}))
	ctx.give(p, &grain.Incoming{}, batchOf([]update{{"z1", "r1", 1, int64(time.Hour)}}), &messages.Drain{FromTask: 0},
		&grain.Moved{Activate: func() (*actor.PID, error) { return to, nil }})
	waitHeard(&mu, &got, 3)
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"state", "batch", "drain"}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("the new activation heard %v, want %v", got, want)
	}
	if p.awaiting || len(p.held) != 0 {
		t.Fatalf("the moved task still waits (%v) with %d held", p.awaiting, len(p.held))
	}
}

// TestStateLateEndsOnlyItsWait: the timer of a wait that is over does not
// end a later wait; the later wait's own timer does.
func TestStateLateEndsOnlyItsWait(t *testing.T) {
	p, ctx := counterTask(t)
	ctx.give(p, &grain.Incoming{}, &messages.CounterState{Last: true}) // a first wait, over
	ctx.give(p, &grain.Incoming{}, batchOf([]update{{"z1", "r1", 1, int64(time.Hour)}}))
	ctx.give(p, &stateLate{wait: 1})
	if !p.awaiting || len(p.held) != 1 {
		t.Fatalf("the first wait's timer ended the second: waiting %v, %d held", p.awaiting, len(p.held))
	}
	ctx.give(p, &stateLate{wait: 2})
	if p.awaiting || len(p.held) != 0 {
		t.Fatalf("the second wait's timer did not end it: waiting %v, %d held", p.awaiting, len(p.held))
	}
}

// TestClaimAnswers: a claim answered "none" ends the wait, and the task
// takes the state of the standby beside it (its earlier activation died);
// one answered "moving", or not answered at all (the claim may still be
// acted on), waits on for the state from there, and leaves the standby
// alone: its state, a copy of part of what comes, would count twice.
func TestClaimAnswers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		m     *claimed
		waits bool
	}{
		{"none", &claimed{}, false},
		{"moving", &claimed{moving: true}, true},
		{"no answer", &claimed{err: errTestTimeout}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, ctx := counterTask(t)
			held, _ := NewCounter(CounterOptions{Value: -1, ExactlyOnce: true})
			held.st.Applied = 7
			asked := standbyBeside(p, ctx, held)
			p.await()
			ctx.give(p, batchOf([]update{{"z1", "r1", 1, int64(time.Hour)}}), tc.m)
			if p.awaiting != tc.waits || (len(p.held) == 1) != tc.waits {
				t.Fatalf("waiting %v with %d held, want waiting %v", p.awaiting, len(p.held), tc.waits)
			}
			took := !tc.waits
			if applied := p.user.(counted).counter().st.Applied; asked.Load() != took || (applied >= 7) != took {
				t.Fatalf("standby promoted %v, %d updates applied; want its state taken %v", asked.Load(), applied, took)
			}
		})
	}
}

// standbyBeside puts a standby of p's task on its member that holds
// counter, and says whether it was promoted.
func standbyBeside(p *processorTask, ctx *taskContext, counter *Counter) *atomic.Bool {
	var asked atomic.Bool
	sb := ctx.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*promote); ok {
			asked.Store(true)
			c.Respond(&promoted{counter: counter})
		}
	}))
	p.env.standbys.Store(p.env.topo.identity(p.task), sb)
	return &asked
}

var errTestTimeout = actor.ErrTimeout

// claimer is an identity lookup whose Claim says another member holds
// every grain and moves it here.
type claimer struct{ cluster.IdentityLookup }

func (claimer) Predecessor(string, string) string  { return "127.0.0.1:1" }
func (claimer) Claim(string, string) (bool, error) { return true, nil }

// TestFirstInputClaimsBeforeTheStandby: a counter task's first input, with
// its standby beside it, makes it claim the task and hold the input; it
// does not take the standby's state first (its earlier activation may be
// moving here with the whole of it).
func TestFirstInputClaimsBeforeTheStandby(t *testing.T) {
	p, ctx := counterTask(t)
	asked := standbyBeside(p, ctx, nil)
	p.decided, p.res.c = false, &cluster.Cluster{IdentityLookup: claimer{}}
	ctx.give(p, batchOf([]update{{"z1", "r1", 1, int64(time.Hour)}}))
	if asked.Load() || !p.awaiting || len(p.held) != 1 {
		t.Fatalf("standby promoted %v, waiting %v with %d held; want a claim and the input held", asked.Load(), p.awaiting, len(p.held))
	}
}

// TestProcessorHoldsAcksOverFewBatches: with AckDelay 0, a task whose input
// keeps coming sends the ack deltas it holds after ackHoldBatches input
// batches, before its queued flushAcks comes; the flushAcks sends the rest,
// and the batch after it queues a flushAcks again.
func TestProcessorHoldsAcksOverFewBatches(t *testing.T) {
	p, ctx := counterTask(t)
	sent := 0 // roots whose deltas went to an acker
	p.col.ackOut = func(_ int, m *messages.AckBatch) { sent += len(m.SpringIds) }
	batch := func(i int) *messages.TupleBatch {
		b := batchOf([]update{{"z1", "r1", uint64(i), int64(time.Hour)}})
		b.SpringIds[0] = uint64(i) // a root of its own
		return b
	}
	for i := 1; i <= ackHoldBatches; i++ {
		if sent != 0 {
			t.Fatalf("deltas sent after %d input batches, want after %d", i-1, ackHoldBatches)
		}
		ctx.give(p, batch(i))
	}
	if sent != ackHoldBatches || !p.hold.queued {
		t.Fatalf("after %d batches: %d roots' deltas sent, flushAcks queued %v; want %d, true", ackHoldBatches, sent, p.hold.queued, ackHoldBatches)
	}
	ctx.give(p, batch(ackHoldBatches+1), &flushAcks{})
	if sent != ackHoldBatches+1 {
		t.Fatalf("the flushAcks left deltas held: %d roots' sent, want %d", sent, ackHoldBatches+1)
	}
	ctx.give(p, batch(ackHoldBatches+2))
	if !p.hold.queued {
		t.Fatal("the batch after a flushAcks queued none")
	}
}

// TestMoveFindsTheNewActivationAgain: a counter task's window whose first
// part finds no activation where the task moved (it went away meanwhile)
// goes to the activation the placement gives on a second try, whole, and
// the task's input follows it there.
func TestMoveFindsTheNewActivationAgain(t *testing.T) {
	p, ctx := counterTask(t)
	pane := int64(time.Hour)
	ctx.give(p, &messages.CounterState{Panes: []int64{pane, pane}, Keys: []string{"z1", "z2"}, Counts: []uint64{1, 2}, Sums: []int64{1, 2}, Last: true})
	gone := ctx.sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	if err := ctx.sys.Root.StopFuture(gone).Wait(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	to := ctx.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		mu.Lock()
		defer mu.Unlock()
		switch m := c.Message().(type) {
		case *messages.CounterState:
			got = append(got, fmt.Sprintf("state %d keys", len(m.Keys)))
			c.Respond(&messages.CounterState{})
		case *messages.ProcessorState:
			got = append(got, "processor state")
			c.Respond(&messages.ProcessorState{})
		}
	}))
	activations := []*actor.PID{gone, to}
	ctx.give(p, &grain.Moved{Activate: func() (*actor.PID, error) {
		pid := activations[0]
		activations = activations[1:]
		return pid, nil
	}})
	waitHeard(&mu, &got, 2)
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"state 2 keys", "processor state"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the new activation heard %v, want %v", got, want)
	}
	if !p.fwd.to.Equal(to) {
		t.Fatalf("the moved task forwards to %v, want %v", p.fwd.to, to)
	}
}
