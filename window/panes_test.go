package window

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
)

// exact is an invertible aggregate: per-key counts and sums.
type exact struct{ m map[string]Value }

func newExact() *exact { return &exact{m: map[string]Value{}} }

func (a *exact) Add(key []byte, value int64) {
	v := a.m[string(key)]
	v.Count++
	v.Sum += value
	a.m[string(key)] = v
}

func (a *exact) Merge(from *exact) error {
	for k, v := range from.m {
		w := a.m[k]
		w.Count += v.Count
		w.Sum += v.Sum
		a.m[k] = w
	}
	return nil
}

func (a *exact) Subtract(from *exact) error {
	for k, v := range from.m {
		w := a.m[k]
		w.Count -= v.Count
		w.Sum -= v.Sum
		if w.Count == 0 {
			delete(a.m, k)
		} else {
			a.m[k] = w
		}
	}
	return nil
}

func (a *exact) Reset() { clear(a.m) }

// seen is a non-invertible aggregate, a Bloom filter without the false
// positives: the set of keys seen. A union cannot be undone.
type seen struct{ m map[string]bool }

func newSeen() *seen { return &seen{m: map[string]bool{}} }

func (a *seen) Add(key []byte, _ int64) { a.m[string(key)] = true }
func (a *seen) Merge(from *seen) error {
	maps.Copy(a.m, from.m)
	return nil
}
func (a *seen) Reset() { clear(a.m) }

// sized merges only with its own size, as sketches do; its Subtract fails
// once failAfter subtractions have been made.
type sized struct {
	exact
	size, subs, failAfter int
}

func (a *sized) Add(key []byte, value int64) { a.exact.Add(key, value) }
func (a *sized) Reset()                      { a.exact.Reset() }
func (a *sized) Merge(from *sized) error {
	if from.size != a.size {
		return fmt.Errorf("size %d into size %d", from.size, a.size)
	}
	return a.exact.Merge(&from.exact)
}
func (a *sized) Subtract(from *sized) error {
	if a.subs++; a.failAfter > 0 && a.subs > a.failAfter {
		return errors.New("worn out")
	}
	return a.exact.Subtract(&from.exact)
}

func TestNewPanesErrors(t *testing.T) {
	cfg := Config{Size: 30, Pane: 10}
	if _, err := NewPanes(Config{Size: 30}, newExact); err == nil {
		t.Error("NewPanes accepted a zero Pane")
	}
	if _, err := NewPanes[*exact](cfg, nil); err == nil {
		t.Error("NewPanes accepted a nil constructor")
	}
	i := 0
	_, err := NewPanes(cfg, func() *sized { i++; return &sized{exact: *newExact(), size: i % 2} })
	if err == nil {
		t.Error("NewPanes accepted aggregates that do not merge")
	}
}

// TestPanesAgainstModel drives a window of exact (invertible) and one of
// seen (not invertible) aggregates with the model's random updates.
func TestPanesAgainstModel(t *testing.T) {
	for _, cfg := range []Config{
		{Size: 40, Pane: 10},
		{Size: 10, Pane: 10},
		{Size: 21, Pane: 3, MaxAhead: 9},
	} {
		for seed := range uint64(4) {
			t.Run(fmt.Sprintf("%+v/seed=%d", cfg, seed), func(t *testing.T) {
				checkPanesAgainstModel(t, cfg, seed)
			})
		}
	}
}

func checkPanesAgainstModel(t *testing.T, cfg Config, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0xa99))
	inv, err := NewPanes(cfg, newExact)
	if err != nil {
		t.Fatal(err)
	}
	set, err := NewPanes(cfg, newSeen)
	if err != nil {
		t.Fatal(err)
	}
	n, width := int64(cfg.Size/cfg.Pane), int64(cfg.Pane)
	m := newModel(cfg, Limits{MaxKeys: 1 << 20, MaxCells: 1 << 30}, n)
	gotExact, gotSeen := newExact(), newSeen()
	for step := range 400 {
		head := int64(0)
		if m.started {
			head = m.head * width
		}
		tm := head + rng.Int64N(3*width) - rng.Int64N((n+2)*width)
		if rng.IntN(20) == 0 {
			tm += (n + rng.Int64N(2*n)) * width
		}
		key, value := fmt.Sprintf("k%d", rng.IntN(5)), rng.Int64N(21)-10
		if rng.IntN(15) == 0 {
			inv.Advance(tm)
			set.Advance(tm)
			m.advance(tm)
		} else {
			want := m.add(tm, key, value)
			if got := inv.Add(tm, []byte(key), value); got != want {
				t.Fatalf("step %d: invertible Add(%d) = %v, want %v", step, tm, got, want)
			}
			if got := set.Add(tm, []byte(key), value); got != want {
				t.Fatalf("step %d: set Add(%d) = %v, want %v", step, tm, got, want)
			}
		}
		live := m.live()
		must(t, inv.MergeInto(gotExact))
		total, err := inv.Total()
		if err != nil || !maps.Equal(gotExact.m, live) || !maps.Equal(total.m, live) {
			t.Fatalf("step %d: invertible window %v, total %v (%v), want %v", step, gotExact.m, total, err, live)
		}
		must(t, set.MergeInto(gotSeen))
		if len(gotSeen.m) != len(live) {
			t.Fatalf("step %d: set window %v, want the keys of %v", step, gotSeen.m, live)
		}
		for k := range live {
			if !gotSeen.m[k] {
				t.Fatalf("step %d: set window %v lacks %s", step, gotSeen.m, k)
			}
		}
		for i := range 5 { // Any tests the panes one by one, as the merge holds them
			k := fmt.Sprintf("k%d", i)
			if got := set.Any(func(a *seen) bool { return a.m[k] }); got != gotSeen.m[k] {
				t.Fatalf("step %d: Any(has %s) = %v, merged window %v", step, k, got, gotSeen.m)
			}
		}
		if _, err := set.Total(); !errors.Is(err, ErrNoTotal) {
			t.Fatalf("set Total() error = %v, want ErrNoTotal", err)
		}
		want := m.stats
		for _, w := range []Stats{inv.Stats(), set.Stats()} {
			if w != want {
				t.Fatalf("step %d: Stats = %+v, want %+v", step, w, want)
			}
		}
		if a, b, _ := inv.Bounds(); m.started && (a != (m.head-n+1)*width || b != (m.head+1)*width) {
			t.Fatalf("step %d: Bounds = [%d, %d), head pane %d", step, a, b, m.head)
		}
	}
}

// TestPanesTotalGivenUp: when a subtraction fails, Total says why and
// MergeInto falls back to merging the live panes.
func TestPanesTotalGivenUp(t *testing.T) {
	w, err := NewPanes(Config{Size: 20, Pane: 10}, func() *sized {
		return &sized{exact: *newExact(), size: 1, failAfter: 2} // NewPanes itself subtracts twice
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tm := range []int64{0, 10, 20, 25} { // 20 expires pane 0
		must(t, w.Add(tm, []byte("k"), 1))
	}
	if _, err := w.Total(); err == nil || errors.Is(err, ErrNoTotal) {
		t.Errorf("Total() error = %v, want the subtraction's", err)
	}
	dst := &sized{exact: *newExact(), size: 1}
	must(t, w.MergeInto(dst))
	if v := dst.m["k"]; v != (Value{3, 3}) {
		t.Errorf("window after giving up the total = %+v, want 3 updates", v)
	}
}
