package tracker

import "github.com/acktor/acktor/tracker/ring"

// Directory says which acker owns each root: the tracker paper's ring
// (§3.2) over acker/0 … acker/n-1, frozen into a ring.Table for O(1)
// lookups. It is immutable; a change of the acker set makes a new one with
// the next version.
type Directory struct {
	Version  uint64
	Ackers   int    // 0: tracking is off
	Replicas int    // points per acker on the ring
	Routing  uint64 // directories alike in it route alike (RoutingOf); 0 with no ackers
	table    *ring.Table
	num      []int32 // table index -> acker number
}

// RingScheme numbers the way a directory's ring is built (the point and key
// hashes, the acker names): change it with them, so that members of two
// builds never take each other's routing for their own.
const RingScheme = 1

// RoutingOf is what a directory's routing rests on, as tasks stamp it on
// their messages: the ring scheme, the ackers and the points per acker.
func RoutingOf(ackers, replicas int) uint64 {
	return RingScheme<<48 | uint64(ackers)<<32 | uint64(uint32(replicas))
}

// ParseRouting reads the ackers and points per acker of a routing, if it is
// of this ring scheme and within bounds.
func ParseRouting(routing uint64) (ackers, replicas int, ok bool) {
	ackers, replicas = int(routing>>32&0xFFFF), int(uint32(routing))
	ok = routing>>48 == RingScheme && ackers >= 1 && ackers <= MaxAckers && replicas >= 1 && replicas <= ring.MaxReplicas
	return ackers, replicas, ok
}

// NewDirectory builds the directory of ackers ackers of replicas points each
// (0: ring.DefaultReplicas) at version.
func NewDirectory(version uint64, ackers, replicas int) *Directory {
	d := &Directory{Version: version, Ackers: ackers, Replicas: replicas}
	if ackers == 0 {
		return d
	}
	r := ring.New(replicas)
	d.Routing = RoutingOf(ackers, r.Replicas())
	for n := range ackers {
		r.Add(AckerIdentity(n))
		_ = r.SetState(AckerIdentity(n), ring.Running) // it was just added
	}
	d.table = r.Table()
	for _, id := range d.table.IDs() {
		n, _ := AckerNumber(id)
		d.num = append(d.num, int32(n))
	}
	return d
}

// OlderThan says whether the set of version and routing is newer than d:
// a later version, or the same one with a greater routing. Two sets can
// share a version (members configured with different acker counts, two
// changes at once on different members); ordering them makes every member
// settle on one, where otherwise each would pass the other's roots back to
// it for good.
func (d *Directory) OlderThan(version, routing uint64) bool {
	return version > d.Version || version == d.Version && routing > d.Routing
}

// AckerOf is the number of the acker that owns springID. d must have ackers.
func (d *Directory) AckerOf(springID uint64) int {
	i, _ := d.table.Owner(springID)
	return int(d.num[i])
}

// FirstOwned returns the first of the n springIDs from from on whose
// acker is in set, by acker number; false if none is, or set is shorter
// than the ackers.
func (d *Directory) FirstOwned(from uint64, n int, set []bool) (uint64, bool) {
	if d.Ackers == 0 || len(set) < d.Ackers {
		return 0, false
	}
	for id := from; id < from+uint64(n); id++ {
		if i, _ := d.table.OwnerKey(ring.Key(id)); set[d.num[i]] {
			return id, true
		}
	}
	return 0, false
}
