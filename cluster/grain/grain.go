// Package grain is the contract between acktor's cluster placement and the
// virtual actors (grains) it places: the message that tells a grain it has
// moved. Placement (package cluster) sends it; the tasks and ackers (package
// actors) act on it. It lives apart from both so that neither imports the
// other.
package grain

import (
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Moved tells a grain that its identity now belongs to another member: one
// joined, or this one leaves. The grain hands its state to its activation
// there (Activate spawns it and returns its PID), passes on what still
// reaches it for a while, then stops; Done (if not nil) is called once the
// state is on its way. Placement sends it within a member; it never crosses
// the network.
type Moved struct {
	Activate func() (*actor.PID, error)
	Done     func()
}

// Incoming is the first message of a grain activated to take over from a
// moved one (Moved.Activate): the old activation's state follows. A grain
// whose state must not mix with what arrives before it (a counter's
// exactly-once ids) holds its input until the state is in.
type Incoming struct{}

// MovedRequest marks the activation request of Moved.Activate
// (cluster.ActivationRequest.RequestId), so that the new owner's
// placement sends the grain Incoming first.
const MovedRequest = "moved"

// ClaimRequest marks a claim (cluster.ActivationRequest.RequestId): a grain
// activated on a member that has just joined asks the member that held it
// before (its Predecessor) to move its activation here now, rather than
// once that member learns of the join; meanwhile both would take input. The
// asked placement answers the PID of the activation it moves (Incoming and
// the state follow), or Failed when it holds none; it never activates one.
const ClaimRequest = "claim"

// Claimer is what the placement offers a grain activated by a call rather
// than a move: a way to find out whether another member holds an
// activation of it, and to take that over.
type Claimer interface {
	// Predecessor is the member that would own identity of kind were this
	// one not in the cluster: the one to claim it from; "" when there is
	// none (a cluster of one), and then nothing to wait for.
	Predecessor(kind, identity string) string
	// Claim asks the other members (the Predecessor among them, though
	// after several joins and leaves another may hold it) to move their
	// activation here; true when one holds one, which then moves
	// (Incoming and its state follow); false when none holds one or there
	// is no other member. It blocks for a round trip.
	Claim(kind, identity string) (bool, error)
}

// Deaths is what the placement (the cluster's IdentityLookup) tells grains
// of members that died: left the cluster without handing their grains
// over. A spout task replays its roots in flight when one dies.
type Deaths interface {
	// Died says whether the member at addr, which left, died.
	Died(addr string) bool
	// LastDeath is when a member last died (zero: never).
	LastDeath() time.Time
}

// Owners is what the placement tells of where grains live: the address of
// the member that owns identity of kind as this member sees the cluster
// now; "" when no member hosts kind.
type Owners interface {
	Owner(kind, identity string) string
}

// standbySuffix marks a standby kind.
const standbySuffix = "-standby"

// StandbyKind is the kind of the standby of a grain of kind: a replica the
// placement puts on the member that would own the grain were its owner
// gone (with a single member, none).
func StandbyKind(kind string) string { return kind + standbySuffix }

// StandbyOf says whether kind is a standby kind, and of which kind.
func StandbyOf(kind string) (string, bool) { return strings.CutSuffix(kind, standbySuffix) }
