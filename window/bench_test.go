package window

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"
)

// The update benchmarks run a 1 h window over 1M keys at a steady event
// rate of 10 000 updates per second of event time. Keys are uniformly
// random (the worst case for caches and for expiry: almost every update
// makes a cell of its own) or Zipf-distributed (s = 1.1, hot keys spread
// over the columns), the shape of real traffic. The window is filled with
// a full hour first, so a measured update also pays its share of folding
// and expiring the panes it pushes along: the amortized steady state.
const (
	benchKeys   = 1 << 20
	benchRate   = 10_000 // updates per second of event time
	benchWindow = time.Hour
	benchStep   = int64(time.Second) / benchRate
)

// benchState is a full window and the clock of its updates, kept across
// the b.N rounds and between BenchmarkAdd and BenchmarkAddIndex.
type benchState struct {
	w    *Sliding
	now  int64
	cols []uint32 // the key stream, as columns, cycled
	i    int
}

type benchShape struct {
	pane time.Duration
	zipf bool
}

func (s benchShape) String() string {
	keys := "uniform"
	if s.zipf {
		keys = "zipf1.1"
	}
	return fmt.Sprintf("window=1h/pane=%v/keys=1M-%s/rate=%d", s.pane, keys, benchRate)
}

var (
	benchShapes = []benchShape{{time.Second, false}, {10 * time.Second, false}, {time.Second, true}}
	benchStates = map[benchShape]*benchState{}
)

// benchKey writes key i into buf: a caller's key sits in its message buffer.
func benchKey(buf *[12]byte, i uint32) []byte {
	copy(buf[:4], "key:")
	binary.BigEndian.PutUint64(buf[4:], uint64(i)*0x9E3779B97F4A7C15)
	return buf[:]
}

func fullWindow(b *testing.B, shape benchShape) *benchState {
	if s := benchStates[shape]; s != nil {
		return s
	}
	w, err := New(Config{Size: benchWindow, Pane: shape.pane}, Limits{MaxKeys: benchKeys})
	if err != nil {
		b.Fatal(err)
	}
	var buf [12]byte
	for i := range uint32(benchKeys) {
		if col, err := w.Column(benchKey(&buf, i)); err != nil || col != i {
			b.Fatalf("Column = %d, %v", col, err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	s := &benchState{w: w, cols: make([]uint32, 1<<20)}
	zipf, perm := rand.NewZipf(rng, 1.1, 1, benchKeys-1), rng.Perm(benchKeys)
	for i := range s.cols {
		if shape.zipf {
			s.cols[i] = uint32(perm[zipf.Uint64()])
		} else {
			s.cols[i] = rng.Uint32N(benchKeys)
		}
	}
	for range int(benchWindow.Seconds()) * benchRate {
		s.step()
	}
	benchStates[shape] = s
	return s
}

func (s *benchState) step() {
	s.now += benchStep
	_ = s.w.AddIndex(s.now, s.cols[s.i&(len(s.cols)-1)], 1)
	s.i++
}

// denseMatrix is the yardstick: the paper's dense matrix over 1M keys, one
// pane's count and sum rows and the total vector (28 MB).
type denseMatrix struct {
	counts []uint32
	sums   []int64
	totals []total
}

var benchDense *denseMatrix

func newDense() *denseMatrix {
	if benchDense == nil {
		d := &denseMatrix{make([]uint32, benchKeys), make([]int64, benchKeys), make([]total, benchKeys)}
		for i := range benchKeys { // fault the pages in, as the full windows' are
			d.counts[i], d.sums[i], d.totals[i] = 1, 1, total{1, 1}
		}
		benchDense = d
	}
	return benchDense
}

// update does n updates of the key stream cols from position i: a random
// ++ in the pane's rows and in the total vector, before any expiry (a dense
// pane costs O(keys) to expire, see BenchmarkAdvance).
func (d *denseMatrix) update(cols []uint32, i, n int) {
	for j := i; j < i+n; j++ {
		col := cols[j&(len(cols)-1)]
		d.counts[col]++
		d.sums[col]++
		d.totals[col].count++
		d.totals[col].sum++
	}
}

// floorChunk is how many of the window's updates the benchmarks do
// between two timings of the floor (timeFloor).
const floorChunk = 1 << 16

// timeFloor times the floor for the n updates from position from, timer
// stopped, and returns its time (zero unless uniform: for uniform keys
// almost every update is a (key, pane) cell of its own). The floor is what
// any exact window with a running total must do per cell, whatever else
// it does — add the cell into its key's total and, one window later, take
// it out again: two read-modify-writes at random places of the total
// vector, in a tight loop. Nothing else is in it: no pane, no index, no
// clock. It runs on the window's own total vector, between the window's
// chunks of updates, and is undone: the same memory, in the state the
// window leaves the caches in, and as the machine's speed drifts (it is
// shared) both drift together. Its keys are those half the key stream's
// cycle away: the lines of the keys the window's passes have just folded
// or expired, or fold or expire next, would be warmer or colder than the
// rest.
func (s *benchState) timeFloor(b *testing.B, from, n int, uniform bool) time.Duration {
	if !uniform {
		return 0
	}
	b.StopTimer()
	at := from + len(s.cols)/2
	start := time.Now()
	floorPass(s.w.totals, s.cols, at, n, 1)
	floor := time.Since(start)
	floorPass(s.w.totals, s.cols, at, n, ^uint64(0)) // undone
	b.StartTimer()
	return floor
}

// floorPass does n updates' unavoidable work on totals: each update's key
// in, and the key of the update one window earlier (a different random
// key) out, by sign (1, or -1 to undo it).
func floorPass(totals []total, cols []uint32, i, n int, sign uint64) {
	const lag = int(benchWindow/time.Second) * benchRate
	mask := len(cols) - 1
	for j := i; j < i+n; j++ {
		in, out := &totals[cols[j&mask]], &totals[cols[(j-lag)&mask]]
		in.count += sign
		in.sum += int64(sign)
		out.count -= sign
		out.sum -= int64(sign)
	}
}

// reportDense times the dense yardstick on the same n updates the window
// just did from position i, and reports it (dense-ns/op) and the window's
// time over it (x-dense). The yardstick leaves out the dense matrix's own
// expiry, a pass over every key's row per pane; dense-expiry-ns/op is that
// pass, timed once here, shared among the updates of one pane. A nonzero
// floor (timeFloor's, over the same updates) is reported too
// (floor-ns/op), with the window's time over it (x-floor).
func reportDense(b *testing.B, cols []uint32, i, n int, pane, floor time.Duration) {
	b.StopTimer()
	d := newDense()
	start := time.Now()
	d.update(cols, i, n)
	dense := float64(time.Since(start).Nanoseconds()) / float64(n)
	b.ReportMetric(dense, "dense-ns/op")
	if dense > 0 {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n)/dense, "x-dense")
	}
	start = time.Now()
	d.expire()
	perPane := pane.Seconds() * benchRate
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/perPane, "dense-expiry-ns/op")
	if floor > 0 {
		b.ReportMetric(float64(floor.Nanoseconds())/float64(n), "floor-ns/op")
		b.ReportMetric(float64(b.Elapsed())/float64(floor), "x-floor")
	}
}

// expire subtracts the pane's rows from the total vector and clears them,
// as the dense matrix does when the pane leaves the window.
func (d *denseMatrix) expire() {
	for i := range d.totals {
		d.totals[i].count -= uint64(d.counts[i])
		d.totals[i].sum -= d.sums[i]
		d.counts[i], d.sums[i] = 0, 0
	}
}

// BenchmarkAdd: one update through the dictionary. 1 h windows of 1 s and
// 10 s panes run side by side. Three yardsticks: the dictionary's lookup
// alone, a Go map of the same 1M string keys, and the paper's dense matrix
// doing the same update (denseMatrix.update), which each window
// sub-benchmark also times on its own key stream right after it
// (dense-ns/op, x-dense); at uniform keys also the floor, between chunks
// of its updates (timeFloor: floor-ns/op, x-floor).
func BenchmarkAdd(b *testing.B) {
	for _, shape := range benchShapes {
		b.Run(shape.String(), func(b *testing.B) {
			s := fullWindow(b, shape)
			var buf [12]byte
			from := s.i
			b.ReportAllocs()
			b.ResetTimer()
			var floor time.Duration
			for done := 0; done < b.N; {
				n, at := min(floorChunk, b.N-done), s.i
				for range n {
					s.now += benchStep
					if err := s.w.Add(s.now, benchKey(&buf, s.cols[s.i&(len(s.cols)-1)]), 1); err != nil {
						b.Fatal(err)
					}
					s.i++
				}
				done += n
				floor += s.timeFloor(b, at, n, !shape.zipf)
			}
			reportDense(b, s.cols, from, b.N, shape.pane, floor)
			reportCells(b, s.w)
		})
	}
	b.Run("map-reference/keys=1M-uniform", func(b *testing.B) {
		s := fullWindow(b, benchShapes[0])
		dict := make(map[string]uint32, len(s.w.dict.keys))
		for col, key := range s.w.dict.keys {
			dict[key] = uint32(col)
		}
		var buf [12]byte
		var sink uint32
		b.ResetTimer()
		for i := range b.N {
			sink += dict[string(benchKey(&buf, s.cols[i&(len(s.cols)-1)]))]
		}
		_ = sink
	})
	b.Run("dict-reference/keys=1M-uniform", func(b *testing.B) {
		s := fullWindow(b, benchShapes[0])
		var buf [12]byte
		var sink uint32
		b.ResetTimer()
		for i := range b.N {
			col, _ := s.w.Lookup(benchKey(&buf, s.cols[i&(len(s.cols)-1)]))
			sink += col
		}
		_ = sink
	})
	b.Run("dense-reference/keys=1M-uniform", func(b *testing.B) {
		cols := fullWindow(b, benchShapes[0]).cols
		d := newDense()
		b.ResetTimer()
		d.update(cols, 0, b.N)
	})
}

// BenchmarkAddIndex: the same, for a caller that holds the column, with
// the dense yardstick timed after each (dense-ns/op, x-dense) and the
// floor between its chunks (floor-ns/op, x-floor). It is the
// full windows' last user, and lets each go (~0.7 GB) when done.
func BenchmarkAddIndex(b *testing.B) {
	for _, shape := range benchShapes {
		b.Run(shape.String(), func(b *testing.B) {
			s := fullWindow(b, shape)
			from := s.i
			b.ReportAllocs()
			b.ResetTimer()
			var floor time.Duration
			for done := 0; done < b.N; {
				n, at := min(floorChunk, b.N-done), s.i
				for range n {
					s.step()
				}
				done += n
				floor += s.timeFloor(b, at, n, !shape.zipf)
			}
			reportDense(b, s.cols, from, b.N, shape.pane, floor)
			reportCells(b, s.w)
		})
		delete(benchStates, shape)
		runtime.GC()
	}
	benchDense = nil
}

func reportCells(b *testing.B, w *Sliding) {
	st := w.Stats()
	b.ReportMetric(float64(st.Cells), "cells")
	if st.CellsFull+st.KeysFull+st.Late+st.Ahead+st.Overflow != 0 {
		b.Fatalf("rejections in a benchmark: %+v", st)
	}
}

// BenchmarkAdvance times expiring one pane that holds the given number of
// cells, each a random column of 1M: ns/pane and ns/cell. The dense
// sub-benchmark is the alternative it replaces: subtracting a dense row of
// 1M (count, sum) from the totals, whatever the pane touched.
func BenchmarkAdvance(b *testing.B) {
	const panes = 60
	for _, cells := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("sparse/cells=%d/keys=1M", cells), func(b *testing.B) {
			w, err := New(Config{Size: panes * time.Second, Pane: time.Second}, Limits{MaxKeys: benchKeys})
			if err != nil {
				b.Fatal(err)
			}
			var buf [12]byte
			for i := range uint32(benchKeys) {
				_, _ = w.Column(benchKey(&buf, i))
			}
			rng := rand.New(rand.NewPCG(3, 4))
			fill := func(pane int64) {
				for range cells {
					_ = w.AddIndex(pane*int64(time.Second), rng.Uint32N(benchKeys), 1)
				}
			}
			for p := range int64(panes) {
				fill(p)
			}
			var spent time.Duration
			b.ResetTimer()
			for i := range b.N {
				p := int64(panes + i)
				start := time.Now()
				w.Advance(p * int64(time.Second)) // expires pane p-60
				spent += time.Since(start)
				fill(p)
			}
			b.ReportMetric(float64(spent.Nanoseconds())/float64(b.N), "ns/pane")
			b.ReportMetric(float64(spent.Nanoseconds())/float64(b.N)/float64(cells), "ns/cell")
		})
	}
	b.Run("dense-reference/keys=1M", func(b *testing.B) {
		type total struct {
			count uint64
			sum   int64
		}
		counts, sums, totals := make([]uint32, benchKeys), make([]int64, benchKeys), make([]total, benchKeys)
		for i := range counts {
			counts[i], sums[i], totals[i] = 1, 1, total{2, 2}
		}
		b.ResetTimer()
		for range b.N {
			for i := range totals {
				totals[i].count -= uint64(counts[i])
				totals[i].sum -= sums[i]
				counts[i], sums[i] = 0, 0
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/pane")
	})
}

// BenchmarkTopK ranks the live keys of a window, k = 10.
func BenchmarkTopK(b *testing.B) {
	for _, keys := range []int{10_000, 1 << 20} {
		for _, by := range []Order{ByCount, BySum} {
			b.Run(fmt.Sprintf("keys=%d/by=%s/k=10", keys, map[Order]string{ByCount: "count", BySum: "sum"}[by]), func(b *testing.B) {
				w, err := New(Config{Size: time.Minute, Pane: time.Second}, Limits{MaxKeys: keys})
				if err != nil {
					b.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(5, 6))
				var buf [12]byte
				for i := range uint32(keys) {
					key := benchKey(&buf, i)
					for range 1 + rng.IntN(4) {
						_ = w.Add(rng.Int64N(int64(time.Minute)), key, rng.Int64N(1000))
					}
				}
				dst := make([]Entry, 0, 10)
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					dst = w.TopK(dst[:0], 10, by)
				}
			})
		}
	}
}

// BenchmarkMemory reports the heap a Sliding window takes: bytes/key for
// the dictionary and the total vector, bytes/key/pane for the panes' cells,
// with every key in every pane (density 1, where the paper's dense rows of
// uint32 counts and int64 sums would take 12 bytes/key/pane) and with one
// key in ten per pane (density 0.1, where dense rows still take 12).
func BenchmarkMemory(b *testing.B) {
	const keys, panes = 100_000, 60
	for _, every := range []int{1, 10} {
		b.Run(fmt.Sprintf("keys=%d/panes=%d/density=%.1f", keys, panes, 1/float64(every)), func(b *testing.B) {
			var perKey, perCell float64
			for range b.N {
				var m0, m1, m2 runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&m0)
				w, err := New(Config{Size: panes * time.Second, Pane: time.Second}, Limits{MaxKeys: keys})
				if err != nil {
					b.Fatal(err)
				}
				var buf [12]byte
				for i := range uint32(keys) {
					_, _ = w.Column(benchKey(&buf, i))
				}
				runtime.GC()
				runtime.ReadMemStats(&m1)
				for p := range int64(panes) {
					for col := int(p) % every; col < keys; col += every {
						if err := w.AddIndex(p*int64(time.Second), uint32(col), 1); err != nil {
							b.Fatal(err)
						}
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&m2)
				perKey = float64(m1.HeapAlloc-m0.HeapAlloc) / keys
				perCell = float64(m2.HeapAlloc-m1.HeapAlloc) / keys / panes
				runtime.KeepAlive(w)
			}
			b.ReportMetric(perKey, "bytes/key")
			b.ReportMetric(perCell, "bytes/key/pane")
		})
	}
}

// BenchmarkWarm: batches of 512 updates by string key, as a counter task
// gets them, into two windows fed the same batches in the same loop: one
// warmed a batch at a time first (Warm), one not. Which goes first
// alternates, and each is timed on its own, so that a noisy machine slows
// both alike. It reports each one's ns an update and warm/plain. The keys:
// 50 000 Zipf-distributed (s = 1.1, the word count's vocabulary) and 1M
// uniform; the windows count the whole input (a word count's) or 1 h of
// 1 s panes.
func BenchmarkWarm(b *testing.B) {
	const batch = 512
	wholeInput := Config{Size: 1 << 62, Pane: 1 << 62} // one pane, as a counter without a window has
	for _, bc := range []struct {
		name string
		keys int
		zipf bool
		cfg  Config
	}{
		{"keys=50k-zipf1.1/whole-input", 50_000, true, wholeInput},
		{"keys=1M-uniform/whole-input", benchKeys, false, wholeInput},
		{"keys=50k-zipf1.1/window=1h/pane=1s", 50_000, true, Config{Size: time.Hour, Pane: time.Second}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(5, 6))
			zipf, perm := rand.NewZipf(rng, 1.1, 1, uint64(bc.keys-1)), rng.Perm(bc.keys)
			names := make([]string, bc.keys)
			var buf [12]byte
			for i := range names {
				names[i] = string(benchKey(&buf, uint32(i)))
			}
			stream := make([]string, 1<<20)
			for i := range stream {
				if bc.zipf {
					stream[i] = names[perm[zipf.Uint64()]]
				} else {
					stream[i] = names[rng.IntN(bc.keys)]
				}
			}
			var ws [2]*Sliding
			for i := range ws {
				w, err := New(bc.cfg, Limits{MaxKeys: bc.keys})
				if err != nil {
					b.Fatal(err)
				}
				ws[i] = w
			}
			var spent [2]time.Duration
			var now int64
			feed := func(w *Sliding, keys []string, warm bool) time.Duration {
				start := time.Now()
				if warm {
					w.Warm(keys)
				}
				for j, k := range keys {
					if err := w.AddString(now+int64(j)*benchStep, k, 1); err != nil {
						b.Fatal(err)
					}
				}
				return time.Since(start)
			}
			for i := range len(stream) / batch { // every key in, before the clock starts
				keys := stream[i*batch : (i+1)*batch]
				feed(ws[0], keys, false)
				feed(ws[1], keys, false)
				now += batch * benchStep
			}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				from := i * batch & (len(stream) - 1)
				keys := stream[from : from+batch]
				first := i % 2
				for k := range 2 {
					j := (first + k) % 2
					spent[j] += feed(ws[j], keys, j == 1)
				}
				now += batch * benchStep
			}
			n := float64(b.N) * batch
			b.ReportMetric(float64(spent[0].Nanoseconds())/n, "plain-ns/update")
			b.ReportMetric(float64(spent[1].Nanoseconds())/n, "warm-ns/update")
			b.ReportMetric(float64(spent[1])/float64(spent[0]), "x-plain")
			if s0, s1 := ws[0].Stats(), ws[1].Stats(); s0 != s1 {
				b.Fatalf("the warmed window's stats %+v, the other's %+v", s1, s0)
			}
		})
	}
}

// TestFloorPassUndoes: the floor's pass with sign -1 puts back what the
// pass with sign 1 did, so that timing the floor on a window's own total
// vector leaves the window as it was.
func TestFloorPassUndoes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	cols := make([]uint32, 1<<12)
	for i := range cols {
		cols[i] = rng.Uint32N(1 << 10)
	}
	for _, tc := range []struct{ from, n int }{{0, 1}, {0, 8}, {7, 100}, {1 << 11, 1000}, {5000, 3<<12 + 17}} {
		totals := make([]total, 1<<10)
		for i := range totals {
			totals[i] = total{uint64(rng.Uint32N(3)), rng.Int64N(7) - 3}
		}
		for i, c := range cols[:8] { // wrapping at the ends of the ranges
			totals[c] = []total{{math.MaxUint64, math.MaxInt64}, {0, math.MinInt64}}[i%2]
		}
		want := slices.Clone(totals)
		floorPass(totals, cols, tc.from, tc.n, 1)
		if tc.n > 1 && slices.Equal(totals, want) { // one update's in and out may be one key
			t.Fatalf("from %d, n %d: the pass changed nothing", tc.from, tc.n)
		}
		floorPass(totals, cols, tc.from, tc.n, ^uint64(0))
		if !slices.Equal(totals, want) {
			t.Errorf("from %d, n %d: undone, the totals differ", tc.from, tc.n)
		}
	}
}
