// Package ring places roots on ackers by the improved consistent hashing of
// the tracking paper §3.2: a 32-bit ring (0..2^32-1) on which every acker sits at N
// points ("ackerId#1" … "ackerId#N") and every root at the hash of its
// springId; a root belongs to the first running acker point clockwise from its
// key, so adding, removing or failing an acker moves only the roots on the arcs
// next to that acker's points.
//
// It is a pure core (docs/architecture.md): a plain data structure with no
// goroutines, clocks, I/O or global mutable state. The acker actors and the
// spout tasks drive it; the Proto.Actor cluster then places each acker (a
// virtual actor) on a member.
//
// # Hash
//
// The paper's key function starts from hash = 0, runs every character of the
// string from right to left through one mixing step (its formula (1)) and ends
// with a final avalanche (formula (2)); both formulas are lost from the text.
// This package uses Bob Jenkins' one-at-a-time hash, which has exactly that
// shape, over the bytes of the string (its characters, for the ASCII acker
// ids hashed here) from right to left:
//
//	per byte b:  h += b; h += h << 10; h ^= h >> 6
//	at the end:  h += h << 3; h ^= h >> 11; h += h << 15
//
// A root's key is not a string hash: springIds are integers, and Key mixes
// the 64 bits directly (splitmix64's finalizer), 20 times faster than
// hashing their decimal digits, on a path every ack takes.
//
// # Collisions
//
// Two points may share a key. Points are ordered by (key, acker id), so on a
// tie the acker with the smaller id comes first and owns the arc; the other
// point owns nothing until the first one stops running. Ownership is
// therefore a function of the ring's contents alone, not of the order in
// which ackers were added.
//
// # Replicas
//
// DefaultReplicas (160) was chosen by measurement (BenchmarkBalance, the
// paper's experiment 3): six ackers named as acktor names them, "acker/0" …
// "acker/5", and acktor-shaped springIds (task<<40 | seq; four tasks, each
// counting up from a random start). The largest acker's load over the mean
// is then 1.049, 1.048 and 1.045 for 100k, 200k and 300k roots, against
// 2.97 with the paper's two points per acker, 1.31 with 16 and 1.24 with 64.
// The load tracks the largest ring share (Owned: 1.043 here) within 1–2%, so
// the spread depends on the acker names and the point count, hardly on the
// root count. Scanning 96 … 256 points in steps of 4, for "acker/0" …
// "acker/5" and "acker/1" … "acker/6": 156–188 is the first band in which
// every largest share is at most 1.08; below it a load of 1.10 is met only
// at isolated counts (100, by 0.4% at worst), while 160 keeps the load at
// 1.04–1.07 for both namings over every seed and task mix tried. For six
// random acker names, 160 points give a median largest share of 1.09 (1.16
// at the 90th percentile): other names may need more points, which New takes.
package ring

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/acktor/acktor/internal/assert"
	"github.com/acktor/acktor/internal/mix"
)

// DefaultReplicas is the number of points per acker New uses when asked for
// none; see the package documentation for how it was measured.
const DefaultReplicas = 160

// MaxReplicas bounds the points per acker; New clamps larger requests to it.
const MaxReplicas = 4096

// Type says what a location on the ring stands for (the paper's type field).
type Type uint8

// The two kinds of location, numbered as in the paper.
const (
	Root  Type = 0 // a root tuple, keyed by its springId
	Acker Type = 1 // one of an acker's N points
)

// String returns "root" or "acker".
func (t Type) String() string {
	switch t {
	case Root:
		return "root"
	case Acker:
		return "acker"
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

// State is an acker's state (the paper's active field). Only a Running acker
// owns roots.
type State uint8

// The acker states, numbered as in the paper.
const (
	NotStarted State = 0 // added, not yet running: owns nothing
	Running    State = 1 // owns the arcs before its points
	Failed     State = 2 // terminated abnormally: owns nothing
)

// String returns "not started", "running" or "failed".
func (s State) String() string {
	switch s {
	case NotStarted:
		return "not started"
	case Running:
		return "running"
	case Failed:
		return "failed"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Location is a point on the ring: the paper's location{key, type, active},
// plus the acker a point belongs to.
type Location struct {
	Key    uint32 // position on the ring
	Type   Type   // Root or Acker
	Active State  // the acker's state; NotStarted for a root
	Acker  string // the acker of an Acker point; "" for a Root
}

// Hash is the ring's key of s: Jenkins' one-at-a-time hash over the bytes of s
// from right to left (see the package documentation).
func Hash(s string) uint32 { return hash(s) }

// HashBytes is Hash over a byte slice; HashBytes(b) == Hash(string(b)).
func HashBytes(b []byte) uint32 { return hash(b) }

func hash[T string | []byte](s T) uint32 {
	var h uint32
	for i := len(s) - 1; i >= 0; i-- {
		h = mixByte(h, s[i])
	}
	return avalanche(h)
}

// mixByte is the per-byte step, the paper's formula (1).
func mixByte(h uint32, b byte) uint32 {
	h += uint32(b)
	h += h << 10
	return h ^ h>>6
}

// avalanche is the final step, the paper's formula (2).
func avalanche(h uint32) uint32 {
	h += h << 3
	h ^= h >> 11
	return h + h<<15
}

// Key is a root's position on the ring: the high half of splitmix64's
// finalizer of its springId. The paper keys roots by the hash of a string;
// a springId is an integer, and hashing its decimal digits with Hash cost
// 19.5 ns here, on every ack a processor folds, where this costs ~1 ns and is
// as uniform (a bijection of 64 bits, every input bit reaching every output
// bit). Acker points still use Hash, as the paper places them.
func Key(springID uint64) uint32 {
	return uint32(mix.Splitmix64(springID) >> 32)
}

// point is one of an acker's points.
type point struct {
	key   uint32
	acker string
}

func comparePoints(a, b point) int {
	if c := cmp.Compare(a.key, b.key); c != 0 {
		return c
	}
	return cmp.Compare(a.acker, b.acker)
}

// Ring is the acker ring. The zero value is an empty ring with
// DefaultReplicas points per acker. A Ring is not safe for concurrent use, except that lookups (Locate, LocateKey, State,
// Owned …) may run concurrently with each other while nothing modifies it.
type Ring struct {
	replicas int
	states   map[string]State
	points   []point // every acker's points, sorted by (key, acker)

	// The running points, in the same order, split for the binary search.
	// Rebuilt whenever the set of running ackers changes.
	keys   []uint32
	owners []string
}

// New returns an empty ring that places every acker at replicas points.
// replicas <= 0 means DefaultReplicas; more than MaxReplicas means MaxReplicas.
func New(replicas int) *Ring {
	switch {
	case replicas <= 0:
		replicas = DefaultReplicas
	case replicas > MaxReplicas:
		replicas = MaxReplicas
	}
	return &Ring{replicas: replicas, states: make(map[string]State)}
}

// Replicas is the number of points per acker.
func (r *Ring) Replicas() int {
	if r.replicas == 0 {
		return DefaultReplicas
	}
	return r.replicas
}

// Clone returns an independent copy of r, e.g. to compare owners before and
// after a change.
func (r *Ring) Clone() *Ring {
	c := *r
	c.states = maps.Clone(r.states)
	c.points = slices.Clone(r.points)
	c.keys = slices.Clone(r.keys)
	c.owners = slices.Clone(r.owners)
	return &c
}

// Add places an acker on the ring at its points "ackerID#1" … "ackerID#N",
// NotStarted, so it owns nothing until SetState makes it Running. Adding an
// acker already on the ring does nothing (its state is kept).
func (r *Ring) Add(ackerID string) {
	if _, ok := r.states[ackerID]; ok {
		return
	}
	if r.states == nil {
		r.states = make(map[string]State)
	}
	r.states[ackerID] = NotStarted
	added := make([]point, r.Replicas())
	buf := make([]byte, 0, len(ackerID)+1+20)
	buf = append(append(buf, ackerID...), '#')
	n := len(buf)
	for i := range added {
		buf = strconv.AppendInt(buf[:n], int64(i+1), 10)
		added[i] = point{key: HashBytes(buf), acker: ackerID}
	}
	slices.SortFunc(added, comparePoints)
	r.points = merge(r.points, added)
	// A NotStarted acker owns nothing: the running points are unchanged.
}

// merge returns the sorted union of two sorted point slices.
func merge(a, b []point) []point {
	out := make([]point, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if comparePoints(a[0], b[0]) <= 0 {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// Remove takes an acker and its points off the ring; its roots go to the next
// running acker clockwise. Removing an unknown acker does nothing.
func (r *Ring) Remove(ackerID string) {
	s, ok := r.states[ackerID]
	if !ok {
		return
	}
	delete(r.states, ackerID)
	r.points = slices.DeleteFunc(r.points, func(p point) bool { return p.acker == ackerID })
	if s == Running {
		r.rebuild()
	}
}

// SetState sets an acker's state. Only a Running acker owns roots: making one
// NotStarted or Failed hands its roots to the next running acker clockwise,
// and making it Running again takes back exactly those roots. It fails for
// an acker not on the ring or a state other than NotStarted, Running, Failed.
func (r *Ring) SetState(ackerID string, state State) error {
	old, ok := r.states[ackerID]
	if !ok {
		return fmt.Errorf("ring: unknown acker %q", ackerID)
	}
	if state > Failed {
		return fmt.Errorf("ring: invalid state %d for acker %q", state, ackerID)
	}
	r.states[ackerID] = state
	if (old == Running) != (state == Running) {
		r.rebuild()
	}
	return nil
}

// rebuild recomputes the running points from r.points and r.states.
func (r *Ring) rebuild() {
	r.keys, r.owners = r.keys[:0], r.owners[:0]
	for _, p := range r.points {
		if r.states[p.acker] == Running {
			r.keys = append(r.keys, p.key)
			r.owners = append(r.owners, p.acker)
		}
	}
	for i := 1; i < len(r.keys); i++ {
		assert.That(r.keys[i-1] <= r.keys[i], "ring: points out of order")
	}
}

// State returns an acker's state, and false if it is not on the ring.
func (r *Ring) State(ackerID string) (State, bool) {
	s, ok := r.states[ackerID]
	return s, ok
}

// Ackers returns the ids of the ackers on the ring, in any state, sorted.
func (r *Ring) Ackers() []string {
	ids := make([]string, 0, len(r.states))
	for id := range r.states {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Locations returns every acker point, sorted by key (then acker id), with
// its acker's current state.
func (r *Ring) Locations() []Location {
	locs := make([]Location, len(r.points))
	for i, p := range r.points {
		locs[i] = Location{Key: p.key, Type: Acker, Active: r.states[p.acker], Acker: p.acker}
	}
	return locs
}

// Locate returns the acker that owns the root springID: the acker of the first
// running point clockwise from Key(springID). ok is false when no acker is
// running. It does not allocate.
func (r *Ring) Locate(springID uint64) (ackerID string, ok bool) {
	return r.LocateKey(Key(springID))
}

// LocateKey returns the acker of the first running point at or clockwise
// from key (wrapping past 2^32-1 to 0); ok is false when no acker is running.
func (r *Ring) LocateKey(key uint32) (ackerID string, ok bool) {
	if len(r.keys) == 0 {
		return "", false
	}
	i, _ := slices.BinarySearch(r.keys, key) // first running point with key >= key
	if i == len(r.keys) {
		i = 0
	}
	return r.owners[i], true
}

// Owned returns the share of the ring (0..1) that an acker owns: the total
// length of the arcs that end at its running points. It is 0 for an acker that
// is not running or not on the ring; over all running ackers it sums to 1.
func (r *Ring) Owned(ackerID string) float64 {
	var arcs uint64
	for i, owner := range r.owners {
		if owner != ackerID {
			continue
		}
		if i == 0 { // the arc wraps past 2^32-1, or is the whole ring
			arcs += 1<<32 - uint64(r.keys[len(r.keys)-1]) + uint64(r.keys[0])
		} else {
			arcs += uint64(r.keys[i] - r.keys[i-1])
		}
	}
	return float64(arcs) / (1 << 32)
}
