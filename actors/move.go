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
