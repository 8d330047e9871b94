package cluster

import (
	"log/slog"
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
// same order, without the fixed two-second sleep in its middle (no option
// turns it off either) and without its second IdentityLookup.Shutdown,
// which logs an error. The sleep lets the grains' ownership move to the
// other members; an embedded member has none.
func stopMember(c *pcluster.Cluster) {
	c.Gossip.SetState(pcluster.GracefullyLeftKey, &emptypb.Empty{})
	c.ActorSystem.Shutdown()
	_ = c.Config.ClusterProvider.Shutdown(true)
	c.IdentityLookup.Shutdown()
	c.Gossip.Shutdown()
	c.Remote.Shutdown(true)
	c.Logger().Info("Stopped Proto.Actor cluster", slog.String("address", c.ActorSystem.Address()))
}
