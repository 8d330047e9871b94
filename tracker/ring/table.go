package ring

import "slices"

// tableBits is the resolution of a Table's bucket index: 4096 buckets of
// 4 bytes, 16 KB, small enough to stay in a core's L1 cache.
const tableBits = 12

// Table is a frozen copy of a ring's running points for lookups on the hot
// path: safe for concurrent use, owners by index rather than by name, and
// O(1) for almost every key. The ring splits into 2^12 buckets; a bucket
// that no point falls inside has one owner, stored directly; for the others
// the bucket holds where to start a short scan of the points.
type Table struct {
	ids    []string // running ackers, sorted
	keys   []uint32 // running points, sorted
	owners []int32  // per point, an index into ids
	bucket []int32  // owner index, or -(first point at or after the bucket)-1
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
	t.bucket = make([]int32, 1<<tableBits)
	for b := range t.bucket {
		lo := uint32(b) << (32 - tableBits)
		hi := lo | (1<<(32-tableBits) - 1)
		i, _ := slices.BinarySearch(t.keys, lo)
		j, _ := slices.BinarySearch(t.keys, hi)
		if i == j { // no point in [lo, hi): one owner for the bucket
			t.bucket[b] = t.owners[i%len(t.keys)]
		} else {
			t.bucket[b] = -int32(i) - 1
		}
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
	i := int(-b - 1)
	for i < len(t.keys) && t.keys[i] < key {
		i++
	}
	if i == len(t.keys) {
		i = 0
	}
	return int(t.owners[i]), true
}
