package window

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg   Config
		field string // named in the error; "" for a valid config
	}{
		{Config{Size: time.Hour, Pane: time.Second}, ""},
		{Config{Size: time.Hour, Pane: time.Hour, MaxAhead: time.Hour}, ""},
		{Config{Size: 3, Pane: 1, MaxAhead: 1}, ""},
		{Config{Size: time.Hour}, "Config.Pane"},
		{Config{Size: time.Hour, Pane: -time.Second}, "Config.Pane"},
		{Config{Pane: time.Second}, "Config.Size"},
		{Config{Size: -time.Hour, Pane: time.Second}, "Config.Size"},
		{Config{Size: 90 * time.Second, Pane: time.Minute}, "multiple of Config.Pane"},
		{Config{Size: MaxPanes + 1, Pane: 1}, "panes"},
		{Config{Size: time.Hour, Pane: time.Second, MaxAhead: -1}, "Config.MaxAhead"},
		{Config{Size: time.Hour, Pane: time.Second, MaxAhead: time.Millisecond}, "Config.MaxAhead"},
	} {
		err := tc.cfg.Validate()
		if (err == nil) != (tc.field == "") || err != nil && !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%+v: Validate() = %v, want an error naming %q", tc.cfg, err, tc.field)
		}
		if _, nerr := New(tc.cfg, Limits{MaxKeys: 1}); (nerr == nil) != (err == nil) {
			t.Errorf("%+v: New() = %v, Validate() = %v", tc.cfg, nerr, err)
		}
	}
}

func TestLimitsValidate(t *testing.T) {
	cfg := Config{Size: 4, Pane: 1}
	for _, tc := range []struct {
		lim   Limits
		field string
	}{
		{Limits{MaxKeys: 1}, ""},
		{Limits{MaxKeys: MaxKeys, MaxCells: 10}, ""},
		{Limits{}, "Limits.MaxKeys"},
		{Limits{MaxKeys: MaxKeys + 1}, "Limits.MaxKeys"},
		{Limits{MaxKeys: 1, MaxCells: -1}, "Limits.MaxCells"},
	} {
		_, err := New(cfg, tc.lim)
		if (err == nil) != (tc.field == "") || err != nil && !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%+v: New() = %v, want an error naming %q", tc.lim, err, tc.field)
		}
	}
}

// op is one step of a scripted scenario.
type op struct {
	do    string // add, advance
	t     int64
	key   string
	value int64
	err   error
}

// TestSlidingScenarios walks the clock through the cases one at a time,
// with a window of 4 panes of 10 ns: [t0, t0+40).
func TestSlidingScenarios(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		lim  Limits
		ops  []op
		want map[string]Value
	}{
		{
			name: "same pane",
			ops:  []op{{do: "add", t: 100, key: "a", value: 2}, {do: "add", t: 109, key: "a", value: 3}},
			want: map[string]Value{"a": {2, 5}},
		},
		{
			name: "late but inside the window goes to its own pane",
			ops: []op{
				{do: "add", t: 100, key: "a", value: 1},
				{do: "add", t: 135, key: "a", value: 1}, // window [100,140)
				{do: "add", t: 100, key: "a", value: 10},
				{do: "advance", t: 140}, // [110,150): the two at 100 expire
			},
			want: map[string]Value{"a": {1, 1}},
		},
		{
			name: "older than the window's start is rejected",
			ops: []op{
				{do: "add", t: 140, key: "a", value: 1}, // window [110,150)
				{do: "add", t: 109, key: "a", value: 1, err: ErrLate},
				{do: "add", t: 110, key: "a", value: 4},
			},
			want: map[string]Value{"a": {2, 5}},
		},
		{
			name: "pane boundaries are half open",
			ops: []op{
				{do: "add", t: 99, key: "a", value: 1},  // pane 9
				{do: "add", t: 100, key: "a", value: 2}, // pane 10
				{do: "advance", t: 139},                 // pane 13: [100,140)
			},
			want: map[string]Value{"a": {1, 2}},
		},
		{
			name: "far future empties the window",
			ops: []op{
				{do: "add", t: 100, key: "a", value: 1},
				{do: "add", t: 1e12, key: "b", value: 1},
				{do: "add", t: 100, key: "a", value: 1, err: ErrLate},
			},
			want: map[string]Value{"a": {}, "b": {1, 1}},
		},
		{
			name: "MaxAhead refuses a jump, Advance is not bounded",
			cfg:  Config{Size: 40, Pane: 10, MaxAhead: 20},
			ops: []op{
				{do: "add", t: 100, key: "a", value: 1},
				{do: "add", t: 130, key: "a", value: 1, err: ErrAhead}, // 3 panes ahead
				{do: "add", t: 129, key: "a", value: 1},                // 2
				{do: "advance", t: 1000},
			},
			want: map[string]Value{"a": {}},
		},
		{
			name: "negative times floor toward minus infinity",
			ops: []op{
				{do: "add", t: -1, key: "a", value: 1},  // pane -1: window [-40, 0)
				{do: "add", t: -40, key: "a", value: 1}, // pane -4
				{do: "add", t: -41, key: "a", value: 1, err: ErrLate},
				{do: "add", t: -31, key: "a", value: 1},
			},
			want: map[string]Value{"a": {3, 3}},
		},
		{
			name: "a full dictionary takes the column of a zero-count key",
			lim:  Limits{MaxKeys: 2},
			ops: []op{
				{do: "add", t: 100, key: "a", value: 1},
				{do: "add", t: 100, key: "b", value: 1},
				{do: "add", t: 100, key: "c", value: 1, err: ErrKeysFull},
				{do: "add", t: 130, key: "a", value: 1},
				{do: "add", t: 140, key: "c", value: 1}, // b's count is now 0
				{do: "add", t: 140, key: "d", value: 1, err: ErrKeysFull},
			},
			want: map[string]Value{"a": {1, 1}, "b": {}, "c": {1, 1}, "d": {}},
		},
		{
			name: "MaxCells bounds (key, pane) cells, not updates",
			lim:  Limits{MaxKeys: 10, MaxCells: 2},
			ops: []op{
				{do: "add", t: 100, key: "a", value: 1},
				{do: "add", t: 110, key: "a", value: 1},
				{do: "add", t: 111, key: "a", value: 1},
				{do: "add", t: 111, key: "b", value: 1, err: ErrCellsFull},
				{do: "add", t: 105, key: "a", value: 1, err: ErrCellsFull}, // a second, late cell in pane 10
				{do: "add", t: 120, key: "a", value: 1, err: ErrCellsFull},
				{do: "advance", t: 140}, // pane 10 expires
				{do: "add", t: 140, key: "b", value: 7},
			},
			want: map[string]Value{"a": {2, 2}, "b": {1, 7}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cfg == (Config{}) {
				tc.cfg = Config{Size: 40, Pane: 10}
			}
			if tc.lim == (Limits{}) {
				tc.lim = Limits{MaxKeys: 10}
			}
			w, err := New(tc.cfg, tc.lim)
			if err != nil {
				t.Fatal(err)
			}
			for i, o := range tc.ops {
				var err error
				switch o.do {
				case "add":
					err = w.Add(o.t, []byte(o.key), o.value)
				case "advance":
					w.Advance(o.t)
				}
				if !errors.Is(err, o.err) {
					t.Fatalf("op %d %+v: err = %v, want %v", i, o, err, o.err)
				}
			}
			for k, v := range tc.want {
				if got := w.Get([]byte(k)); got != v {
					t.Errorf("Get(%q) = %+v, want %+v", k, got, v)
				}
			}
		})
	}
}

// TestSlidingExtremeTimes runs the clock at both ends of int64 with 1 ns
// panes and with panes that do not divide 2^63.
func TestSlidingExtremeTimes(t *testing.T) {
	const lo, hi = math.MinInt64, math.MaxInt64
	for _, tc := range []struct {
		pane             int64
		ops              []op
		start, end       int64
		wantCount        uint64
		wantLate, wantOK bool
	}{
		{pane: 1, ops: []op{{t: lo}, {t: lo + 3}}, start: lo, end: lo + 4, wantCount: 2},
		{pane: 1, ops: []op{{t: lo}, {t: hi}, {t: lo, err: ErrLate}, {t: hi - 3}, {t: hi - 4, err: ErrLate}},
			start: hi - 3, end: hi, wantCount: 2},
		{pane: 7, ops: []op{{t: hi}, {t: hi - 7*3}, {t: lo, err: ErrLate}}, start: (hi/7 - 3) * 7, end: hi, wantCount: 2},
		{pane: 7, ops: []op{{t: lo}, {t: lo + 1}}, start: lo, end: (lo/7 + 1) * 7, wantCount: 2},
		{pane: 7, ops: []op{{t: 0}, {t: hi}, {t: lo, err: ErrLate}, {t: 0, err: ErrLate}}, start: (hi/7 - 3) * 7, end: hi, wantCount: 1},
	} {
		w, err := New(Config{Size: time.Duration(4 * tc.pane), Pane: time.Duration(tc.pane)}, Limits{MaxKeys: 1})
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range tc.ops {
			if err := w.Add(o.t, []byte("k"), 1); !errors.Is(err, o.err) {
				t.Fatalf("pane %d op %d: Add(%d) = %v, want %v", tc.pane, i, o.t, err, o.err)
			}
		}
		start, end, ok := w.Bounds()
		if !ok || start != tc.start || end != tc.end {
			t.Errorf("pane %d %v: Bounds() = %d, %d, %v, want %d, %d", tc.pane, tc.ops, start, end, ok, tc.start, tc.end)
		}
		if got := w.Get([]byte("k")).Count; got != tc.wantCount {
			t.Errorf("pane %d %v: count %d, want %d", tc.pane, tc.ops, got, tc.wantCount)
		}
	}
}

func TestSlidingEmpty(t *testing.T) {
	w, err := New(Config{Size: time.Minute, Pane: time.Second}, Limits{MaxKeys: 4})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := w.Bounds(); ok {
		t.Error("Bounds ok before any update")
	}
	if v := w.Get([]byte("x")); v != (Value{}) {
		t.Errorf("Get on empty = %+v", v)
	}
	if got := w.TopK(nil, 3, ByCount); len(got) != 0 {
		t.Errorf("TopK on empty = %v", got)
	}
	if err := w.AddIndex(0, 0, 1); !errors.Is(err, ErrColumn) {
		t.Errorf("AddIndex unknown column = %v, want ErrColumn", err)
	}
	if _, ok := w.Key(0); ok {
		t.Error("Key(0) ok on empty dictionary")
	}
	if v := w.GetIndex(7); v != (Value{}) {
		t.Errorf("GetIndex(7) = %+v", v)
	}
	w.Advance(5 * int64(time.Second))
	if start, end, ok := w.Bounds(); !ok || start != -54*int64(time.Second) || end != 6*int64(time.Second) {
		t.Errorf("Bounds after Advance(5s) = %d, %d, %v", start, end, ok)
	}
	if got := w.TopK(nil, 1, Order(9)); got != nil {
		t.Errorf("TopK with an unknown order = %v", got)
	}
}

// TestSlidingOverflow fills a key's cells to 2^32-1 by hand: one more
// update is refused and counted, in the newest pane and through a late map.
// The full cells then close and expire like any other, and leave the
// window whole.
func TestSlidingOverflow(t *testing.T) {
	w, err := New(Config{Size: 20, Pane: 10}, Limits{MaxKeys: 2})
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("k")
	must(t, w.Add(5, key, 1))
	must(t, w.Add(15, key, 1)) // pane 0 closes
	must(t, w.Add(6, key, 1))  // a second cell in pane 0, found through its late map
	for s := range w.panes {   // unpacked, so that they hold 2^32-1
		p := &w.panes[s]
		for _, x := range p.packed {
			p.cells = append(p.cells, unpackCell(x))
		}
		p.packed = nil
		for i := range p.cells {
			p.cells[i].count = math.MaxUint32
		}
	}
	for i := range w.headCells {
		w.headCells[i].count = math.MaxUint32
	}
	w.totals[0].count = 2 * math.MaxUint32 // pane 0's two cells; pane 1's is the newest
	before := w.Get(key)
	for _, at := range []int64{16, 7} {
		if err := w.Add(at, key, 1); !errors.Is(err, ErrOverflow) {
			t.Errorf("Add(%d) at 2^32-1 = %v, want ErrOverflow", at, err)
		}
	}
	if got := w.Get(key); got != before || w.Stats().Overflow != 2 {
		t.Errorf("after overflow: %+v (was %+v), Stats.Overflow %d", got, before, w.Stats().Overflow)
	}
	must(t, w.Add(25, key, 1)) // pane 1 closes, pane 0 expires
	if got, want := w.Get(key).Count, uint64(math.MaxUint32+1); got != want {
		t.Errorf("after pane 0 expired: count %d, want %d", got, want)
	}
	must(t, w.Add(18, key, 1)) // late into pane 1: a cell of its own
	w.Advance(45)              // both expire
	if got, s := w.Get(key), w.Stats(); got != (Value{}) || s.Live != 0 || s.Cells != 0 {
		t.Errorf("after expiry: %+v, Stats %+v", got, s)
	}
}

// TestSlidingReclaimedHead: a key counted only in the newest pane keeps its
// column; a column reclaimed for a new key in the newest pane starts empty
// there, and the old key's cells, expired, never reach the new one.
func TestSlidingReclaimedHead(t *testing.T) {
	one, err := New(Config{Size: 20, Pane: 10}, Limits{MaxKeys: 1})
	if err != nil {
		t.Fatal(err)
	}
	must(t, one.Add(1, []byte("x"), 1))
	if _, err := one.Column([]byte("y")); !errors.Is(err, ErrKeysFull) {
		t.Errorf("Column(y) while x counts in the newest pane = %v, want ErrKeysFull", err)
	}
	w, err := New(Config{Size: 20, Pane: 10}, Limits{MaxKeys: 2})
	if err != nil {
		t.Fatal(err)
	}
	must(t, w.Add(1, []byte("a"), 5))
	must(t, w.Add(2, []byte("a"), 5))
	must(t, w.Add(3, []byte("b"), 7))
	must(t, w.Add(12, []byte("b"), 7)) // pane 0 closes
	if _, err := w.Column([]byte("c")); !errors.Is(err, ErrKeysFull) {
		t.Fatalf("Column(c) with a and b live = %v", err)
	}
	must(t, w.Add(21, []byte("b"), 7)) // pane 0 expires: a is zero, b is live
	must(t, w.Add(22, []byte("c"), 1)) // takes a's column, in the newest pane
	colA := uint32(0)
	if key, _ := w.Key(colA); key != "c" {
		t.Fatalf("column 0 holds %q, want c", key)
	}
	for _, want := range []struct {
		key string
		v   Value
	}{{"a", Value{}}, {"b", Value{2, 14}}, {"c", Value{1, 1}}} {
		if got := w.Get([]byte(want.key)); got != want.v {
			t.Errorf("Get(%s) = %+v, want %+v", want.key, got, want.v)
		}
	}
	if s := w.Stats(); s.Live != 2 || s.Cells != 3 || s.Reclaimed != 1 {
		t.Errorf("Stats = %+v, want 2 live, 3 cells, 1 reclaimed", s)
	}
	w.Advance(30) // pane 2 closes; pane 1 (b's) expires
	w.Advance(40) // pane 2 (b's and c's) expires
	if s := w.Stats(); s.Live != 0 || s.Cells != 0 || w.Get([]byte("c")) != (Value{}) {
		t.Errorf("after expiry: Stats = %+v, c = %+v", s, w.Get([]byte("c")))
	}
}

// TestSlidingColumns: Column and AddIndex see the same key as Add, and a
// reclaimed column answers Key with its new key.
func TestSlidingColumns(t *testing.T) {
	w, err := New(Config{Size: 20, Pane: 10}, Limits{MaxKeys: 1})
	if err != nil {
		t.Fatal(err)
	}
	col, err := w.Column([]byte("a"))
	must(t, err)
	must(t, w.AddIndex(0, col, 3))
	must(t, w.Add(1, []byte("a"), 4))
	if v := w.Get([]byte("a")); v != (Value{2, 7}) {
		t.Errorf("Get(a) = %+v", v)
	}
	if _, err := w.Column([]byte("b")); !errors.Is(err, ErrKeysFull) {
		t.Errorf("Column(b) with a full dictionary = %v", err)
	}
	w.Advance(20)
	colB, err := w.Column([]byte("b"))
	must(t, err)
	if key, _ := w.Key(colB); colB != col || key != "b" {
		t.Errorf("b took column %d (%q), want a's %d", colB, key, col)
	}
	if _, ok := w.Lookup([]byte("a")); ok {
		t.Error("a still in the dictionary after its column was reclaimed")
	}
	if s := w.Stats(); s.Reclaimed != 1 || s.Keys != 1 {
		t.Errorf("Stats = %+v", s)
	}
}

// TestSlidingAgainstModel drives the window and the brute-force model with
// the same random updates — in order, late, very late, at pane boundaries,
// far in the future — and advances, and compares every read after every
// step: each key's value, TopK both ways, the counters.
func TestSlidingAgainstModel(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		lim  Limits
		keys int
		base int64
		big  bool // values of any size, most sums too big to pack
		few  bool // read the window one step in 8: updates pile up in headDups
	}{
		{Config{Size: 40, Pane: 10}, Limits{MaxKeys: 100}, 6, 0, false, false},
		{Config{Size: 10, Pane: 10}, Limits{MaxKeys: 100}, 4, -1000, false, false},
		{Config{Size: 21, Pane: 3, MaxAhead: 9}, Limits{MaxKeys: 100}, 8, -50, false, false},
		{Config{Size: 7, Pane: 1}, Limits{MaxKeys: 3}, 6, 1 << 40, false, false},
		{Config{Size: 50, Pane: 10}, Limits{MaxKeys: 5, MaxCells: 7}, 8, 17, false, false},
		{Config{Size: 60, Pane: 5, MaxAhead: 5}, Limits{MaxKeys: 4, MaxCells: 20}, 10, -3, false, false},
		{Config{Size: 40, Pane: 10}, Limits{MaxKeys: 100}, 6, 0, true, false},
		{Config{Size: 30, Pane: 3}, Limits{MaxKeys: 3, MaxCells: 12}, 5, 7, true, false},
		{Config{Size: 40, Pane: 10}, Limits{MaxKeys: 100}, 6, 0, false, true},
		{Config{Size: 50, Pane: 10}, Limits{MaxKeys: 5, MaxCells: 7}, 8, 17, true, true},
		{Config{Size: 7, Pane: 1}, Limits{MaxKeys: 3}, 6, 1 << 40, false, true},
	} {
		for seed := range uint64(6) {
			t.Run(fmt.Sprintf("%+v/%+v/big=%v/few=%v/seed=%d", tc.cfg, tc.lim, tc.big, tc.few, seed), func(t *testing.T) {
				checkAgainstModel(t, tc.cfg, tc.lim, tc.keys, tc.base, tc.big, tc.few, seed)
			})
		}
	}
}

// againstModel starts a window and its model alike, with nkeys keys
// named k0, k1, …, and a generator seeded by seed and stream.
func againstModel(t *testing.T, cfg Config, lim Limits, nkeys int, seed, stream uint64) (*rand.Rand, *Sliding, *model, []string) {
	t.Helper()
	w, err := New(cfg, lim)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	return rand.New(rand.NewPCG(seed, stream)), w, newModel(cfg, lim, int64(cfg.Size/cfg.Pane)), keys
}

func checkAgainstModel(t *testing.T, cfg Config, lim Limits, nkeys int, base int64, big, few bool, seed uint64) {
	t.Helper()
	rng, w, m, keys := againstModel(t, cfg, lim, nkeys, seed, 0x5eed)
	n, width := int64(cfg.Size/cfg.Pane), int64(cfg.Pane)
	for step := range 600 {
		head := base
		if m.started {
			head = m.head * width
		}
		var tm int64
		switch r := rng.IntN(20); {
		case r < 8: // the newest pane
			tm = head + rng.Int64N(width)
		case r < 12: // late, inside the window or just outside
			tm = head - rng.Int64N((n+1)*width)
		case r < 14: // on a pane boundary, or one before it
			tm = (m.pane(head) - rng.Int64N(n+1) + rng.Int64N(3)) * width
			if rng.IntN(2) == 0 {
				tm--
			}
		case r < 18: // a little ahead
			tm = head + width + rng.Int64N(2*width)
		case r < 19: // far ahead
			tm = head + rng.Int64N(3*n*width) + n*width
		default: // very late
			tm = head - (n+rng.Int64N(5))*width - rng.Int64N(width)
		}
		key := keys[rng.IntN(len(keys))]
		value := rng.Int64N(201) - 100
		if big && rng.IntN(2) == 0 { // from 2^-1 to 2^62, either sign
			value = int64(rng.Uint64()) >> rng.IntN(64)
		}
		var got, want error
		var what string
		switch r := rng.IntN(40); {
		case r == 0:
			what = fmt.Sprintf("Advance(%d)", tm)
			w.Advance(tm)
			m.advance(tm)
		case r == 1:
			what = fmt.Sprintf("Column(%s)", key)
			_, got = w.Column([]byte(key))
			want = m.intern(key)
		case r == 2: // changes nothing, known keys or not
			what = fmt.Sprintf("Warm(%s, unknown)", key)
			w.Warm([]string{key, "unknown", key})
		case r < 10:
			what = fmt.Sprintf("AddIndex(%d, %s, %d)", tm, key, value)
			col, ok := w.Lookup([]byte(key))
			if !ok {
				continue
			}
			got = w.AddIndex(tm, col, value)
			want = m.add(tm, key, value)
		default:
			what = fmt.Sprintf("Add(%d, %s, %d)", tm, key, value)
			got = w.Add(tm, []byte(key), value)
			want = m.add(tm, key, value)
		}
		if got != want {
			t.Fatalf("step %d %s = %v, want %v", step, what, got, want)
		}
		if few && rng.IntN(8) != 0 {
			gs, ws := w.Stats(), m.wantStats()
			if gs.Reclaimed = 0; gs != ws {
				t.Fatalf("step %d %s: Stats = %+v,\n want %+v", step, what, gs, ws)
			}
			continue
		}
		for _, k := range keys {
			if g, wv := w.Get([]byte(k)), m.value(k); g != wv {
				t.Fatalf("step %d %s: Get(%s) = %+v, want %+v", step, what, k, g, wv)
			}
		}
		gs, ws := w.Stats(), m.wantStats()
		gs.Reclaimed = 0 // which zero-count key loses its column is not modelled
		if gs != ws {
			t.Fatalf("step %d %s: Stats = %+v,\n want %+v", step, what, gs, ws)
		}
		if m.started {
			start, end, _ := w.Bounds()
			if start != (m.head-n+1)*width || end != (m.head+1)*width {
				t.Fatalf("step %d: Bounds = [%d, %d), model head pane %d", step, start, end, m.head)
			}
		}
		k := 1 + rng.IntN(len(keys)+1)
		for _, by := range []Order{ByCount, BySum} {
			if g, wv := w.TopK(nil, k, by), m.topK(k, by); !slices.Equal(g, wv) {
				t.Fatalf("step %d %s: TopK(%d, %d) = %v, want %v", step, what, k, by, g, wv)
			}
		}
	}
}

// TestSlidingTopKTies: equal values rank by key, whatever the columns.
func TestSlidingTopKTies(t *testing.T) {
	w, err := New(Config{Size: 10, Pane: 10}, Limits{MaxKeys: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"d", "b", "c", "a", "e"} {
		must(t, w.Add(0, []byte(k), 1))
	}
	must(t, w.Add(0, []byte("e"), 1))
	got := w.TopK(nil, 3, ByCount)
	want := []Entry{{"e", Value{2, 2}}, {"a", Value{1, 1}}, {"b", Value{1, 1}}}
	if !slices.Equal(got, want) {
		t.Errorf("TopK = %v, want %v", got, want)
	}
}

// TestSlidingSteadyStateAllocs: once keys are known and panes have their
// buffers, Add, AddIndex and Advance allocate nothing.
func TestSlidingSteadyStateAllocs(t *testing.T) {
	w, err := New(Config{Size: 100, Pane: 10}, Limits{MaxKeys: 64})
	if err != nil {
		t.Fatal(err)
	}
	keys, skeys := make([][]byte, 64), make([]string, 64)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key-%d", i)
		skeys[i] = string(keys[i])
	}
	var now int64
	run := func() {
		w.Warm(skeys)
		for i := range 1000 {
			now++
			_ = w.Add(now, keys[i%len(keys)], 1)
			_ = w.AddIndex(now, uint32(i%len(keys)), 1)
		}
	}
	run() // warm: dictionary and pane buffers
	run()
	if a := testing.AllocsPerRun(10, run); a != 0 {
		t.Errorf("%v allocations per 1000 updates in steady state", a)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestAddString: a key given as a string counts as the same key given as
// bytes, and the window keeps a copy of it, not the caller's string.
func TestAddString(t *testing.T) {
	w, err := New(Config{Size: 10 * time.Second, Pane: time.Second}, Limits{MaxKeys: 4})
	if err != nil {
		t.Fatal(err)
	}
	buf := []byte("alpha")
	key := string(buf)
	for i, add := range []func() error{
		func() error { return w.AddString(1e9, key, 2) },
		func() error { return w.Add(1e9, []byte("alpha"), 3) },
		func() error { return w.AddString(2e9, "", 1) },
	} {
		if err := add(); err != nil {
			t.Fatalf("add %d: %v", i, err)
		}
	}
	if got := w.Get([]byte("alpha")); got.Count != 2 || got.Sum != 5 {
		t.Fatalf("alpha: %+v, want count 2 sum 5", got)
	}
	if got := w.Get(nil); got.Count != 1 {
		t.Fatalf("the empty key: %+v", got)
	}
}

// TestPackCell: a cell packs into 8 bytes while its count is 1..255 and
// its sum in [-2^23, 2^23), and comes back the same; others do not pack.
func TestPackCell(t *testing.T) {
	for _, e := range []cell{
		{col: 0, count: 1, sum: 1},
		{col: MaxKeys - 1, count: 255, sum: 1<<23 - 1},
		{col: 1<<32 - 1, count: 1, sum: -1 << 23},
		{col: 7, count: 200, sum: -1},
		{col: 7, count: 3, sum: 0},
	} {
		x, ok := packCell(e)
		if !ok || unpackCell(x) != e {
			t.Errorf("packCell(%+v) = %#x, %v: unpacks to %+v", e, x, ok, unpackCell(x))
		}
	}
	for _, e := range []cell{
		{col: 1, count: 256, sum: 256},
		{col: 1, count: 1, sum: 1 << 23},
		{col: 1, count: 1, sum: -1<<23 - 1},
		{col: 1, count: math.MaxUint32, sum: math.MinInt64},
	} {
		if x, ok := packCell(e); ok {
			t.Errorf("packCell(%+v) = %#x, packed", e, x)
		}
	}
}

// TestSlidingPackedCells: cells on both sides of the packing limits close
// (packed or kept whole), take late updates, export and expire exactly.
func TestSlidingPackedCells(t *testing.T) {
	w, err := New(Config{Size: 20, Pane: 10}, Limits{MaxKeys: 100})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		count int
		sum   int64
	}{
		{1, 1}, {255, 255}, {256, 256}, {1, 1<<23 - 1}, {1, 1 << 23},
		{2, -1 << 23}, {2, -1<<23 - 1}, {3, math.MaxInt64}, {255, math.MinInt64},
	}
	for i, c := range cases {
		key := []byte(fmt.Sprint("k", i))
		for range c.count - 1 {
			must(t, w.Add(1, key, 0))
		}
		must(t, w.Add(2, key, c.sum))
	}
	check := func(when string, late int64) {
		t.Helper()
		for i, c := range cases {
			want := Value{Count: uint64(c.count), Sum: c.sum}
			if late != 0 {
				want.Count++
				want.Sum += late
			}
			if got := w.Get([]byte(fmt.Sprint("k", i))); got != want {
				t.Errorf("%s: Get(k%d) = %+v, want %+v", when, i, got, want)
			}
		}
	}
	check("in the newest pane", 0)
	w.Advance(10) // pane 0 closes
	p := &w.panes[w.clock.back(1)]
	if len(p.packed) != 4 || len(p.cells) != 5 || w.Stats().Cells != 9 {
		t.Errorf("closed pane: %d packed, %d whole, Stats.Cells %d; want 4, 5, 9", len(p.packed), len(p.cells), w.Stats().Cells)
	}
	check("closed", 0)
	for i := range cases {
		must(t, w.Add(3, []byte(fmt.Sprint("k", i)), 5)) // late: a cell of its own
	}
	check("closed, late", 5)
	var exported int
	got := map[string]Value{}
	w.Export(func(c Cell) bool {
		exported++
		v := got[c.Key]
		got[c.Key] = Value{Count: v.Count + c.Count, Sum: v.Sum + c.Sum}
		return true
	})
	if exported != 18 {
		t.Errorf("Export gave %d cells, want 18", exported)
	}
	for i, c := range cases {
		if want := (Value{Count: uint64(c.count) + 1, Sum: c.sum + 5}); got[fmt.Sprint("k", i)] != want {
			t.Errorf("exported k%d = %+v, want %+v", i, got[fmt.Sprint("k", i)], want)
		}
	}
	w.Advance(20) // pane 0 expires
	if s := w.Stats(); s.Live != 0 || s.Cells != 0 || len(p.packed)+len(p.cells) != 0 {
		t.Errorf("after expiry: Stats %+v, pane %d packed, %d whole", s, len(p.packed), len(p.cells))
	}
	for i := range cases {
		if got := w.Get([]byte(fmt.Sprint("k", i))); got != (Value{}) {
			t.Errorf("expired: Get(k%d) = %+v", i, got)
		}
	}
}

// TestSlidingHeadDups: repeated columns of the newest pane wait in
// headDups until a read or until they outnumber a quarter of the cells (and minDups),
// and the pane is indexed from then on; or they wait until the pane
// closes, and are kept in it as cells of their own, which Stats.Cells and
// MaxCells do not count. Each way the counts come out exact. Past 2^32-2 updates in the
// pane they go straight to their cells, which refuse the one that would
// overflow.
func TestSlidingHeadDups(t *testing.T) {
	w, err := New(Config{Size: 30, Pane: 10}, Limits{MaxKeys: 10, MaxCells: 9})
	if err != nil {
		t.Fatal(err)
	}
	var cols [4]uint32
	for i := range cols {
		cols[i], err = w.Column([]byte(fmt.Sprint("k", i)))
		must(t, err)
	}
	var want [4]Value
	add := func(at int64, k int, v int64) {
		t.Helper()
		if k%2 == 0 {
			must(t, w.AddIndex(at, cols[k], v))
		} else {
			must(t, w.Add(at, []byte(fmt.Sprint("k", k)), v))
		}
		want[k].Count++
		want[k].Sum += v
	}
	check := func(when string) {
		t.Helper()
		for k := range cols {
			if got := w.GetIndex(cols[k]); got != want[k] {
				t.Errorf("%s: k%d = %+v, want %+v", when, k, got, want[k])
			}
		}
	}
	for i := range 3000 { // more repeats than minDups: settled on the way
		add(1, i%3, int64(i))
		if i == minDups && (w.indexing || len(w.headDups) == 0) { // k1's go to its cell by Add's hint
			t.Errorf("%d updates of 3 columns: indexing %v, %d waiting", i+1, w.indexing, len(w.headDups))
		}
	}
	if !w.indexing || len(w.headDups) != 0 || w.indexed != 3 {
		t.Errorf("after 3000 updates: indexing %v, %d waiting, %d indexed", w.indexing, len(w.headDups), w.indexed)
	}
	add(2, 3, 1<<40) // a new cell, indexed at once
	add(3, 3, 1)
	if w.indexed != 4 || len(w.headDups) != 0 {
		t.Errorf("indexing: %d indexed, %d waiting", w.indexed, len(w.headDups))
	}
	w.Advance(10) // pane 0 closes
	check("pane 0 closed")
	pane0 := want
	for i := range 20 { // pane 1: repeats wait, unread, until it closes
		add(11, i%4, int64(i)<<30)
	}
	if w.indexing || len(w.headDups) != 8 { // k0's and k2's: k1 and k3 go to their cells by hint
		t.Fatalf("pane 1: indexing %v, %d waiting; want 8 waiting", w.indexing, len(w.headDups))
	}
	w.Advance(20) // pane 1 closes with them
	if s := w.Stats(); s.Cells != 8 || s.Live != 4 || w.headMark[0] != 0 {
		t.Errorf("pane 1 closed: Stats = %+v, marks %#x; want 8 cells, 4 live, no marks", s, w.headMark[0])
	}
	if p := &w.panes[w.clock.back(1)]; p.repeats != 8 || len(p.packed)+len(p.cells) != 12 {
		t.Errorf("pane 1 closed: %d cells, %d of them repeats; want 12, 8", len(p.packed)+len(p.cells), p.repeats)
	}
	check("pane 1 closed")
	// Pane 2: cells full; a repeat needs no cell, and settles the pane.
	must(t, w.Add(21, []byte("k4"), 1))
	if err := w.Add(21, []byte("k5"), 1); !errors.Is(err, ErrCellsFull) {
		t.Errorf("a new cell with MaxCells in use = %v, want ErrCellsFull", err)
	}
	must(t, w.Add(22, []byte("k4"), 1))
	if got := w.Get([]byte("k4")); got != (Value{2, 2}) || !w.indexing {
		t.Errorf("k4 = %+v, indexing %v; want 2, 2 and indexing", got, w.indexing)
	}
	// Pane 3: pane 0 expires; the updates to 2^32-1.
	w.Advance(30)
	for k := range want {
		want[k].Count -= pane0[k].Count
		want[k].Sum -= pane0[k].Sum
	}
	check("pane 0 expired")
	add(31, 0, 5)
	add(32, 0, 6)
	w.headAdded = math.MaxUint32 - 1
	add(33, 2, 7) // the last that may wait
	add(33, 2, 8) // settles, then to its cell
	if !w.indexing {
		t.Error("not indexing after 2^32-1 updates")
	}
	check("pane 3, 2^32-1 updates")
	i, _, ok := w.head.find(cols[0], w.headCells)
	if !ok {
		t.Fatal("k0 not indexed")
	}
	want[0].Count += math.MaxUint32 - 1 - uint64(w.headCells[i].count)
	w.headCells[i].count = math.MaxUint32 - 1
	add(34, 0, 1)
	if err := w.AddIndex(34, cols[0], 1); !errors.Is(err, ErrOverflow) {
		t.Errorf("AddIndex at 2^32-1 = %v, want ErrOverflow", err)
	}
	check("pane 3, overflow refused")
	w.Advance(70)
	if s := w.Stats(); s.Cells != 0 || s.Live != 0 || w.headAdded != 0 || w.headMark[0] != 0 {
		t.Errorf("after expiry: Stats = %+v, head count %d, marks %#x", s, w.headAdded, w.headMark[0])
	}
}

// TestSlidingHeadMarksSparse: a pane with few cells for its columns
// clears its cells' marks one by one as it closes, repeats waiting or
// not; one with many clears them all. Either way no mark is left, and the
// window reads as a plain count of the updates.
func TestSlidingHeadMarksSparse(t *testing.T) {
	const keys = 5000
	w, err := New(Config{Size: 40, Pane: 10}, Limits{MaxKeys: keys})
	if err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		if _, err := w.Column([]byte(fmt.Sprint("k", i))); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(9, 9))
	type upd struct {
		t   int64
		col uint32
		v   int64
	}
	var all []upd
	for p := range int64(12) {
		cells := []int{3, 2, 400, 1}[p%4] // 16 × cells against 157 words of marks
		for range 3 * cells {
			u := upd{p*10 + rng.Int64N(10), uint32(rng.IntN(cells)) * 7, rng.Int64N(1000)}
			must(t, w.AddIndex(u.t, u.col, u.v))
			all = append(all, u)
		}
		w.Advance((p + 1) * 10) // closes pane p unread
		for i, m := range w.headMark {
			if m != 0 {
				t.Fatalf("after pane %d closed: mark word %d = %#x", p, i, m)
			}
		}
		want := map[uint32]Value{}
		for _, u := range all {
			if u.t >= (p-2)*10 {
				v := want[u.col]
				want[u.col] = Value{v.Count + 1, v.Sum + u.v}
			}
		}
		for col := range uint32(keys) {
			if got := w.GetIndex(col); got != want[col] {
				t.Fatalf("after pane %d: column %d = %+v, want %+v", p, col, got, want[col])
			}
		}
	}
}

// TestWarm: Warm reads, for known and unknown keys alike, on a window with
// no key yet and on one with keys in and out of the newest pane, and
// changes nothing a read sees (the model test warms at random steps too).
func TestWarm(t *testing.T) {
	w, err := New(Config{Size: 10 * time.Second, Pane: time.Second}, Limits{MaxKeys: 8})
	must(t, err)
	w.Warm([]string{"a", ""}) // no dictionary yet
	w.Warm(nil)
	must(t, w.AddString(1e9, "a", 1))
	must(t, w.AddString(1e9, "b", 2))
	must(t, w.AddString(3e9, "a", 4)) // b's cell is in a closed pane now
	before, top := w.Stats(), w.TopK(nil, 3, ByCount)
	for _, keys := range [][]string{{"a", "b", "c", ""}, {}, {"b", "b", "b"}} {
		w.Warm(keys)
		if got := w.Stats(); got != before {
			t.Fatalf("Warm(%q) changed Stats: %+v, before %+v", keys, got, before)
		}
		if got := w.TopK(nil, 3, ByCount); !slices.Equal(got, top) {
			t.Fatalf("Warm(%q) changed TopK: %v, before %v", keys, got, top)
		}
	}
	must(t, w.AddString(3e9, "b", 8))
	if a, b := w.Get([]byte("a")), w.Get([]byte("b")); a.Count != 2 || a.Sum != 5 || b.Count != 2 || b.Sum != 10 {
		t.Fatalf("after Warm: a %+v, b %+v", a, b)
	}
}
