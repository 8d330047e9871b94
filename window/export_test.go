package window

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// moved is a copy of w made as a moving counter task makes it: Export
// into Import on an empty window of the same shape.
func moved(t *testing.T, w *Sliding, cfg Config, lim Limits) *Sliding {
	t.Helper()
	to, err := New(cfg, lim)
	if err != nil {
		t.Fatal(err)
	}
	w.Export(func(c Cell) bool {
		if err := to.Import(c); err != nil {
			t.Fatalf("import %+v: %v", c, err)
		}
		return true
	})
	return to
}

// same fails unless a and b read alike: every key's value, the bounds,
// the live keys and the top keys.
func same(t *testing.T, a, b *Sliding, keys []string, when string) {
	t.Helper()
	for _, k := range keys {
		if va, vb := a.Get([]byte(k)), b.Get([]byte(k)); va != vb {
			t.Fatalf("%s: %s reads %+v, its copy %+v", when, k, va, vb)
		}
	}
	sa, ea, oka := a.Bounds()
	sb, eb, okb := b.Bounds()
	if sa != sb || ea != eb || oka != okb {
		t.Fatalf("%s: bounds [%d, %d) %v, the copy's [%d, %d) %v", when, sa, ea, oka, sb, eb, okb)
	}
	if la, lb := a.Stats().Live, b.Stats().Live; la != lb {
		t.Fatalf("%s: %d live keys, the copy %d", when, la, lb)
	}
	ta, tb := a.TopK(nil, len(keys), ByCount), b.TopK(nil, len(keys), ByCount)
	cmp := func(x, y Entry) int {
		if x.Count != y.Count {
			return int(y.Count) - int(x.Count)
		}
		if x.Key < y.Key {
			return -1
		}
		return 1
	}
	slices.SortFunc(ta, cmp)
	slices.SortFunc(tb, cmp)
	if !slices.Equal(ta, tb) {
		t.Fatalf("%s: top %v, the copy's %v", when, ta, tb)
	}
}

// TestExportImport: a window handed over by Export and Import reads as
// the original, and stays so under the same updates after it (in order,
// late, expiring panes, a jump past the window), for random streams.
// Likewise a Seen.
func TestExportImport(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 77))
			panes := 1 + rng.IntN(8)
			cfg := Config{Size: time.Duration(panes) * time.Second, Pane: time.Second}
			lim := Limits{MaxKeys: 1 << 10}
			a, err := New(cfg, lim)
			if err != nil {
				t.Fatal(err)
			}
			seen := NewSeen(cfg.Pane, 0)
			keys := make([]string, 1+rng.IntN(30))
			for i := range keys {
				keys[i] = fmt.Sprintf("k%d", i)
			}
			now := int64(time.Hour)
			step := func(ws ...*Sliding) {
				switch r := rng.IntN(20); {
				case r == 0: // a jump, maybe past the whole window
					now += int64(rng.IntN(3*panes+1)) * int64(time.Second)
				case r < 5:
					now += int64(rng.IntN(int(time.Second)))
				}
				at := now - int64(rng.IntN(panes+1))*int64(time.Second) // late, or older than the window
				k, v := keys[rng.IntN(len(keys))], int64(rng.IntN(100))-20
				for _, w := range ws {
					_ = w.AddString(at, k, v)
				}
			}
			for range rng.IntN(300) {
				step(a)
				_, _ = seen.Claim(now, rng.Uint64N(1000)+1)
			}
			b := moved(t, a, cfg, lim)
			same(t, a, b, keys, "after the move")
			// Cells may come in any order: newest pane first, too.
			var cells []Cell
			a.Export(func(c Cell) bool { cells = append(cells, c); return true })
			c, err := New(cfg, lim)
			if err != nil {
				t.Fatal(err)
			}
			for i := len(cells) - 1; i >= 0; i-- {
				if err := c.Import(cells[i]); err != nil {
					t.Fatalf("import %+v newest first: %v", cells[i], err)
				}
			}
			same(t, a, c, keys, "after a move newest pane first")
			for i := range 200 {
				step(a, b, c)
				same(t, a, b, keys, fmt.Sprintf("update %d after the move", i))
				same(t, a, c, keys, fmt.Sprintf("update %d after the move newest first", i))
			}
			s2 := NewSeen(cfg.Pane, 0)
			seen.Export(func(at int64, id uint64) bool {
				if fresh, err := s2.Claim(at, id); !fresh || err != nil {
					t.Fatalf("id %d at %d imported twice (%v)", id, at, err)
				}
				return true
			})
			if s2.Len() != seen.Len() {
				t.Fatalf("the Seen's copy has %d ids, the original %d", s2.Len(), seen.Len())
			}
			for id := uint64(1); id <= 1000; id++ {
				if fa, _ := seen.Claim(now, id); func() bool { fb, _ := s2.Claim(now, id); return fb }() != fa {
					t.Fatalf("id %d: new %v to the original, not to the copy", id, fa)
				}
			}
		})
	}
}

// TestPanesExportImport: a Panes handed over by Export and Import (in
// either order of panes) reads as the original, total and merge, and stays
// so under the same updates after it; for an invertible aggregate and for
// one that is not.
func TestPanesExportImport(t *testing.T) {
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 5))
		panes := 1 + rng.IntN(6)
		cfg := Config{Size: time.Duration(panes) * time.Second, Pane: time.Second}
		a, _ := NewPanes(cfg, newExact)
		b, _ := NewPanes(cfg, newSeen)
		now := int64(time.Hour)
		add := func(ws ...any) {
			if rng.IntN(4) == 0 {
				now += int64(rng.IntN(2*panes+1)) * int64(time.Second) / 2
			}
			at := now - int64(rng.IntN(panes+1))*int64(time.Second)
			k, v := []byte(fmt.Sprintf("k%d", rng.IntN(20))), int64(rng.IntN(9))
			for _, w := range ws {
				switch w := w.(type) {
				case *Panes[*exact]:
					_ = w.Add(at, k, v)
				case *Panes[*seen]:
					_ = w.Add(at, k, 0)
				}
			}
		}
		for range rng.IntN(200) {
			add(a, b)
		}
		a2, _ := NewPanes(cfg, newExact)
		b2, _ := NewPanes(cfg, newSeen)
		type pane[A any] struct {
			t int64
			a A
		}
		var as []pane[*exact]
		a.Export(func(t int64, x *exact) bool { as = append(as, pane[*exact]{t, x}); return true })
		var bs []pane[*seen]
		b.Export(func(t int64, x *seen) bool { bs = append(bs, pane[*seen]{t, x}); return true })
		if seed%2 == 1 { // newest pane first
			slices.Reverse(as)
			slices.Reverse(bs)
		}
		for _, p := range as {
			if err := a2.Import(p.t, p.a); err != nil {
				t.Fatalf("seed %d: import: %v", seed, err)
			}
		}
		for _, p := range bs {
			if err := b2.Import(p.t, p.a); err != nil {
				t.Fatalf("seed %d: import: %v", seed, err)
			}
		}
		for i := range 100 {
			ta, _ := a.Total()
			ta2, _ := a2.Total()
			mb, mb2 := newSeen(), newSeen()
			_, _ = b.MergeInto(mb), b2.MergeInto(mb2)
			if !maps.Equal(ta.m, ta2.m) || !maps.Equal(mb.m, mb2.m) {
				t.Fatalf("seed %d, update %d after the move: totals %v / %v, merges %v / %v", seed, i, ta.m, ta2.m, mb.m, mb2.m)
			}
			add(a, a2, b, b2)
		}
	}
}
