package sketch_test

import (
	"errors"
	"math"
	"testing"

	"github.com/acktor/acktor/sketch"
)

func TestNewCountMinArguments(t *testing.T) {
	for _, tc := range []struct {
		name         string
		width, depth int
		ok           bool
	}{
		{"smallest", 1, 1, true},
		{"odd width", 2719, 5, true},
		{"zero width", 0, 5, false},
		{"negative width", -1, 5, false},
		{"zero depth", 10, 0, false},
		{"depth over limit", 10, sketch.MaxCountMinDepth + 1, false},
		{"deepest", 3, sketch.MaxCountMinDepth, true},
		{"too many cells", sketch.MaxCountMinCells/4 + 1, 4, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := sketch.NewCountMin(tc.width, tc.depth)
			if tc.ok != (err == nil) {
				t.Fatalf("NewCountMin(%d, %d) error = %v, want ok %t", tc.width, tc.depth, err, tc.ok)
			}
			if err != nil && !errors.Is(err, sketch.ErrArgument) {
				t.Errorf("error %v does not wrap ErrArgument", err)
			}
			if err == nil && (s.Width() != tc.width || s.Depth() != tc.depth) {
				t.Errorf("shape %d×%d, want %d×%d", s.Width(), s.Depth(), tc.width, tc.depth)
			}
		})
	}
}

func TestNewCountMinWithEstimates(t *testing.T) {
	for _, tc := range []struct {
		eps, delta   float64
		width, depth int // 0: an error
	}{
		{0.001, 0.01, 2719, 5}, // the benchmark shape
		{0.01, 0.05, 272, 3},
		{0.5, 0.9, 6, 1},
		{0, 0.01, 0, 0},
		{1, 0.01, 0, 0},
		{math.NaN(), 0.01, 0, 0},
		{0.01, 0, 0, 0},
		{0.01, 1, 0, 0},
		{0.01, -0.5, 0, 0},
		{0.01, math.Exp(-65), 0, 0}, // depth 65
		{1e-9, 0.01, 0, 0},          // too many cells
	} {
		s, err := sketch.NewCountMinWithEstimates(tc.eps, tc.delta)
		switch {
		case tc.width == 0 && !errors.Is(err, sketch.ErrArgument):
			t.Errorf("eps %v delta %v: error %v, want ErrArgument", tc.eps, tc.delta, err)
		case tc.width != 0 && err != nil:
			t.Errorf("eps %v delta %v: %v", tc.eps, tc.delta, err)
		case tc.width != 0 && (s.Width() != tc.width || s.Depth() != tc.depth):
			t.Errorf("eps %v delta %v: %d×%d, want %d×%d", tc.eps, tc.delta, s.Width(), s.Depth(), tc.width, tc.depth)
		}
	}
}

// Count-Min never underestimates, with or without conservative update, and
// conservative update never gives a larger estimate than plain update with
// the same hashes.
func TestCountMinNeverUnderestimates(t *testing.T) {
	for _, tc := range []struct{ width, depth, keys int }{
		{1, 1, 100},
		{7, 3, 1000},
		{100, 4, 5000},
		{272, 3, 20000},
	} {
		for seed := range uint64(3) {
			plain, _ := sketch.NewCountMin(tc.width, tc.depth, sketch.WithSeed(seed))
			cu, _ := sketch.NewCountMin(tc.width, tc.depth, sketch.WithSeed(seed), sketch.WithConservativeUpdate())
			updates, exact := stream(seed, tc.keys, 1000)
			for _, u := range updates {
				plain.Add(u.key, u.count)
				cu.Add(u.key, u.count)
			}
			for k, a := range exact {
				p, c := plain.Estimate([]byte(k)), cu.Estimate([]byte(k))
				if p < a || c < a || c > p {
					t.Fatalf("%d×%d seed %d key %x: true %d, plain %d, conservative %d", tc.width, tc.depth, seed, k, a, p, c)
				}
			}
		}
	}
}

// The classic guarantee: Estimate ≤ a + ε‖a‖₁ with probability ≥ 1−δ for
// w = ⌈e/ε⌉ and d = ⌈ln 1/δ⌉. Over many keys and seeds the share of
// estimates beyond the bound must stay below δ plus sampling slack. On a
// Zipf stream the (Markov) bound is loose and the share is about 0; the
// "heavy" stream comes close to it: just under w/e heavy keys, each alone
// heavier than ε‖a‖₁, so a light key is beyond the bound whenever a heavy
// key shares its counter in every row, with probability ≈ (0.95/e)^d.
func TestCountMinErrorBound(t *testing.T) {
	for _, tc := range []struct {
		name       string
		eps, delta float64
	}{
		{"zipf", 0.01, 0.05},
		{"zipf", 0.005, 0.01},
		{"heavy", 0.01, 0.05},
		{"heavy", 0.01, 1 / math.E}, // depth 1: one row alone
		{"heavy", 0.005, 0.01},
	} {
		var over, all int
		for seed := range uint64(4) {
			s, err := sketch.NewCountMinWithEstimates(tc.eps, tc.delta, sketch.WithSeed(seed))
			if err != nil {
				t.Fatal(err)
			}
			var updates []item
			var exact map[string]uint64
			if tc.name == "zipf" {
				updates, exact = stream(100+seed, 10000, 1<<12)
			} else {
				updates, exact = heavyStream(seed, int(0.95*float64(s.Width())/math.E), 10000)
			}
			for _, u := range updates {
				s.Add(u.key, u.count)
			}
			bound := tc.eps * float64(s.Total())
			for k, a := range exact {
				if float64(s.Estimate([]byte(k))) > float64(a)+bound {
					over++
				}
				all++
			}
		}
		share := float64(over) / float64(all)
		t.Logf("%s, eps %v, delta %.3f: %d of %d estimates beyond a + eps·‖a‖₁ (%.4f)", tc.name, tc.eps, tc.delta, over, all, share)
		if share > tc.delta+0.01 {
			t.Errorf("%s, eps %v: share beyond the bound %.4f > delta %v", tc.name, tc.eps, share, tc.delta)
		}
	}
}

// heavyStream returns heavy keys of count 10⁶ and light keys of count 1.
func heavyStream(seed uint64, heavy, light int) ([]item, map[string]uint64) {
	var s []item
	exact := make(map[string]uint64, heavy+light)
	for i := range uint64(heavy + light) {
		k, c := key(seed<<32|i), uint64(1)
		if i < uint64(heavy) {
			c = 1e6
		}
		s = append(s, item{k, c})
		exact[string(k)] = c
	}
	return s, exact
}

// Merge is linear: the merged sketch of a stream split in parts equals,
// counter for counter, the sketch of the whole stream.
func TestCountMinMergeIsSketchOfConcatenation(t *testing.T) {
	for _, tc := range []struct{ width, depth, parts int }{
		{1, 1, 2},
		{13, 2, 3},
		{2719, 5, 4},
	} {
		updates, _ := stream(7, 3000, 100)
		whole, _ := sketch.NewCountMin(tc.width, tc.depth, sketch.WithSeed(9))
		for _, u := range updates {
			whole.Add(u.key, u.count)
		}
		merged, _ := sketch.NewCountMin(tc.width, tc.depth, sketch.WithSeed(9))
		for p := range tc.parts {
			part, _ := sketch.NewCountMin(tc.width, tc.depth, sketch.WithSeed(9))
			for _, u := range updates[p*len(updates)/tc.parts : (p+1)*len(updates)/tc.parts] {
				part.Add(u.key, u.count)
			}
			if err := merged.Merge(part); err != nil {
				t.Fatal(err)
			}
		}
		if !sameEncoding(t, merged, whole) {
			t.Errorf("%d×%d in %d parts: merged sketch differs from the sketch of the whole stream", tc.width, tc.depth, tc.parts)
		}
	}
}

func TestCountMinMergeMismatch(t *testing.T) {
	base := func(opts ...sketch.CountMinOption) *sketch.CountMin {
		s, err := sketch.NewCountMin(100, 4, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tc := range []struct {
		name string
		a, b *sketch.CountMin
	}{
		{"nil", base(), nil},
		{"width", base(), must(sketch.NewCountMin(101, 4))},
		{"depth", base(), must(sketch.NewCountMin(100, 5))},
		{"seed", base(), base(sketch.WithSeed(1))},
		{"conservative other", base(), base(sketch.WithConservativeUpdate())},
		{"conservative self", base(sketch.WithConservativeUpdate()), base(sketch.WithConservativeUpdate())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.a.Add([]byte("k"), 3)
			before := mustMarshal(t, tc.a)
			err := tc.a.Merge(tc.b)
			if !errors.Is(err, sketch.ErrMismatch) {
				t.Fatalf("Merge error = %v, want ErrMismatch", err)
			}
			if string(before) != string(mustMarshal(t, tc.a)) {
				t.Error("a failed Merge changed the sketch")
			}
			t.Log(err)
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Counters saturate instead of wrapping around, so estimates stay upper
// bounds.
func TestCountMinSaturates(t *testing.T) {
	for _, opts := range [][]sketch.CountMinOption{nil, {sketch.WithConservativeUpdate()}} {
		s := must(sketch.NewCountMin(3, 2, opts...))
		s.Add([]byte("a"), math.MaxUint64-1)
		s.Add([]byte("a"), 5)
		s.Add([]byte("b"), 5)
		if got := s.Estimate([]byte("a")); got != math.MaxUint64 {
			t.Errorf("conservative %t: Estimate = %d, want MaxUint64", s.Conservative(), got)
		}
		if s.Total() != math.MaxUint64 {
			t.Errorf("conservative %t: Total = %d, want MaxUint64", s.Conservative(), s.Total())
		}
		var back sketch.CountMin
		if err := back.UnmarshalBinary(mustMarshal(t, s)); err != nil {
			t.Errorf("a saturated sketch does not decode: %v", err)
		}
	}
}

func TestCountMinZeroValue(t *testing.T) {
	var s sketch.CountMin
	s.Add([]byte("a"), 1)
	if s.Estimate([]byte("a")) != 0 || s.Total() != 0 {
		t.Error("the zero value counted a key")
	}
	if _, err := s.MarshalBinary(); err == nil {
		t.Error("the zero value marshalled")
	}
}

func TestCountMinRoundTrip(t *testing.T) {
	for _, opts := range [][]sketch.CountMinOption{
		nil,
		{sketch.WithSeed(42)},
		{sketch.WithConservativeUpdate(), sketch.WithSeed(math.MaxUint64)},
	} {
		s := must(sketch.NewCountMin(97, 3, opts...))
		updates, exact := stream(3, 500, 50)
		for _, u := range updates {
			s.Add(u.key, u.count)
		}
		data := mustMarshal(t, s)
		var back sketch.CountMin
		if err := back.UnmarshalBinary(data); err != nil {
			t.Fatal(err)
		}
		if !sameEncoding(t, s, &back) || back.Conservative() != s.Conservative() {
			t.Fatal("round trip changed the sketch")
		}
		for k := range exact { // the hashes survive too
			if s.Estimate([]byte(k)) != back.Estimate([]byte(k)) {
				t.Fatalf("key %x: estimate %d before, %d after", k, s.Estimate([]byte(k)), back.Estimate([]byte(k)))
			}
		}
	}
}

func TestCountMinUnmarshalRejects(t *testing.T) {
	s := must(sketch.NewCountMin(5, 2))
	s.Add([]byte("x"), 7)
	good := mustMarshal(t, s)
	edit := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"header only", good[:4]},
		{"bad magic", edit(func(b []byte) []byte { b[0] = 'X'; return b })},
		{"future version", edit(func(b []byte) []byte { b[3] = 2; return b })},
		{"unknown flag", edit(func(b []byte) []byte { b[4] = 2; return b })},
		{"zero width", edit(func(b []byte) []byte { b[5], b[6] = 0, 0; return b })},
		{"huge shape", edit(func(b []byte) []byte { b[8], b[12] = 0xff, 0x01; return b })},
		{"truncated counters", good[:len(good)-1]},
		{"trailing byte", append(append([]byte(nil), good...), 0)},
		{"row does not sum to total", edit(func(b []byte) []byte { b[len(b)-1] = 1; return b })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			back := must(sketch.NewCountMin(3, 3))
			err := back.UnmarshalBinary(tc.data)
			if !errors.Is(err, sketch.ErrCorrupt) {
				t.Fatalf("error = %v, want ErrCorrupt", err)
			}
			if back.Width() != 3 {
				t.Error("a failed UnmarshalBinary changed the sketch")
			}
			t.Log(err)
		})
	}
}

func TestCountMinZeroAllocs(t *testing.T) {
	for _, opts := range [][]sketch.CountMinOption{nil, {sketch.WithConservativeUpdate()}} {
		s := must(sketch.NewCountMinWithEstimates(0.001, 0.01, opts...))
		k := []byte("some key")
		if n := testing.AllocsPerRun(100, func() { s.Add(k, 1) }); n != 0 {
			t.Errorf("Add: %v allocations", n)
		}
		if n := testing.AllocsPerRun(100, func() { _ = s.Estimate(k) }); n != 0 {
			t.Errorf("Estimate: %v allocations", n)
		}
	}
}
