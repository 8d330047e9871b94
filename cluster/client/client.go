// Package client tracks roots through an acktor cluster from a process that
// is not a topology member: the tracker paper's remote message clients. A
// program begins a root with the XOR of the ids of the tuples it hands out
// for it, acks with XOR deltas as work is done, and hears on a channel
// when the ackers find the root's tree complete, failed or timed out. The
// client keeps a deadline for each open root too, and reports it timed out
// itself when the ackers never answer (an acker crashed with its records, or
// refused the client), so every root begun is reported once.
//
// Roots go to ackers as the cluster's ring says (the paper's consistent
// hashing over acker/0 … acker/n-1). A client that believes in a stale
// acker count still works: ackers pass on what they do not own.
package client

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/sirupsen/logrus"

	"github.com/acktor/acktor/cluster"
	"github.com/acktor/acktor/messages"
	"github.com/acktor/acktor/tracker"
	"github.com/acktor/acktor/tracker/ring"
)

// Options shape a client.
type Options struct {
	// Ackers is the cluster's acker count; Replicas its ring's points per
	// acker (0: ring.DefaultReplicas). Both must match the cluster's for
	// roots to reach their acker directly.
	Ackers, Replicas int
	// Events is the capacity of the events channel (0: 4096). When it is
	// full the client stops taking notifications until it is read.
	Events int
	// Timeout is how long a root may stay open before the client reports
	// it timed out itself, whatever became of it at the ackers: set it
	// above the cluster's tracker timeout, so that the ackers' word comes
	// first (0: 2 minutes).
	Timeout time.Duration
	// MaxPending bounds the roots open at once; Begin answers ErrFull
	// beyond it (0: 65536).
	MaxPending int
}

// ErrFull is Begin's answer while Options.MaxPending roots are open.
var ErrFull = errors.New("client: as many roots open as Options.MaxPending")

// clientTick makes the client's actor look for roots past their deadline.
type clientTick struct{}

// Event is what the ackers say about a root, once per root begun.
type Event struct {
	SpringID  uint64
	Completed bool // the whole tree was acked
	// Reason says why not: "failed" (a Fail), "timed out" (at its acker),
	// "timed out at the client" (no answer from the ackers by its deadline).
	Reason string
}

// Client tracks roots. It is safe for concurrent use.
type Client struct {
	c      *pcluster.Cluster
	node   *cluster.Node // the client member Dial started, if any
	task   uint32
	seq    atomic.Uint64
	dir    *tracker.Directory // the acker set of Options
	self   *actor.PID
	notify *messages.Pid
	events chan Event
	sub    *eventstream.Subscription
	cancel scheduler.CancelFunc
	done   chan struct{} // closed by Close
	close  sync.Once

	timeout    time.Duration
	maxPending int
	pendMu     sync.Mutex
	pending    map[uint64]int64 // open roots' deadlines, unix ns

	mu   sync.Mutex
	pids map[int]*actor.PID
	gen  uint64 // bumped when pids is cleared, so a lookup begun before is not kept
}

// Dial joins the cluster cfg describes as a client (it hosts no grains),
// waits up to wait for a member that hosts ackers, and returns a client
// over it; Close leaves.
func Dial(cfg cluster.Config, o Options, wait time.Duration, log *logrus.Logger) (*Client, error) {
	node, err := cluster.StartClient(cfg, log)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	for deadline := time.Now().Add(wait); !hostsAckers(node.Cluster); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			node.CloseClient()
			return nil, fmt.Errorf("client: no member hosting ackers found in %v", wait)
		}
	}
	cl, err := New(node.Cluster, o)
	if err != nil {
		node.CloseClient()
		return nil, err
	}
	cl.node = node
	return cl, nil
}

func hostsAckers(c *pcluster.Cluster) bool {
	for _, m := range c.MemberList.Members().Members() {
		if m.HasKind(tracker.AckerKind) {
			return true
		}
	}
	return false
}

// New makes a client over a cluster this process has joined already, as a
// member or as a client.
func New(c *pcluster.Cluster, o Options) (*Client, error) {
	if o.Ackers < 1 || o.Ackers > tracker.MaxAckers {
		return nil, fmt.Errorf("client: Ackers = %d, want 1..%d", o.Ackers, tracker.MaxAckers)
	}
	if o.Replicas < 0 || o.Replicas > ring.MaxReplicas {
		return nil, fmt.Errorf("client: Replicas = %d, want 0..%d", o.Replicas, ring.MaxReplicas)
	}
	if o.Events <= 0 {
		o.Events = 4096
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.MaxPending <= 0 {
		o.MaxPending = 65536
	}
	cl := &Client{c: c, dir: tracker.NewDirectory(0, o.Ackers, o.Replicas), events: make(chan Event, o.Events), pids: map[int]*actor.PID{},
		done: make(chan struct{}), timeout: o.Timeout, maxPending: o.MaxPending, pending: map[uint64]int64{}}
	var b [8]byte
	_, _ = rand.Read(b[:])
	x := binary.LittleEndian.Uint64(b[:])
	cl.task = tracker.ClientTasks + uint32(x%(1<<23))
	cl.seq.Store(x >> tracker.SpringBits) // a random start: a restarted client reuses no springId in flight
	cl.self = c.ActorSystem.Root.Spawn(actor.PropsFromFunc(cl.receive))
	every := min(max(o.Timeout/4, 10*time.Millisecond), 5*time.Second)
	cl.cancel = scheduler.NewTimerScheduler(c.ActorSystem.Root).SendRepeatedly(every, every, cl.self, &clientTick{})
	// A change of members may move ackers: look them up again.
	cl.sub = c.ActorSystem.EventStream.Subscribe(func(ev any) {
		if _, ok := ev.(*pcluster.ClusterTopology); ok {
			cl.forgetAckers()
		}
	})
	cl.notify = &messages.Pid{Address: cl.self.Address, Id: cl.self.Id}
	return cl, nil
}

func (cl *Client) receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.Completed:
		for _, id := range m.SpringIds {
			cl.report(Event{SpringID: id, Completed: true})
		}
	case *messages.Failed:
		reason := "failed"
		if m.Reason == messages.FailReason_FAIL_REASON_TIMEOUT {
			reason = "timed out"
		}
		for _, id := range m.SpringIds {
			cl.report(Event{SpringID: id, Reason: reason})
		}
	case *clientTick:
		cl.expire(time.Now().UnixNano())
	}
}

// report delivers e if its root is open (the first word on it), waiting
// while the events channel is full, until Close.
func (cl *Client) report(e Event) {
	cl.pendMu.Lock()
	_, open := cl.pending[e.SpringID]
	delete(cl.pending, e.SpringID)
	cl.pendMu.Unlock()
	if !open {
		return // a second word on a root, or one on no root of this client's
	}
	select {
	case cl.events <- e:
	case <-cl.done:
	}
}

// expire reports the roots past their deadline timed out. Their ackers may
// have moved or died: look them up afresh.
func (cl *Client) expire(now int64) {
	var late []uint64
	cl.pendMu.Lock()
	for id, deadline := range cl.pending {
		if deadline < now {
			late = append(late, id)
		}
	}
	cl.pendMu.Unlock()
	if len(late) == 0 {
		return
	}
	cl.forgetAckers()
	for _, id := range late {
		cl.report(Event{SpringID: id, Reason: "timed out at the client"})
	}
}

// forgetAckers drops the cached acker addresses.
func (cl *Client) forgetAckers() {
	cl.mu.Lock()
	clear(cl.pids)
	cl.gen++
	cl.mu.Unlock()
}

// Events delivers what the ackers say about this client's roots, one event
// a root; Close closes it.
func (cl *Client) Events() <-chan Event { return cl.events }

// TupleID draws a random non-zero tuple id.
func (cl *Client) TupleID() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:])
		if id := binary.LittleEndian.Uint64(b[:]); id != 0 {
			return id
		}
	}
}

// Begin opens a root whose tree starts with tuples whose ids XOR to
// initXor, and returns its springId; an Event reports it by its deadline.
// It answers ErrFull while Options.MaxPending roots are open.
func (cl *Client) Begin(initXor uint64) (uint64, error) {
	id := tracker.SpringID(cl.task, cl.seq.Add(1))
	cl.pendMu.Lock()
	if len(cl.pending) >= cl.maxPending {
		cl.pendMu.Unlock()
		return 0, ErrFull
	}
	cl.pending[id] = time.Now().Add(cl.timeout).UnixNano()
	cl.pendMu.Unlock()
	if err := cl.send(id, &messages.Track{Task: cl.task, SpringIds: []uint64{id}, InitXors: []uint64{initXor}, Notify: cl.notify}); err != nil {
		cl.pendMu.Lock()
		delete(cl.pending, id)
		cl.pendMu.Unlock()
		return 0, err
	}
	return id, nil
}

// Ack folds xorDelta into the root: a handled tuple's id XOR the ids of
// the tuples it gave rise to.
func (cl *Client) Ack(springID, xorDelta uint64) error {
	return cl.send(springID, &messages.AckBatch{SpringIds: []uint64{springID}, XorDeltas: []uint64{xorDelta}})
}

// Fail fails the root now; an Event says so.
func (cl *Client) Fail(springID uint64) error {
	return cl.send(springID, &messages.FailRoot{SpringIds: []uint64{springID}})
}

func (cl *Client) send(springID uint64, m any) error {
	n := cl.dir.AckerOf(springID)
	cl.mu.Lock()
	pid, gen := cl.pids[n], cl.gen
	cl.mu.Unlock()
	if pid == nil {
		if pid = cl.c.Get(tracker.AckerIdentity(n), tracker.AckerKind); pid == nil {
			return fmt.Errorf("client: no member hosts %s", tracker.AckerIdentity(n))
		}
		cl.mu.Lock()
		if cl.gen == gen { // else the members changed while we asked
			cl.pids[n] = pid
		}
		cl.mu.Unlock()
	}
	cl.c.ActorSystem.Root.Send(pid, m)
	return nil
}

// Close stops the client, closes Events (roots still open are not
// reported), and leaves the cluster if Dial joined it.
func (cl *Client) Close() error {
	cl.close.Do(func() {
		close(cl.done) // a report waiting on a full Events gives up
		cl.cancel()
		cl.c.ActorSystem.EventStream.Unsubscribe(cl.sub)
		if err := cl.c.ActorSystem.Root.StopFuture(cl.self).Wait(); err != nil {
			cl.c.Logger().Warn("client: stopping its actor", slog.Any("error", err))
		}
		close(cl.events)
		if cl.node != nil {
			cl.node.CloseClient()
		}
	})
	return nil
}
