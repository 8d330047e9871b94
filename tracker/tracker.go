// Package tracker is the tracker's protocol, pure: how a springId is laid
// out, which task ids are remote clients, how ackers are named and how a
// root finds its acker (the acker set, routed by the paper's ring). It
// imports no Proto.Actor; the actors and the remote client both build on it,
// so that the two cannot disagree.
//
// Its rooms: ledger, the acker's table of records (XOR checkValues in
// timeout generations), and ring, the paper's consistent hashing of roots
// onto ackers.
package tracker

import (
	"strconv"
	"strings"
)

// SpringBits is the width of a task's sequence inside a springId; the task
// id sits above it, so that springIds never collide across tasks.
const SpringBits = 40

// SpringID is the springId of a task's seq-th root.
func SpringID(task uint32, seq uint64) uint64 {
	return uint64(task)<<SpringBits | seq&(1<<SpringBits-1)
}

// TaskOf is the task a springId was made by.
func TaskOf(springID uint64) uint32 { return uint32(springID >> SpringBits) }

// ClientTasks is the first task id of remote clients: the topology's own
// tasks are numbered below it, clients draw theirs from here up to
// ledger.MaxTask.
const ClientTasks = 1 << 23

// MaxAckers bounds the acker count of a topology (and of a change to it).
const MaxAckers = 4096

// AckerKind is the cluster kind of the ackers' virtual actors.
const AckerKind = "acker"

// ackerPrefix starts every acker's identity.
const ackerPrefix = "acker/"

// AckerIdentity is the identity of acker n, "acker/n": its name on the
// ring and its virtual actor's identity in the cluster.
func AckerIdentity(n int) string { return ackerPrefix + strconv.Itoa(n) }

// AckerNumber is the n of an acker identity "acker/n", if id is one.
func AckerNumber(id string) (int, bool) {
	s, ok := strings.CutPrefix(id, ackerPrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n >= MaxAckers || AckerIdentity(n) != id {
		return 0, false
	}
	return n, true
}
