package cluster

import (
	"log/slog"
	"runtime"
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
	stopRemote(c.Remote)
	c.Logger().Info("Stopped Proto.Actor cluster", slog.String("address", c.ActorSystem.Address()))
}

// stopRemote stops the remote gracefully. In this Proto.Actor version that
// can panic with "send on closed channel": the endpoint manager tells each
// endpoint reader's channel to disconnect, and a reader whose peer has
// just gone (a driver that finished) closes its channel before it takes
// it out of the map. The gRPC server, which the panic kept from stopping,
// is then stopped at once: the peers' streams are broken either way.
func stopRemote(r remoteStopper) {
	defer func() {
		if p := recover(); p != nil {
			if e, ok := p.(runtime.Error); !ok || !strings.Contains(e.Error(), "send on closed channel") {
				panic(p) // not the race: a bug to see
			}
			r.Logger().Warn("stopping: Proto.Actor's remote panicked while closing its connections; stopping its server at once",
				slog.Any("panic", p))
			r.Shutdown(false)
		}
	}()
	r.Shutdown(true)
}

// remoteStopper is what stopRemote needs of a *remote.Remote.
type remoteStopper interface {
	Shutdown(graceful bool)
	Logger() *slog.Logger
}
