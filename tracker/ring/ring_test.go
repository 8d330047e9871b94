package ring

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// joaat is Jenkins' one-at-a-time hash in its usual left-to-right form.
func joaat(b []byte) uint32 {
	var h uint32
	for _, c := range b {
		h += uint32(c)
		h += h << 10
		h ^= h >> 6
	}
	h += h << 3
	h ^= h >> 11
	h += h << 15
	return h
}

func reversed(s string) []byte {
	b := []byte(s)
	slices.Reverse(b)
	return b
}

func TestHashKnownValues(t *testing.T) {
	// "a" by hand: h = 97; h += h<<10 -> 99425; h ^= h>>6 -> 99425^1553 = 98928;
	// h += h<<3 -> 890352; h ^= h>>11 -> 890352^434 = 0xd9442;
	// h += h<<15 -> 0xd9442 + 0xca210000 = 0xca2e9442 (also the published
	// one-at-a-time value of "a", since one byte has no order).
	// "ab" runs 'b' then 'a': the one-at-a-time value of "ba", and vice versa.
	const fox = "The quick brown fox jumps over the lazy dog"
	tests := []struct {
		in   string
		want uint32
	}{
		{"", 0},
		{"a", 0xca2e9442},
		{"ab", 0x7d6b8c42},
		{"ba", 0x45e61e58},
		{string(reversed(fox)), 0x519e91f5}, // the published value of fox, read left to right
	}
	for _, tt := range tests {
		if got := Hash(tt.in); got != tt.want {
			t.Errorf("Hash(%q) = %#x, want %#x", tt.in, got, tt.want)
		}
		if got := HashBytes([]byte(tt.in)); got != tt.want {
			t.Errorf("HashBytes(%q) = %#x, want %#x", tt.in, got, tt.want)
		}
	}
}

func TestHashReadsRightToLeft(t *testing.T) {
	if Hash("ab") == Hash("ba") {
		t.Fatal(`Hash("ab") == Hash("ba"): the order of the bytes is lost`)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	for range 1000 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		s := string(b)
		if got, want := Hash(s), joaat(reversed(s)); got != want {
			t.Fatalf("Hash(%q) = %#x, want one-at-a-time of the reversed bytes %#x", s, got, want)
		}
		if HashBytes(b) != Hash(s) {
			t.Fatalf("HashBytes(%q) != Hash(%q)", s, s)
		}
	}
}

// TestKeySpreadsSequentialIDs: springIds are sequential within a spout
// task; their keys must still spread evenly over the ring.
func TestKeySpreadsSequentialIDs(t *testing.T) {
	for _, base := range []uint64{0, 3 << 40, 1<<40 | 1<<39, math.MaxUint64 - 1<<16} {
		var buckets [64]int
		for i := range uint64(1 << 16) {
			buckets[Key(base+i)>>26]++
		}
		for b, n := range buckets { // 1024 expected; ±15% is over 4 sigma
			if n < 870 || n > 1180 {
				t.Fatalf("base %#x: bucket %d holds %d of 65536 keys, want ~1024", base, b, n)
			}
		}
	}
	if n := testing.AllocsPerRun(100, func() { Key(math.MaxUint64) }); n != 0 {
		t.Errorf("Key allocates %v times, want 0", n)
	}
}

func TestNewReplicas(t *testing.T) {
	tests := []struct{ in, want int }{
		{-1, DefaultReplicas}, {0, DefaultReplicas}, {1, 1}, {7, 7},
		{MaxReplicas, MaxReplicas}, {MaxReplicas + 1, MaxReplicas},
	}
	for _, tt := range tests {
		r := New(tt.in)
		if got := r.Replicas(); got != tt.want {
			t.Errorf("New(%d).Replicas() = %d, want %d", tt.in, got, tt.want)
		}
		r.Add("a")
		if got := len(r.Locations()); got != tt.want {
			t.Errorf("New(%d): %d points for one acker, want %d", tt.in, got, tt.want)
		}
	}
}

func TestAddSetStateRemove(t *testing.T) {
	r := New(8)
	if _, ok := r.State("a"); ok {
		t.Fatal("empty ring knows acker a")
	}
	r.Add("b")
	r.Add("a")
	if s, ok := r.State("a"); !ok || s != NotStarted {
		t.Fatalf("after Add: State(a) = %v, %v; want not started, true", s, ok)
	}
	mustSet(t, r, "a", Running)
	r.Add("a") // no-op: keeps its state and points
	if s, _ := r.State("a"); s != Running {
		t.Fatalf("Add of an existing acker changed its state to %v", s)
	}
	if got := len(r.Locations()); got != 16 {
		t.Fatalf("%d points, want 16", got)
	}
	if got := r.Ackers(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("Ackers() = %q, want [a b]", got)
	}

	errs := []struct {
		id    string
		state State
		want  string
	}{
		{"zz", Running, `ring: unknown acker "zz"`},
		{"a", 3, `ring: invalid state 3 for acker "a"`},
		{"b", 255, `ring: invalid state 255 for acker "b"`},
	}
	for _, e := range errs {
		err := r.SetState(e.id, e.state)
		if err == nil || err.Error() != e.want {
			t.Errorf("SetState(%q, %d) = %v, want %s", e.id, e.state, err, e.want)
		}
	}
	if s, _ := r.State("a"); s != Running {
		t.Fatalf("a failed SetState changed the state to %v", s)
	}

	r.Remove("nobody") // no-op
	r.Remove("a")
	if _, ok := r.State("a"); ok {
		t.Fatal("Remove(a) left a on the ring")
	}
	if got := len(r.Locations()); got != 8 {
		t.Fatalf("after Remove: %d points, want 8", got)
	}
	if _, ok := r.Locate(1); ok {
		t.Fatal("Locate found an acker with none running")
	}
}

func TestLocateWithoutRunningAckers(t *testing.T) {
	r := New(4)
	if id, ok := r.Locate(42); ok || id != "" {
		t.Fatalf("empty ring: Locate = %q, %v", id, ok)
	}
	r.Add("a")
	r.Add("b")
	mustSet(t, r, "b", Failed)
	if id, ok := r.Locate(42); ok || id != "" {
		t.Fatalf("no acker running: Locate = %q, %v", id, ok)
	}
	mustSet(t, r, "a", Running)
	if id, ok := r.Locate(42); !ok || id != "a" {
		t.Fatalf("only a running: Locate = %q, %v; want a, true", id, ok)
	}
}

// TestCollisionTieBreak uses two ackers whose single points share a key:
// Hash("c10796#1") == Hash("c97526#1"). The smaller id owns the point, in
// whatever order they were added, and the other takes over when it fails.
func TestCollisionTieBreak(t *testing.T) {
	const a, b = "c10796", "c97526"
	key := Hash(a + "#1")
	if Hash(b+"#1") != key {
		t.Fatal("the test's ackers no longer collide")
	}
	for _, order := range [][]string{{a, b}, {b, a}} {
		r := running(t, 1, order...)
		for _, k := range []uint32{key, key - 1, key + 1, 0, 1<<32 - 1} {
			if got, _ := r.LocateKey(k); got != a {
				t.Errorf("added %q: LocateKey(%d) = %q, want %q", order, k, got, a)
			}
		}
		if r.Owned(a) != 1 || r.Owned(b) != 0 {
			t.Errorf("added %q: Owned = %v, %v; want 1, 0", order, r.Owned(a), r.Owned(b))
		}
		mustSet(t, r, a, Failed)
		if got, _ := r.LocateKey(key); got != b {
			t.Errorf("added %q, %s failed: LocateKey = %q, want %q", order, a, got, b)
		}
	}
}

func TestLocateDoesNotAllocate(t *testing.T) {
	r := running(t, 0, ackerNames(64)...)
	id := uint64(3<<40 | 12345)
	if n := testing.AllocsPerRun(1000, func() { id++; r.Locate(id) }); n != 0 {
		t.Fatalf("Locate allocates %v times per call, want 0", n)
	}
}

func TestOwned(t *testing.T) {
	r := running(t, 1, "solo")
	if got := r.Owned("solo"); got != 1 {
		t.Fatalf("a lone acker owns %v, want 1", got)
	}
	r = running(t, 0, ackerNames(6)...)
	r.Add("idle")
	mustSet(t, r, "acker/2", Failed)
	sum := 0.0
	for _, id := range r.Ackers() {
		sum += r.Owned(id)
	}
	if math.Abs(sum-1) > 1e-9 {
		t.Fatalf("shares sum to %v, want 1", sum)
	}
	for _, id := range []string{"idle", "acker/2", "unknown"} {
		if got := r.Owned(id); got != 0 {
			t.Errorf("Owned(%q) = %v, want 0", id, got)
		}
	}
}

func TestCopiesAreIndependent(t *testing.T) {
	r := running(t, 4, "a", "b")
	locs, ids := r.Locations(), r.Ackers()
	if !slices.IsSortedFunc(locs, func(x, y Location) int { return cmp.Compare(x.Key, y.Key) }) {
		t.Fatalf("Locations not sorted by key: %v", locs)
	}
	for i := range locs {
		if locs[i].Type != Acker || locs[i].Active != Running {
			t.Fatalf("location %+v: want a running acker point", locs[i])
		}
		locs[i].Active = Failed
	}
	ids[0] = "x"
	if r.Locations()[0].Active != Running || r.Ackers()[0] != "a" {
		t.Fatal("changing a returned slice changed the ring")
	}

	c := r.Clone()
	mustSet(t, c, "a", Failed)
	c.Add("z")
	if s, _ := r.State("a"); s != Running || len(r.Ackers()) != 2 || r.Owned("a") == 0 {
		t.Fatal("changing a clone changed the original")
	}
}

func TestStrings(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{NotStarted.String(), "not started"}, {Running.String(), "running"},
		{Failed.String(), "failed"}, {State(9).String(), "State(9)"},
		{Root.String(), "root"}, {Acker.String(), "acker"}, {Type(4).String(), "Type(4)"},
	} {
		if tt.got != tt.want {
			t.Errorf("String() = %q, want %q", tt.got, tt.want)
		}
	}
}

func TestZeroRing(t *testing.T) {
	var r Ring
	if r.Replicas() != DefaultReplicas {
		t.Fatalf("zero Ring: Replicas() = %d, want %d", r.Replicas(), DefaultReplicas)
	}
	if _, ok := r.Locate(1); ok || r.Owned("a") != 0 || len(r.Ackers()) != 0 || len(r.Locations()) != 0 {
		t.Fatal("zero Ring is not empty")
	}
	if err := r.SetState("a", Running); err == nil {
		t.Fatal("zero Ring: SetState of an unknown acker succeeded")
	}
	r.Remove("a")
	r.Add("a")
	mustSet(t, &r, "a", Running)
	if id, ok := r.Locate(1); !ok || id != "a" || len(r.Locations()) != DefaultReplicas {
		t.Fatalf("zero Ring after Add: Locate = %q, %v; %d points", id, ok, len(r.Locations()))
	}
	if c := (&Ring{}).Clone(); c.Replicas() != DefaultReplicas {
		t.Fatal("Clone of a zero Ring lost its replica count")
	}
}

// TestTableBucketEdges: points placed on the first and last keys of
// buckets, on neighbouring buckets' edges and on the ring's ends: the
// table names the ring's owner at every key around each of them.
func TestTableBucketEdges(t *testing.T) {
	const width = 1 << (32 - tableBits)
	for _, tc := range []struct {
		name string
		keys []uint32
	}{
		{"last key of a bucket", []uint32{5*width - 1, 9 * width}},
		{"first key of a bucket", []uint32{5 * width, 9*width + 7}},
		{"last and first of neighbours", []uint32{5*width - 1, 5 * width, 5*width + 1}},
		{"two on one last key", []uint32{7*width - 1, 7*width - 1, 8 * width}},
		{"the ring's ends", []uint32{0, 1<<32 - 1}},
		{"one point", []uint32{3*width - 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New(1)
			for i := range tc.keys {
				r.Add(fmt.Sprint("a", i))
				_ = r.SetState(fmt.Sprint("a", i), Running)
			}
			r.keys = tc.keys // placed by hand, in order, one owner each
			r.owners = r.owners[:0]
			for i := range tc.keys {
				r.owners = append(r.owners, fmt.Sprint("a", i))
			}
			tab := r.Table()
			for _, p := range tc.keys {
				for _, b := range []uint32{p/width - 1, p / width, p/width + 1} { // a bucket with no point before its last key is direct
					lo, hi := b*width, b*width+width-1
					inside := slices.ContainsFunc(tc.keys, func(k uint32) bool { return k >= lo && k < hi })
					if direct := tab.bucket[b%(1<<tableBits)] >= 0; direct == inside {
						t.Errorf("bucket %d: direct %v, with points before its last key %v", b, direct, inside)
					}
				}
				for _, k := range []uint32{p - width, p - 2, p - 1, p, p + 1, p + 2, p + width} {
					want, _ := r.LocateKey(k)
					if n, ok := tab.OwnerKey(k); !ok || tab.IDs()[n] != want {
						t.Errorf("key %#x: table owner %d (%v) of %v, ring %q", k, n, ok, tab.IDs(), want)
					}
				}
			}
		})
	}
}

// TestTableManyOwners: past 32 767 running ackers a bucket cannot hold an
// owner's index, so every bucket scans; the table still names the ring's
// owner at every key. The ring is built by hand (one point per acker, in
// random order), since adding that many ackers one by one is slow.
func TestTableManyOwners(t *testing.T) {
	for _, ackers := range []int{math.MaxInt16, math.MaxInt16 + 1, math.MaxInt16 + 2} {
		t.Run(fmt.Sprint(ackers), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(ackers)))
			r := New(1)
			r.states = make(map[string]State, ackers)
			keys := map[uint32]bool{}
			for len(keys) < ackers {
				keys[rng.Uint32()] = true
			}
			r.keys = slices.Sorted(maps.Keys(keys))
			for range r.keys {
				id := fmt.Sprint("a", rng.Uint64())
				for r.states[id] != 0 {
					id = fmt.Sprint("a", rng.Uint64())
				}
				r.states[id] = Running
				r.owners = append(r.owners, id)
			}
			tab := r.Table()
			direct := 0
			for _, b := range tab.bucket {
				if b >= 0 {
					direct++
				}
			}
			if scansAll := ackers > math.MaxInt16; scansAll != (direct == 0) {
				t.Fatalf("%d ackers: %d of %d buckets direct", ackers, direct, len(tab.bucket))
			}
			probe := []uint32{0, 1<<32 - 1}
			for range 20000 {
				probe = append(probe, rng.Uint32())
			}
			for i := 0; i < len(r.keys); i += 97 {
				probe = append(probe, r.keys[i]-1, r.keys[i], r.keys[i]+1)
			}
			for _, k := range probe {
				want, _ := r.LocateKey(k)
				if n, ok := tab.OwnerKey(k); !ok || tab.IDs()[n] != want {
					t.Fatalf("key %#x: table owner %q, ring %q", k, tab.IDs()[n], want)
				}
			}
		})
	}
}
