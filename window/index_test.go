package window

import (
	"math/rand/v2"
	"testing"
)

// TestCellIndex checks the index against a map through growth, resets and
// shrinks, putting through find and put or through findOrPut, with
// columns drawn from a narrow and from a wide range so that probe chains
// meet.
func TestCellIndex(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cols  uint32 // columns drawn from [0, cols)
		puts  []int  // puts per round; the index is reset between rounds
		seeds uint64
	}{
		{"dense columns, growing", 5000, []int{10, 3000, 5000}, 3},
		{"wide columns", 1 << 31, []int{1, 100, 20000}, 3},
		{"burst then small: shrinks", 1 << 20, []int{50000, 10, 0, 200}, 2},
		{"burst then unused: freed", 1 << 20, []int{50000, 0, 30}, 2},
	} {
		for seed := range tc.seeds {
			rng := rand.New(rand.NewPCG(seed, 7))
			var x cellIndex
			for round, puts := range tc.puts {
				want := map[uint32]uint32{}
				var cells []cell // cell i is the i-th column put
				for range puts {
					col := rng.Uint32N(tc.cols)
					w, in := want[col]
					if rng.IntN(2) == 0 {
						if cell, ok := x.findOrPut(col, uint32(len(want)), cells); ok != in || ok && cell != w || !ok && cell != uint32(len(want)) {
							t.Fatalf("%s seed %d round %d: findOrPut(%d, %d) = %d, %v; want %d, %v", tc.name, seed, round, col, len(want), cell, ok, w, in)
						}
						if !in {
							want[col] = uint32(len(want))
							cells = append(cells, cell{col: col})
						}
						continue
					}
					got, at, ok := x.find(col, cells)
					if ok != in || ok && got != w {
						t.Fatalf("%s seed %d round %d: find(%d) = %d, %v; want %d, %v", tc.name, seed, round, col, got, ok, w, in)
					}
					if !ok {
						want[col] = uint32(len(want))
						x.put(col, want[col], at, cells)
						cells = append(cells, cell{col: col})
					}
				}
				for col, w := range want {
					if cell, _, ok := x.find(col, cells); !ok || cell != w {
						t.Fatalf("%s seed %d round %d: find(%d) = %d, %v after the puts; want %d", tc.name, seed, round, col, cell, ok, w)
					}
				}
				if x.n != len(want) || 8*x.n > 7*8*len(x.groups) {
					t.Fatalf("%s: %d entries in %d slots, want %d at most 7/8 full", tc.name, x.n, 8*len(x.groups), len(want))
				}
				size := 8 * len(x.groups)
				x.reset()
				if size > minIndex && len(want)*16 < size && 8*len(x.groups) >= size {
					t.Errorf("%s round %d: %d slots for %d entries not shrunk on reset", tc.name, round, size, len(want))
				}
				for col := range want {
					if _, _, ok := x.find(col, cells); ok {
						t.Fatalf("%s: %d still found after reset", tc.name, col)
					}
				}
			}
		}
	}
}
