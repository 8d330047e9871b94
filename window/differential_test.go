package window

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
)

// TestHintPathOverflow: an update kept aside (headDups) plus updates
// through Add's hint path can take a head cell past 2^32-1 with no
// ErrOverflow: the hint path neither checks headAdded nor settles, so the
// merge in settle/closeHead wraps the uint32 count.
func TestHintPathOverflow(t *testing.T) {
	w, err := New(Config{Size: 20, Pane: 10}, Limits{MaxKeys: 10})
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("k")
	col, err := w.Column(key) // interned: its first Add sets the hint
	must(t, err)
	must(t, w.Add(1, key, 1))      // makes the cell, hint = 0
	must(t, w.AddIndex(1, col, 1)) // a repeat: waits in headDups
	if w.indexing || len(w.headDups) != 1 {
		t.Fatalf("setup: indexing %v, %d waiting", w.indexing, len(w.headDups))
	}
	// As if 2^32-4 more updates of k had come through the hint path (1 cell
	// + 1 dup + that many = headAdded): consistent with the invariant.
	w.headCells[0].count = math.MaxUint32 - 3
	w.headAdded = math.MaxUint32 - 2
	var refused bool
	n := uint64(math.MaxUint32 - 2) // true count so far: cell + dup
	for range 3 {
		if err := w.Add(2, key, 0); errors.Is(err, ErrOverflow) {
			refused = true
			break
		} else {
			must(t, err)
			n++
		}
	}
	got := w.Get(key)
	if got.Count != n || n > math.MaxUint32 && !refused {
		t.Fatalf("Get = %+v after %d accepted updates (refused: %v); want the count exact, or ErrOverflow past 2^32-1", got, n, refused)
	}
}

// TestSlidingAgainstModelMoves: a differential test against the model with many keys,
// few reads (repeats cross minDups), single-key reads mid-pane (a pane
// indexed mid-way), Import into the live window, Export round trips, and
// the window swapped for its moved copy.
func TestSlidingAgainstModelMoves(t *testing.T) {
	type tc struct {
		cfg  Config
		lim  Limits
		keys int
		big  bool
		swap bool
	}
	cases := []tc{
		{Config{Size: 40, Pane: 10}, Limits{MaxKeys: 1000}, 60, false, false},
		{Config{Size: 40, Pane: 10}, Limits{MaxKeys: 1000}, 60, true, false},
		{Config{Size: 30, Pane: 10}, Limits{MaxKeys: 20}, 60, false, false},
		{Config{Size: 30, Pane: 10}, Limits{MaxKeys: 20, MaxCells: 40}, 60, true, false},
		{Config{Size: 50, Pane: 10, MaxAhead: 20}, Limits{MaxKeys: 300}, 300, false, false},
		{Config{Size: 40, Pane: 10}, Limits{MaxKeys: 1 << 20, MaxCells: 1 << 30}, 80, false, true},
		{Config{Size: 20, Pane: 10}, Limits{MaxKeys: 1 << 20, MaxCells: 1 << 30}, 200, true, true},
		{Config{Size: 10, Pane: 10}, Limits{MaxKeys: 30}, 40, false, false},
		{Config{Size: 300, Pane: 100}, Limits{MaxKeys: 1 << 20}, 3000, false, false},
		{Config{Size: 300, Pane: 100}, Limits{MaxKeys: 500}, 3000, true, false},
		{Config{Size: 300, Pane: 100}, Limits{MaxKeys: 1 << 20, MaxCells: 1 << 30}, 3000, true, true},
	}
	for ci, c := range cases {
		for seed := range uint64(modelSeeds) {
			t.Run(fmt.Sprintf("%d/%d", ci, seed), func(t *testing.T) {
				modelRun(t, c.cfg, c.lim, c.keys, c.big, c.swap, seed)
			})
		}
	}
}

func modelRun(t *testing.T, cfg Config, lim Limits, nkeys int, big, swap bool, seed uint64) {
	rng, w, m, keys := againstModel(t, cfg, lim, nkeys, seed, 0xbeef)
	n, width := int64(cfg.Size/cfg.Pane), int64(cfg.Pane)
	hot := keys[:min(5, len(keys))]
	swapped := false
	value := func() int64 {
		v := rng.Int64N(201) - 100
		if big && rng.IntN(3) == 0 {
			v = int64(rng.Uint64()) >> rng.IntN(64)
		}
		return v
	}
	fullCheck := func(step int, what string, x *Sliding) {
		t.Helper()
		check := keys
		if len(keys) > 300 {
			check = append(slices.Clone(hot), keys[rng.IntN(len(keys)-300):][:300]...)
		}
		for _, k := range check {
			if g, wv := x.Get([]byte(k)), m.value(k); g != wv {
				t.Fatalf("step %d %s: Get(%s) = %+v, want %+v", step, what, k, g, wv)
			}
		}
		for _, by := range []Order{ByCount, BySum} {
			kk := 1 + rng.IntN(len(keys))
			if g, wv := x.TopK(nil, kk, by), m.topK(kk, by); !slices.Equal(g, wv) {
				t.Fatalf("step %d %s: TopK(%d,%d) = %v, want %v", step, what, kk, by, g, wv)
			}
		}
	}
	for step := range 3000 {
		head := int64(0)
		if m.started {
			head = m.head * width
		}
		var tm int64
		switch r := rng.IntN(100); {
		case r < 85:
			tm = head + rng.Int64N(width)
		case r < 93:
			tm = head - rng.Int64N((n+1)*width)
		case r < 98:
			tm = head + width + rng.Int64N(width)
		default:
			tm = head + rng.Int64N(3*n*width)
		}
		key := keys[rng.IntN(len(keys))]
		if rng.IntN(4) == 0 {
			key = hot[rng.IntN(len(hot))]
		}
		v := value()
		var got, want error
		var what string
		switch r := rng.IntN(100); {
		case r < 2:
			what = fmt.Sprintf("Advance(%d)", tm)
			w.Advance(tm)
			m.advance(tm)
		case r < 4:
			what = "Column " + key
			_, got = w.Column([]byte(key))
			want = m.intern(key)
		case r < 40:
			col, ok := w.Lookup([]byte(key))
			if !ok {
				continue
			}
			what = fmt.Sprintf("AddIndex(%d,%s,%d)", tm, key, v)
			got = w.AddIndex(tm, col, v)
			want = m.add(tm, key, v)
		case r < 45:
			cnt := uint64(1 + rng.IntN(3))
			if rng.IntN(10) == 0 {
				cnt = uint64(200 + rng.IntN(100))
			}
			what = fmt.Sprintf("Import(%d,%s,%d,%d)", tm, key, cnt, v)
			got = w.Import(Cell{Pane: tm, Key: key, Value: Value{Count: cnt, Sum: v}})
			want = m.addCount(tm, key, cnt, v)
		case r < 47:
			what = "Get " + key
			if g, wv := w.Get([]byte(key)), m.value(key); g != wv {
				t.Fatalf("step %d: Get(%s) = %+v, want %+v", step, key, g, wv)
			}
		default:
			what = fmt.Sprintf("Add(%d,%s,%d)", tm, key, v)
			if rng.IntN(4) == 0 {
				got = w.AddString(tm, key, v)
			} else {
				got = w.Add(tm, []byte(key), v)
			}
			want = m.add(tm, key, v)
		}
		if got != want {
			t.Fatalf("step %d %s = %v, want %v", step, what, got, want)
		}
		gs, ws := w.Stats(), m.wantStats()
		gs.Reclaimed = 0
		if swapped { // the copy merged each pane's in-order and late cells
			gs.Cells, ws.Cells = 0, 0
		}
		if gs != ws {
			t.Fatalf("step %d %s: Stats = %+v,\n want %+v", step, what, gs, ws)
		}
		if rng.IntN(60) == 0 {
			fullCheck(step, what, w)
		}
		if rng.IntN(150) == 0 {
			// Export while repeats may wait aside; the copy reads alike.
			waiting := len(w.headDups)
			cc := cfg
			cc.MaxAhead = 0 // Export skips empty panes: a copy may jump further (as on main)
			to, err := New(cc, Limits{MaxKeys: 1 << 20, MaxCells: 1 << 30})
			if err != nil {
				t.Fatal(err)
			}
			var sum Value
			w.Export(func(c Cell) bool {
				if err := to.Import(c); err != nil {
					t.Fatalf("step %d import %+v: %v", step, c, err)
				}
				sum.Count += c.Count
				sum.Sum += c.Sum
				return true
			})
			var want Value
			for _, e := range m.live() {
				want.Count += e.Count
				want.Sum += e.Sum
			}
			if sum != want {
				t.Fatalf("step %d (waiting %d): exported %+v, want %+v", step, waiting, sum, want)
			}
			fullCheck(step, fmt.Sprintf("moved copy (waiting %d)", waiting), to)
			if swap && rng.IntN(2) == 0 {
				to.Advance(m.head * width) // Export does not carry empty newest panes
				w = to
				swapped = true
				m.dict = map[string]bool{}
				for k := range m.live() {
					m.dict[k] = true
				}
				// Stats counters start over in the copy.
				s := to.Stats()
				s.Keys, s.Live, s.Cells = 0, 0, 0
				m.stats = s
			}
		}
	}
	fullCheck(-1, "end", w)
}

// modelSeeds is how many seeded runs each case of TestSlidingAgainstModelMoves takes.
const modelSeeds = 3
