// Package cluster wires acktor's virtual actors into a Proto.Actor cluster:
// the embedded single-member default, a node of a multi-machine cluster
// (automanaged provider), an identity lookup that spreads grains evenly
// over members, and logging into logrus. The acker ring is tracker/ring.
package cluster

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/sirupsen/logrus"
)

// Node is one running cluster member.
type Node struct {
	System  *actor.ActorSystem
	Cluster *pcluster.Cluster
	// Lost receives why the other members count this one gone for good
	// (its etcd lease ran out, or its key was deleted); the node should
	// then stop, and a restart joins as a new member. Nil for providers
	// that never say so.
	Lost <-chan error
	// alone: an embedded member, with no one to hand its grains over to.
	alone bool
}

// StartEmbedded starts a single-member cluster in this process with the
// in-memory provider: no services to install. Its remote endpoint binds to
// 127.0.0.1 on a free port. Proto.Actor logs through log.
func StartEmbedded(name string, kinds []*pcluster.Kind, log *logrus.Logger) (n *Node, err error) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return NewSlogLogger(log)
	}))
	cfg := pcluster.Configure(name, test.NewTestProvider(test.NewInMemAgent()), Placement(),
		remote.Configure("127.0.0.1", 0), pcluster.WithKinds(kinds...), pcluster.WithRequestTimeout(10*time.Second))
	c := pcluster.New(sys, cfg)
	defer func() { // Proto.Actor panics on a busy port
		if r := recover(); r != nil {
			stopStarted(c)
			n, err = nil, fmt.Errorf("cluster: starting embedded member: %v", r)
		}
	}()
	if err := startMember(c); err != nil {
		stopStarted(c)
		return nil, fmt.Errorf("cluster: starting embedded member: %w", err)
	}
	return &Node{System: sys, Cluster: c, alone: true}, nil
}

// Stop leaves the cluster and stops the member. An embedded member has no
// one to hand its grains over to, so it stops at once; any other stops as
// Proto.Actor's graceful shutdown does, waiting two seconds for the
// grains' ownership to move (stopMember).
func (n *Node) Stop() {
	if n.alone {
		stopMember(n.Cluster, 0)
		return
	}
	stopMember(n.Cluster, ownershipMoves)
}

// ownershipMoves is how long a member that stops waits, as Proto.Actor's
// graceful shutdown does, for its grains' ownership to move.
const ownershipMoves = 2 * time.Second
