package cluster

import (
	"log/slog"
	_ "unsafe" // go:linkname, for the kinds Proto.Actor builds in StartMember

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"
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
