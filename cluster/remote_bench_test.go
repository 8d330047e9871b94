package cluster

import (
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/acktor/acktor/cluster/wire"
	"github.com/acktor/acktor/messages"
)

// BenchmarkRemoteBatches sends tuple batches in their wire form from one
// actor system to another over loopback, with the members' stream options
// and serializer, and answers each with an ack batch, as a batch job's
// split and count tasks do across members; 32 batches in flight. An op is
// one batch and its answer; cpu-us/batch is the process's CPU for it, both
// systems' (what a crossing costs apart from the tasks' own work, which
// the cluster's benchmark cannot tell from the machine's noise). The
// sizes: a word count's batch between members (14 KB, and an answer of
// 390 entries), the same batch answered by one entry, and a batch of
// 140 bytes answered by one entry (about the fixed cost of two messages).
func BenchmarkRemoteBatches(b *testing.B) {
	for _, bc := range []struct {
		frame, entries int
	}{{14000, 390}, {14000, 1}, {140, 1}} {
		b.Run(fmt.Sprintf("batch-%dB/ack-%d", bc.frame, bc.entries), func(b *testing.B) {
			benchRemoteBatches(b, bc.frame, bc.entries)
		})
	}
}

func benchRemoteBatches(b *testing.B, frame, entries int) {
	if !wire.Installed() {
		b.Fatal("the wire serializer is not installed")
	}
	const window = 32
	from, to := benchSystem(b), benchSystem(b)
	ack := &messages.AckBatch{}
	for i := range entries {
		ack.SpringIds = append(ack.SpringIds, uint64(i+1)*7919)
		ack.XorDeltas = append(ack.XorDeltas, uint64(i+1)*104729)
	}
	var odd atomic.Int64 // batches that came with another frame than was sent
	recv, err := to.Root.SpawnNamed(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*messages.TupleBatch); ok {
			if len(m.Frame) != frame {
				odd.Add(1)
				return
			}
			c.Send(c.Sender(), &messages.AckBatch{SpringIds: ack.SpringIds, XorDeltas: ack.XorDeltas})
		}
	}), "recv")
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, frame)
	for i := range body {
		body[i] = byte(i)
	}
	done := make(chan struct{})
	sent := 0
	var got atomic.Int64 // read on a timeout, outside the sender
	send := func(c actor.Context) {
		enc := wire.FramePrefix(wire.Buffer(16+frame), 1, frame)
		c.RequestWithCustomSender(recv, &wire.Encoded{Type: wire.TupleBatch, Bytes: append(enc, body...)}, c.Self())
		sent++
	}
	b.ResetTimer()
	cpu0 := processCPU()
	_, err = from.Root.SpawnNamed(actor.PropsFromFunc(func(c actor.Context) {
		switch c.Message().(type) {
		case *actor.Started:
			for sent < min(window, b.N) {
				send(c)
			}
		case *messages.AckBatch:
			n := got.Add(1)
			if sent < b.N {
				send(c)
			}
			if n == int64(b.N) {
				close(done)
			}
		}
	}), "send")
	if err != nil {
		b.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		b.Fatalf("%d of %d batches answered in a minute (%d came with a frame not of %d bytes)", got.Load(), b.N, odd.Load(), frame)
	}
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-us/batch")
}

// benchSystem is an actor system with a remote on a free loopback port,
// with the members' stream options, stopped when b ends.
func benchSystem(b *testing.B) *actor.ActorSystem {
	sys := quietSystem()
	r := remote.NewRemote(sys, remote.Configure("127.0.0.1", 0,
		remote.WithServerOptions(streamServerOptions()...),
		remote.WithDialOptions(append(streamDialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...),
		remote.WithEndpointWriterQueueSize(endpointQueue)))
	r.Start()
	b.Cleanup(func() { r.Shutdown(false); sys.Shutdown() })
	return sys
}

// processCPU is the CPU time the process has taken, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
