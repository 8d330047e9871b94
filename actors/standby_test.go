package actors

import (
	"errors"
	"testing"
	"time"

	"github.com/acktor/acktor/cluster/grain"
	"github.com/acktor/acktor/messages"
	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
)

// TestKindStandby: the placement puts KindStandby's grains on the
// runner-up of KindCounter's only if it reads it as that kind's standby.
func TestKindStandby(t *testing.T) {
	if base, ok := grain.StandbyOf(KindStandby); KindStandby != grain.StandbyKind(KindCounter) || !ok || base != KindCounter {
		t.Fatalf("KindStandby %q is not the placement's standby kind of %q", KindStandby, KindCounter)
	}
}

// standbyContext is what a standby's and the reporter's Receive use of
// their context.
type standbyContext struct {
	actor.Context
	msg     any
	sender  *actor.PID
	answers []any
	sent    []sentMessage
}

// sentMessage is a message a context sent.
type sentMessage struct {
	to  *actor.PID
	msg any
}

func (c *standbyContext) Message() any              { return c.msg }
func (c *standbyContext) Sender() *actor.PID        { return c.sender }
func (c *standbyContext) Respond(m any)             { c.answers = append(c.answers, m) }
func (c *standbyContext) Send(to *actor.PID, m any) { c.sent = append(c.sent, sentMessage{to, m}) }

// TestStandbyRefusesCorruptState: a standby given a corrupt part of its
// task's state holds nothing, logs what did not take, and answers every
// batch until the next whole snapshot with NeedSnapshot, so that the task
// syncs it again; it never applies a batch on top of half a state.
func TestStandbyRefusesCorruptState(t *testing.T) {
	opts := CounterOptions{Value: -1, ExactlyOnce: true, Repeats: &RepeatOptions{Field: 1}}
	topo, task := oneCounter(t, opts)
	s := &standbyTask{env: newEnv(topo, DefaultConfig(), quietLog()), task: task, info: topo.taskInfo(task), key: topo.identity(task)}
	s.reset()
	primary, _ := NewCounter(opts)
	ups := []update{{"z1", "r1", 1, int64(time.Hour)}, {"z1", "r1", 2, int64(time.Hour)}}
	feed(t, primary, ups)
	snapshot := func(spoil bool) {
		s.Receive(&standbyContext{msg: &messages.StandbyReset{}})
		primary.export(1<<20, func(m *messages.CounterState) {
			m = proto.Clone(m).(*messages.CounterState)
			if spoil && len(m.Sketches) > 0 {
				m.Sketches[0].Bloom[0] ^= 0xff
			}
			s.Receive(&standbyContext{msg: m})
		})
	}
	batch := func(seq uint64) *messages.StandbyApplied {
		next := []update{{"z1", "r1", 3 + seq, int64(time.Hour)}}
		feed(t, primary, next)
		ctx := &standbyContext{msg: &messages.StandbyBatch{Seq: seq, Batch: batchOf(next)}}
		s.Receive(ctx)
		return ctx.answers[0].(*messages.StandbyApplied)
	}
	snapshot(true)
	if a := batch(1); !a.NeedSnapshot {
		t.Fatalf("a batch after a corrupt snapshot: %v, want NeedSnapshot", a)
	}
	snapshot(false)
	if a := batch(2); a.NeedSnapshot || a.Seq != 2 {
		t.Fatalf("a batch after a whole snapshot: %v, want applied", a)
	}
	q := &messages.CounterQuery{Keys: []string{"z1"}, Seen: "r1"}
	if got, want := s.user.(counted).counter().Query(q), primary.Query(q); !proto.Equal(got, want) {
		t.Fatalf("the standby answers\n%v\nthe task\n%v", got, want)
	}
}

// TestStandbyLostLooksItUpAgain: a batch that finds no standby (it moved,
// or its member left) makes the counter task look its standby up again
// and sync it, rather than hold its acks until the membership changes
// again, and its answer gets the state; a task without a synced standby
// has a sync due already, and the answer to a batch sent before the last
// sync changes nothing.
func TestStandbyLostLooksItUpAgain(t *testing.T) {
	standby := actor.NewPID("127.0.0.1:1", "standby")
	for _, tc := range []struct {
		name   string
		rep    replica
		lost   bool // it forgets the standby and looks it up again
		synced bool
	}{
		{"synced", replica{pid: standby, synced: true, seq: 3, syncedAt: 1, epoch: 5}, true, false},
		{"nothing sent since the sync", replica{pid: standby, synced: true, seq: 1, syncedAt: 1, epoch: 5}, false, true},
		{"sync due", replica{pid: standby, seq: 3, syncedAt: 1, epoch: 5}, false, false},
		{"none yet", replica{seq: 3, epoch: 5}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, ctx := counterTask(t)
			rep := tc.rep
			p.rep = &rep
			ctx.give(p, &actor.DeadLetterResponse{})
			lost := p.rep.epoch == ^uint64(0) && p.rep.pid == nil
			if lost != tc.lost || p.rep.synced != tc.synced || (!lost && p.rep.epoch != tc.rep.epoch) {
				t.Fatalf("synced %v, pid %v, epoch %d; want lost %v, synced %v", p.rep.synced, p.rep.pid, p.rep.epoch, tc.lost, tc.synced)
			}
		})
	}
}

// TestStandbyLookupFailedTriesAgain: a failed lookup of the standby is
// tried again on a timer: at max pending no batch may come to try it, and
// the task's acks wait for it.
func TestStandbyLookupFailedTriesAgain(t *testing.T) {
	p, ctx := counterTask(t)
	p.rep = &replica{epoch: 5, resolving: true}
	ctx.give(p, &standbyFound{failed: true})
	if !p.rep.retrying || p.rep.epoch != ^uint64(0) {
		t.Fatalf("retrying %v at epoch %d, want a retry due and a lookup at the next chance", p.rep.retrying, p.rep.epoch)
	}
	ctx.give(p, &standbyRetry{})
	if p.rep.retrying {
		t.Fatal("the retry is still due after it came")
	}
}

// TestAnswered: a part's answer counts however long it takes while the
// standby's member stays in the view (a standby growing its table of ids
// took over a second, and a fixed second gave the sync up, over and over),
// and the wait ends at the next look once the member has left.
func TestAnswered(t *testing.T) {
	p, _ := counterTask(t)
	sys := p.root.ActorSystem()
	slow := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*messages.CounterState); ok {
			time.Sleep(300 * time.Millisecond)
			c.Respond(&messages.CounterState{})
		}
	}))
	for _, tc := range []struct {
		name string
		live bool
		want error
	}{
		{"member stays", true, nil},
		{"member left", false, errStandbyGone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := sys.Root.RequestFuture(slow, &messages.CounterState{}, time.Minute)
			start := time.Now()
			err := answered(f, func() bool { return tc.live }, 50*time.Millisecond)
			if !errors.Is(err, tc.want) {
				t.Fatalf("answered: %v, want %v", err, tc.want)
			}
			if took := time.Since(start); tc.want != nil && took > 250*time.Millisecond {
				t.Fatalf("gave up after %v, want at the first look (50ms)", took)
			}
		})
	}
}
