package ring

import (
	"maps"
	"slices"
	"strconv"
	"testing"
)

// This file follows the style of etcd raft's raft_paper_test.go: each test
// focuses on several sentences of the tracking paper §3.2 ("元組跟蹤單元選擇策略", the
// acker selection strategy: improved consistent hashing), quoted above it with
// a gloss, and ends with a reference to the section and figure.
// Figure 2 maps roots 1…6 and ackers A and B onto the ring; here the roots
// are the springIds 1…6, and more roots are added where a claim is about
// every root.

// rootsInFigure are the springIds of the figure's roots 1…6.
var rootsInFigure = []uint64{1, 2, 3, 4, 5, 6}

// manyRoots are acktor-shaped springIds, to check a claim on many roots.
var manyRoots = springIDs(20_000, 7)

// owners returns the acker of every root.
func owners(r *Ring, roots []uint64) map[uint64]string {
	m := make(map[uint64]string, len(roots))
	for _, id := range roots {
		m[id], _ = r.Locate(id)
	}
	return m
}

// TestPaperRootGoesToFirstAckerClockwise: "對于環中的每個根元組，從根元組的
// key值出發，沿順時針方向旋轉搜索，當遇到第一個acker時，將元組的location存儲
// 在該acker上，因為springId和ackerId的散列值是固定的，因此這個元組和acker的
// 關系必然是唯一和確定的。" From a root's key, search clockwise and store the
// root on the first acker met; since the hashes are fixed, the relation is
// unique and determined (here: whatever order the ackers joined in).
//
// Reference: the tracking paper §3.2, figure 2(a)
func TestPaperRootGoesToFirstAckerClockwise(t *testing.T) {
	for _, replicas := range []int{1, 2} {
		r := running(t, replicas, "A", "B")
		locs := r.Locations()
		for _, id := range append(slices.Clone(rootsInFigure), manyRoots...) {
			key := Key(id)
			// The first acker location at or after key, wrapping past 2^32-1.
			i := slices.IndexFunc(locs, func(l Location) bool { return l.Key >= key })
			if i < 0 {
				i = 0
			}
			got, ok := r.Locate(id)
			if !ok || got != locs[i].Acker {
				t.Fatalf("N=%d: root %d (key %d) on %q, want %q (point %d)", replicas, id, key, got, locs[i].Acker, locs[i].Key)
			}
		}
		if rev := running(t, replicas, "B", "A"); !maps.Equal(owners(r, manyRoots), owners(rev, manyRoots)) {
			t.Fatalf("N=%d: owners depend on the order the ackers were added", replicas)
		}
	}
}

// TestPaperAckerAtNPoints: "采取的策略就是將一個ackerId映射到兩（N）個位置，
// 這樣可以保證跟蹤記錄相對均勻地分配到各個acker中。此時value為acker_id#1,
// acker_id#2，…，acker_id#N，hash 值 key=hash（value）" Each acker is mapped to
// N locations, keyed hash("ackerId#1") … hash("ackerId#N"), so that the
// records spread evenly over the ackers.
//
// Reference: the tracking paper §3.2, figure 2(b)
func TestPaperAckerAtNPoints(t *testing.T) {
	for _, n := range []int{1, 2, 16} {
		r := running(t, n, "A", "B")
		for _, acker := range []string{"A", "B"} {
			var got []uint32
			for _, l := range r.Locations() {
				if l.Acker == acker {
					if l.Type != Acker || l.Active != Running {
						t.Fatalf("N=%d: location %+v is not a running acker point", n, l)
					}
					got = append(got, l.Key)
				}
			}
			var want []uint32
			for i := 1; i <= n; i++ {
				want = append(want, Hash(acker+"#"+strconv.Itoa(i)))
			}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("N=%d: %s at %v, want %v", n, acker, got, want)
			}
		}
	}
	// More locations per acker spread the roots more evenly.
	two := running(t, 2, ackerNames(6)...)
	def := running(t, DefaultReplicas, ackerNames(6)...)
	if a, b := maxOverMean(two, manyRoots), maxOverMean(def, manyRoots); b >= a {
		t.Fatalf("max/mean with N=2 is %.3f, with N=%d %.3f: no better", a, DefaultReplicas, b)
	}
}

// TestPaperRemoveAcker: "這時受影響的將僅是沿acker B1和acker B2逆時針遍歷直到
// 下一個 acker（acker A2和 acker A1）之前的 location，也是本來映射到acker B上
// 的那些location。" When acker B goes, only the locations that were on B are
// affected, and each goes to the next acker clockwise from it.
//
// Reference: the tracking paper §3.2, figure 2(c)
func TestPaperRemoveAcker(t *testing.T) {
	tests := []struct {
		name     string
		replicas int
		ackers   []string
	}{
		{"figure: A and B, two points each", 2, []string{"A", "B"}},
		{"four ackers, two points each", 2, []string{"A", "B", "C", "D"}},
		{"six ackers, default points", DefaultReplicas, ackerNames(6)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := running(t, tt.replicas, tt.ackers...)
			b := tt.ackers[1]
			locs := r.Locations()
			before := owners(r, manyRoots)
			r.Remove(b)
			moved := 0
			for id, now := range owners(r, manyRoots) {
				was := before[id]
				if was != b {
					if now != was {
						t.Fatalf("root %d moved from %s to %s, though %s was removed", id, was, now, b)
					}
					continue
				}
				if next, _ := scan(locs, Key(id), b); now != next {
					t.Fatalf("root %d moved from %s to %s, want the next acker clockwise %s", id, b, now, next)
				}
				moved++
			}
			if moved == 0 {
				t.Fatalf("%s owned none of %d roots", b, len(manyRoots))
			}
		})
	}
}

// TestPaperAddAcker: "這時受影響的元組將僅是那些沿acker C1或acker C2逆時針
// 遍歷直到下一個acker B2和acker A2之間的location（它們本來也是映射到 acker B1
// 和 acker A2上的），將這些location重新映射到acker C1和acker C2上即可" Adding
// acker C affects only the locations on the arcs ending at C's points, which
// move onto C from the ackers that owned those arcs.
//
// Reference: the tracking paper §3.2, figure 2(d)
func TestPaperAddAcker(t *testing.T) {
	for _, replicas := range []int{2, 16, DefaultReplicas} {
		r := running(t, replicas, "A", "B")
		before := r.Clone()
		r.Add("C")
		mustSet(t, r, "C", Running)
		locs := r.Locations()
		moved := 0
		for _, id := range manyRoots {
			was, _ := before.Locate(id)
			now, _ := r.Locate(id)
			if now == was {
				continue
			}
			if now != "C" {
				t.Fatalf("N=%d: root %d moved from %s to %s, not onto C", replicas, id, was, now)
			}
			// The C point that now owns the root; before C came, the root
			// belonged to whoever owned that point's position.
			key := Key(id)
			i := slices.IndexFunc(locs, func(l Location) bool { return l.Key >= key })
			if i < 0 {
				i = 0
			}
			if locs[i].Acker != "C" {
				t.Fatalf("N=%d: root %d is on C but its next point is %s's", replicas, id, locs[i].Acker)
			}
			if owner, _ := before.LocateKey(locs[i].Key); owner != was {
				t.Fatalf("N=%d: root %d came from %s, but the arc at C's point %d was %s's", replicas, id, was, locs[i].Key, owner)
			}
			moved++
		}
		if moved == 0 {
			t.Fatalf("N=%d: C took none of %d roots", replicas, len(manyRoots))
		}
	}
}

// TestPaperLocationStates: "其中type為0，表示根元組的映射；type為1，表示acker
// 的映射。active默認值為0，表示acker未啟動；active為 1，表示 acker正常運行；
// active為 2，表示acker異常終止。" and "如果某個元組跟蹤單元異常終止，元組跟蹤器
// 會將該元組跟蹤單元的跟蹤記錄分配給其他的元組跟蹤單元。" Type 0 is a root, 1 an
// acker; active is 0 (not started, the default), 1 (running) or 2 (failed).
// Only a running acker takes roots, and a failed acker's records go to the
// other ackers: to the next running acker clockwise, as if it had been removed
// (figure 2(c)), and back when it runs again.
//
// Reference: the tracking paper §3.2, figure 2(c)
func TestPaperLocationStates(t *testing.T) {
	if Root != 0 || Acker != 1 || NotStarted != 0 || Running != 1 || Failed != 2 {
		t.Fatal("type and active are not numbered as in the paper")
	}
	r := New(2)
	r.Add("A")
	r.Add("B")
	for _, l := range r.Locations() {
		if l.Active != NotStarted {
			t.Fatalf("a new acker's location %+v: active %d, want 0 (not started)", l, l.Active)
		}
	}
	if _, ok := r.Locate(1); ok {
		t.Fatal("a root found an acker though none was started")
	}
	mustSet(t, r, "A", Running)
	for id, owner := range owners(r, manyRoots) {
		if owner != "A" {
			t.Fatalf("root %d on %q; B is not started, so every root is A's", id, owner)
		}
	}

	mustSet(t, r, "B", Running)
	running := r.Clone()
	removed := r.Clone()
	removed.Remove("B")
	mustSet(t, r, "B", Failed)
	if r.Owned("B") != 0 {
		t.Fatalf("failed B owns %v of the ring", r.Owned("B"))
	}
	if !maps.Equal(owners(r, manyRoots), owners(removed, manyRoots)) {
		t.Fatal("B failed: its roots did not go where they go when B is removed")
	}
	mustSet(t, r, "B", Running)
	if !maps.Equal(owners(r, manyRoots), owners(running, manyRoots)) {
		t.Fatal("B running again: the roots are not back where they were")
	}
}

// TestPaperExperiment3: "隨著輸入元組數量的增多，曲線逐漸趨于橫線，這也說明了
// 輸入的元組越多，各個元組跟蹤單元存儲的元組的總數量相對更均衡。" With six
// ackers and 100k, 200k and 300k roots, the ackers' loads are even. Here:
// max/mean at most 1.10 with DefaultReplicas (BenchmarkBalance prints the
// whole table).
//
// Reference: the tracking paper §4.3, figure 4(c)
func TestPaperExperiment3(t *testing.T) {
	r := running(t, DefaultReplicas, ackerNames(6)...)
	for _, n := range []int{100_000, 200_000, 300_000} {
		if got := maxOverMean(r, springIDs(n, 1)); got > 1.10 {
			t.Errorf("%d roots on 6 ackers: max/mean %.3f, want <= 1.10", n, got)
		}
	}
}
