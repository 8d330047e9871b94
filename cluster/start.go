package cluster

import (
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
	_ "unsafe" // go:linkname, for the kinds Proto.Actor builds in StartMember

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/types/known/emptypb"
)

// initKinds is Proto.Actor's own step of StartMember that activates the
// configured kinds; it has no exported form.
//
//go:linkname initKinds github.com/asynkron/protoactor-go/cluster.(*Cluster).initKinds
func initKinds(c *pcluster.Cluster)

// startMember does what Proto.Actor's Cluster.StartMember does, in the
// same order, without the fixed one-second sleep it ends with (no option
// turns it off). That sleep gives the gossip of a real cluster time to
// spread; an embedded member is alone, its in-memory provider registers it
// before returning, and it can serve at once. It returns the provider's
// error instead of panicking with it.
func startMember(c *pcluster.Cluster) error {
	cfg := c.Config
	c.Remote = remote.NewRemote(c.ActorSystem, cfg.RemoteConfig)
	initKinds(c)
	c.Remote.Start()
	c.Logger().Info("Starting Proto.Actor cluster member", slog.String("address", c.ActorSystem.Address()))
	c.IdentityLookup = cfg.IdentityLookup
	c.IdentityLookup.Setup(c, c.GetClusterKinds(), false)
	if err := c.Gossip.StartGossiping(); err != nil {
		return err
	}
	c.PubSub.Start()
	c.MemberList.InitializeTopologyConsensus()
	return cfg.ClusterProvider.StartMember(c)
}

// stopMember does what Proto.Actor's Cluster.Shutdown(true) does, in the
// same order, with two changes. Its fixed two-second sleep, which lets
// the grains' ownership move to the other members, becomes ownership
// (none for an embedded member, which has no other members; no option
// turns the sleep off), and its second IdentityLookup.Shutdown, which
// logs an error, is left out. And the remote stops through stopRemote.
func stopMember(c *pcluster.Cluster, ownership time.Duration) {
	c.Gossip.SetState(pcluster.GracefullyLeftKey, &emptypb.Empty{})
	c.ActorSystem.Shutdown()
	_ = c.Config.ClusterProvider.Shutdown(true)
	c.IdentityLookup.Shutdown()
	time.Sleep(ownership)
	c.Gossip.Shutdown()
	stopRemote(c.Remote, remoteGrace)
	c.Logger().Info("Stopped Proto.Actor cluster", slog.String("address", c.ActorSystem.Address()))
}

// remoteGrace is how long a member that stops waits for its remote's
// graceful stop before it stops the server at once. Proto.Actor's graceful
// stop waits up to 10 s each for its activator and its endpoint writers
// (one may still be retrying a member that left), then up to 10 s more
// around gRPC's GracefulStop. A member that stops has handed its grains
// over, told every other member and stopped its actors, so nothing that
// could still pass would be delivered (docs/cluster.md: leaves).
const remoteGrace = 2 * time.Second

// stopRemote stops the remote gracefully, or its server at once after
// grace, the rest of the graceful stop going on behind within Proto.Actor's
// bounds. Proto.Actor's graceful stop may panic with "send on closed
// channel" (an endpoint reader whose peer has just gone closes its channel
// before the manager tells it to disconnect; after the server stopped at
// once, that is the usual end of the stop behind): the server then stops
// at once too. Any other panic reaches the caller with its stack, or is
// logged if the stop went on behind.
func stopRemote(r remoteStopper, grace time.Duration) {
	done := make(chan stopPanic, 1)
	go func() {
		defer func() {
			sp := stopPanic{p: recover()}
			if sp.p != nil {
				sp.stack = debug.Stack()
			}
			done <- sp
		}()
		r.Shutdown(true)
	}()
	wait := time.NewTimer(grace)
	defer wait.Stop()
	select {
	case sp := <-done:
		if sp.p == nil {
			return
		}
		if !sp.closeRace() {
			panic(fmt.Sprintf("stopping the remote: %v\n%s", sp.p, sp.stack)) // a bug to see
		}
		r.Logger().Warn("stopping: Proto.Actor's remote panicked while closing its connections; stopping its server at once",
			slog.Any("panic", sp.p))
		r.Shutdown(false)
	case <-wait.C:
		r.Logger().Info("stopping: the remote's graceful stop is still waiting (an endpoint writer, or another member's stream); stopping its server at once",
			slog.Duration("after", grace))
		r.Shutdown(false)
		go func() {
			switch sp := <-done; {
			case sp.p == nil:
			case sp.closeRace():
				r.Logger().Debug("stopping: the graceful stop behind ended on a closed connection", slog.Any("panic", sp.p))
			default:
				r.Logger().Error("stopping: the remote's graceful stop panicked", slog.Any("panic", sp.p), slog.String("stack", string(sp.stack)))
			}
		}()
	}
}

// stopPanic is what the graceful stop panicked with, if it did, and where.
type stopPanic struct {
	p     any
	stack []byte
}

// closeRace says whether the panic is Proto.Actor's send on a closed channel.
func (sp stopPanic) closeRace() bool {
	e, ok := sp.p.(runtime.Error)
	return ok && strings.Contains(e.Error(), "send on closed channel")
}

// remoteStopper is what stopRemote needs of a *remote.Remote.
type remoteStopper interface {
	Shutdown(graceful bool)
	Logger() *slog.Logger
}
