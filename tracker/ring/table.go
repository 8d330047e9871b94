package ring

import (
	"math"
	"slices"
)

// tableBits is the resolution of a Table's bucket index: 32 768 buckets
// of 2 bytes, 64 KB. At 8 ackers of 160 points 4 % of the buckets hold a
// point, against 27 % at 4096 buckets: a spout that looks for a springId
// of the ackers whose turn it is (the tracker's turns) checks about eight
// ids a root, and each check that found a point inside its bucket went on
// to a scan (71 ns a root at 8 ackers and 124 at 32, now 45 and 64).
const tableBits = 15

// Table is a frozen copy of a ring's running points for lookups on the hot
// path: safe for concurrent use, owners by index rather than by name, and
// O(1) for almost every key. The ring splits into 2^15 buckets; a bucket
// that no point falls inside has one owner, stored directly; for the others
// the bucket says where to start a short scan of the points.
type Table struct {
	ids    []string // running ackers, sorted
	keys   []uint32 // running points, sorted
	owners []int32  // per point, an index into ids
	// bucket is the owner's index, or -k-1 for a bucket with points
	// inside (or for every bucket, past 32 767 ackers), whose scan starts
	// at point start[k].
	bucket []int16
	start  []int32 // per bucket with points inside: its first point at or after the bucket
}

// Table freezes the ring's current running points. Later changes to the
// ring do not touch it.
func (r *Ring) Table() *Table {
	t := &Table{keys: slices.Clone(r.keys), owners: make([]int32, len(r.owners))}
	for id, s := range r.states {
		if s == Running {
			t.ids = append(t.ids, id)
		}
	}
	slices.Sort(t.ids)
	for i, o := range r.owners {
		n, _ := slices.BinarySearch(t.ids, o)
		t.owners[i] = int32(n)
	}
	if len(t.keys) == 0 {
		return t
	}
	t.bucket = make([]int16, 1<<tableBits)
	direct := len(t.ids) <= math.MaxInt16 // else every bucket scans
	i := 0                                // the first point at or after the bucket's first key, lo
	for b := range t.bucket {
		hi := uint32(b)<<(32-tableBits) | (1<<(32-tableBits) - 1) // its last key
		j := i
		for j < len(t.keys) && t.keys[j] < hi {
			j++
		}
		if i == j && direct { // no point in [lo, hi): the point at or after hi owns it all
			t.bucket[b] = int16(t.owners[i%len(t.keys)])
		} else {
			t.bucket[b] = -int16(len(t.start)) - 1
			t.start = append(t.start, int32(i))
		}
		for j < len(t.keys) && t.keys[j] == hi {
			j++
		}
		i = j
	}
	return t
}

// IDs returns the running ackers, sorted: Owner's indexes point into it.
func (t *Table) IDs() []string { return t.ids }

// Owner returns the index in IDs of the acker that owns springID, as
// Ring.Locate would name it; ok is false when no acker was running.
func (t *Table) Owner(springID uint64) (int, bool) {
	return t.OwnerKey(Key(springID))
}

// OwnerKey is Owner for a ring position.
func (t *Table) OwnerKey(key uint32) (int, bool) {
	if len(t.keys) == 0 {
		return 0, false
	}
	b := t.bucket[key>>(32-tableBits)]
	if b >= 0 {
		return int(b), true
	}
	i := int(t.start[-int(b)-1])
	for i < len(t.keys) && t.keys[i] < key {
		i++
	}
	if i == len(t.keys) {
		i = 0
	}
	return int(t.owners[i]), true
}
