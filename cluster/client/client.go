// Package client tracks roots through an acktor cluster from a process that
// is not a topology member: the tracker paper's remote message clients. A
// program begins a root with the XOR of the ids of the tuples it hands out
// for it, acks with XOR deltas as work is done, and hears on a channel
// when the ackers find the root's tree complete, failed or timed out.
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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/sirupsen/logrus"

	"github.com/acktor/acktor/actors"
	"github.com/acktor/acktor/cluster"
	"github.com/acktor/acktor/cluster/ring"
	"github.com/acktor/acktor/messages"
)

// seqBits is the width of a client's sequence in its springIds; its task
// id sits above, as a spout task's does.
const seqBits = 40

// Options shape a client.
type Options struct {
	// Ackers is the cluster's acker count; Replicas its ring's points per
	// acker (0: ring.DefaultReplicas). Both must match the cluster's for
	// roots to reach their acker directly.
	Ackers, Replicas int
	// Events is the capacity of the events channel (0: 4096). When it is
	// full the client stops taking notifications until it is read.
	Events int
}

// Event is what the ackers say about a root.
type Event struct {
	SpringID  uint64
	Completed bool   // the whole tree was acked
	Reason    string // why not: "failed" (a Fail), "timed out"
}

// Client tracks roots. It is safe for concurrent use.
type Client struct {
	c      *pcluster.Cluster
	node   *cluster.Node // the client member Dial started, if any
	task   uint32
	seq    atomic.Uint64
	table  *ring.Table
	num    []int // table index -> acker number
	self   *actor.PID
	notify *messages.Pid
	events chan Event
	sub    *eventstream.Subscription

	mu   sync.Mutex
	pids map[int]*actor.PID
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
		if m.HasKind(actors.KindAcker) {
			return true
		}
	}
	return false
}

// New makes a client over a cluster this process has joined already, as a
// member or as a client.
func New(c *pcluster.Cluster, o Options) (*Client, error) {
	if o.Ackers < 1 || o.Ackers > 4096 {
		return nil, fmt.Errorf("client: Ackers = %d, want 1..4096", o.Ackers)
	}
	if o.Replicas < 0 || o.Replicas > ring.MaxReplicas {
		return nil, fmt.Errorf("client: Replicas = %d, want 0..%d", o.Replicas, ring.MaxReplicas)
	}
	if o.Events <= 0 {
		o.Events = 4096
	}
	r := ring.New(o.Replicas)
	for n := range o.Ackers {
		r.Add(actors.AckerIdentity(n))
		_ = r.SetState(actors.AckerIdentity(n), ring.Running)
	}
	cl := &Client{c: c, table: r.Table(), events: make(chan Event, o.Events), pids: map[int]*actor.PID{}}
	for _, id := range cl.table.IDs() {
		n, _ := strconv.Atoi(strings.TrimPrefix(id, "acker/"))
		cl.num = append(cl.num, n)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	x := binary.LittleEndian.Uint64(b[:])
	cl.task = actors.ClientTasks + uint32(x%(1<<23))
	cl.seq.Store(x >> 40) // a random start: a restarted client reuses no springId in flight
	cl.self = c.ActorSystem.Root.Spawn(actor.PropsFromFunc(cl.receive))
	// A change of members may move ackers: look them up again.
	cl.sub = c.ActorSystem.EventStream.Subscribe(func(ev any) {
		if _, ok := ev.(*pcluster.ClusterTopology); ok {
			cl.mu.Lock()
			clear(cl.pids)
			cl.mu.Unlock()
		}
	})
	cl.notify = &messages.Pid{Address: cl.self.Address, Id: cl.self.Id}
	return cl, nil
}

func (cl *Client) receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.Completed:
		for _, id := range m.SpringIds {
			cl.events <- Event{SpringID: id, Completed: true}
		}
	case *messages.Failed:
		reason := "failed"
		if m.Reason == messages.FailReason_FAIL_REASON_TIMEOUT {
			reason = "timed out"
		}
		for _, id := range m.SpringIds {
			cl.events <- Event{SpringID: id, Reason: reason}
		}
	}
}

// Events delivers what the ackers say about this client's roots.
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
// initXor, and returns its springId.
func (cl *Client) Begin(initXor uint64) (uint64, error) {
	id := uint64(cl.task)<<seqBits | cl.seq.Add(1)&(1<<seqBits-1)
	return id, cl.send(id, &messages.Track{Task: cl.task, SpringIds: []uint64{id}, InitXors: []uint64{initXor}, Notify: cl.notify})
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
	i, ok := cl.table.Owner(springID)
	if !ok {
		return errors.New("client: no acker")
	}
	n := cl.num[i]
	cl.mu.Lock()
	pid := cl.pids[n]
	cl.mu.Unlock()
	if pid == nil {
		if pid = cl.c.Get(actors.AckerIdentity(n), actors.KindAcker); pid == nil {
			return fmt.Errorf("client: no member hosts %s", actors.AckerIdentity(n))
		}
		cl.mu.Lock()
		cl.pids[n] = pid
		cl.mu.Unlock()
	}
	cl.c.ActorSystem.Root.Send(pid, m)
	return nil
}

// Close stops the client, and leaves the cluster if Dial joined it.
func (cl *Client) Close() error {
	cl.c.ActorSystem.EventStream.Unsubscribe(cl.sub)
	cl.c.ActorSystem.Root.Stop(cl.self)
	if cl.node != nil {
		cl.node.CloseClient()
	}
	return nil
}
