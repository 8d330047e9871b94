package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/scheduler"

	"github.com/acktor/acktor/cluster/grain"
	"github.com/acktor/acktor/messages"
)

// MoveGrace is how long a task that moved to another member keeps passing
// on the messages that still reach it (senders look it up again once they
// learn of the new topology, or when it stops).
const MoveGrace = 10 * time.Second

// moveTries and moveRetry bound the attempts to activate a task's new home.
const (
	moveTries = 4
	moveRetry = time.Second
)

// stopForwarding is a moved task's timer message.
type stopForwarding struct{}

// forwarder is what is left of a task that moved: the PID to pass on to.
type forwarder struct {
	to *actor.PID
}

// pass forwards a user message of a moved task, keeping its sender so that
// requests are answered from the new activation, and says whether it did.
func (f *forwarder) pass(ctx actor.Context) bool {
	if f == nil || f.to == nil {
		return false
	}
	switch ctx.Message().(type) {
	case *stopForwarding:
		ctx.Stop(ctx.Self())
		return true
	case actor.SystemMessage, actor.AutoReceiveMessage, *cluster.ClusterInit, *grain.Moved:
		return false
	case *pull, *spoutTick, *startHeld, *rotate, *flushOut, *flushAcks, *reportNow, *stateLate, *memberDied:
		// The old activation's messages to itself: the new one keeps its
		// own timers and hears of deaths itself, move flushed what a flush
		// would send, and these cannot cross to another member.
		return true
	case *messages.StandbyApplied, *actor.DeadLetterResponse, *standbyFound, *standbyRetry, *claimed:
		// About the old activation's batches to its standby: the new one
		// numbers its own, and syncs its standby afresh.
		return true
	case *messages.SplitGrant:
		// An answer to the old activation's request: the new one asks for
		// itself, after the split it holds.
		return true
	}
	ctx.Forward(f.to)
	return true
}

// moveTo activates the task's new home and arms the end of forwarding; nil
// when the activation failed (the task then stays and keeps working).
func moveTo(ctx actor.Context, m *grain.Moved, what string, log interface{ Errorf(string, ...any) }) *forwarder {
	to, err := m.Activate()
	for try := 1; (err != nil || to == nil) && try < moveTries; try++ {
		// A member that comes back on the address of one that just died is
		// reached, for a few seconds, through the dead one's failing
		// connection, which drops what is sent to it.
		time.Sleep(moveRetry)
		to, err = m.Activate()
	}
	if err != nil || to == nil {
		log.Errorf("%s: moving to another member: %v; staying", what, err)
		if m.Done != nil {
			m.Done()
		}
		return nil
	}
	scheduler.NewTimerScheduler(ctx.ActorSystem().Root).SendOnce(MoveGrace, ctx.Self(), &stopForwarding{})
	return &forwarder{to: to}
}

// handWait (the env's, by default) and handTries bound how long the old
// activation waits for a handover part to be answered and how often it
// sends the part again. A part can vanish without a dead letter: while
// Proto.Actor replaces the connection to a member that came back on a dead
// one's address, what it sends goes to a writer being dropped.
const (
	handWait  = 2 * time.Second
	handTries = 8
)

// moveIn is what the new activation has taken of the handovers that came
// to it: by move, the next part it expects. The old activation sends a part
// again until it is answered, so a part may come twice; the window's parts
// carry no offsets, and one taken twice would count twice. Two handovers
// can come at once (two members each held an activation while the
// membership settled), so it remembers the last few, not only the last.
type moveIn struct {
	moves []moveNext // the newest last
}

type moveNext struct {
	id   uint64
	next uint32
}

// movesKept bounds the handovers moveIn remembers.
const movesKept = 8

// take says whether a handover part (move, part) is new, and notes it. A
// part of move 0 (a standby's sync, or an older sender) is always new.
func (in *moveIn) take(move uint64, part uint32) bool {
	if move == 0 {
		return true
	}
	i := in.find(move)
	switch {
	case i < 0:
		if len(in.moves) == movesKept {
			in.moves = append(in.moves[:0], in.moves[1:]...)
		}
		in.moves = append(in.moves, moveNext{id: move})
		i = len(in.moves) - 1
	case part < in.moves[i].next:
		return false
	}
	in.moves[i].next = part + 1
	return true
}

// took says whether the part (move, part) was taken here.
func (in *moveIn) took(move uint64, part uint32) bool {
	i := in.find(move)
	return move != 0 && i >= 0 && part < in.moves[i].next
}

func (in *moveIn) find(move uint64) int {
	for i := range in.moves {
		if in.moves[i].id == move {
			return i
		}
	}
	return -1
}
