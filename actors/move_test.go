package actors

import (
	"fmt"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/acktor/acktor/messages"
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
		{&pull{}, false}, {&spoutTick{}, false}, {&rotate{}, false}, {&flushOut{}, false},
		{&flushAcks{}, false}, {&reportNow{}, false}, {&stateLate{}, false}, {&claimed{}, false},
		{&messages.StandbyApplied{}, false}, {&standbyFound{}, false},
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
