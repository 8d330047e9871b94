package ledger

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

// BenchmarkLedgerAck folds acks into a working set of records in flight,
// touched in random order (at 1M the table no longer fits in cache).
func BenchmarkLedgerAck(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("inflight=%d", n), func(b *testing.B) {
			l := New(Config{Generations: 3, ExpectedInFlight: n})
			ids := make([]uint64, n)
			rng := rand.New(rand.NewPCG(1, 2))
			for i := range ids {
				ids[i] = uint64(i)<<8 | 5 // spout-style: task in the high bits, sequence below
				l.Init(ids[i], 1, rng.Uint64()|1)
			}
			rng.Shuffle(n, func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				l.Ack(ids[i%n], uint64(i)<<1|1)
			}
		})
	}
}

// BenchmarkLedgerLifecycle is a root's whole life: init, ten acks, done.
func BenchmarkLedgerLifecycle(b *testing.B) {
	l := New(Config{Generations: 3, ExpectedInFlight: 10_000})
	const inflight = 5_000
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		id := uint64(i)
		l.Init(id, 1, 0xff)
		for k := uint64(0); k < 8; k++ {
			l.Ack(id-inflight, 1<<k)
		}
	}
}

// tracker is what a per-root record costs in each design measured.
type tracker interface{ open(id uint64) }

type ledgerTracker struct{ l *Ledger }

func (t ledgerTracker) open(id uint64) { t.l.Init(id, 1, id|1) }

// mapTracker is the same record in a Go map.
type mapTracker map[uint64]mapRecord

type mapRecord struct {
	check uint64
	task  uint32
	gen   uint8
}

func (t mapTracker) open(id uint64) { t[id] = mapRecord{check: id | 1, task: 1} }

// treeTracker is tracking without the XOR trick: the set of tuple ids still
// pending per root (the paper's "without tracker" line of experiment 1).
type treeTracker map[uint64]map[uint64]struct{}

const treeTuples = 10 // a line of ten words in flight

func (t treeTracker) open(id uint64) {
	set := make(map[uint64]struct{}, treeTuples)
	for k := uint64(0); k < treeTuples; k++ {
		set[id<<8|k] = struct{}{}
	}
	t[id] = set
}

// BenchmarkLedgerMemory reports heap bytes per record in flight at the
// paper's experiment 1 sizes (and 1M, the goal's size), for the ledger and
// the two baselines, in one run.
func BenchmarkLedgerMemory(b *testing.B) {
	kinds := []struct {
		name string
		make func(n int) tracker
	}{
		{"ledger", func(n int) tracker { return ledgerTracker{New(Config{Generations: 3, ExpectedInFlight: n})} }},
		{"map", func(n int) tracker { return make(mapTracker, n) }},
		{"tree", func(n int) tracker { return make(treeTracker, n) }},
	}
	for _, n := range []int{100_000, 500_000, 900_000, 1_000_000} {
		for _, k := range kinds {
			b.Run(fmt.Sprintf("%s/records=%d", k.name, n), func(b *testing.B) {
				var perRecord float64
				for i := 0; i < b.N; i++ {
					var before, after runtime.MemStats
					b.StopTimer()
					runtime.GC()
					runtime.ReadMemStats(&before)
					b.StartTimer()
					t := k.make(n)
					for id := uint64(1); id <= uint64(n); id++ {
						t.open(id)
					}
					b.StopTimer()
					runtime.GC()
					runtime.ReadMemStats(&after)
					perRecord = float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
					runtime.KeepAlive(t)
					b.StartTimer()
				}
				b.ReportMetric(perRecord, "bytes/record")
				b.ReportMetric(float64(n)/b.Elapsed().Seconds()*float64(b.N), "records/s")
			})
		}
	}
}

// BenchmarkLedgerRotate times a rotation that expires 1 000 stragglers
// spread over a table of 1M records, the worst case (a full scan), reported
// as rotate-ms. The setup is part of ns/op: it dwarfs the rotation.
func BenchmarkLedgerRotate(b *testing.B) {
	const n = 1_000_000
	var spent time.Duration
	for i := 0; i < b.N; i++ {
		l := New(Config{Generations: 2, ExpectedInFlight: n})
		for id := uint64(1); id <= n; id++ {
			l.Init(id, 1, 1)
		}
		l.Rotate(nil)
		for id := uint64(1); id <= n; id++ {
			if id%1000 != 0 {
				l.Ack(id, 1)
			}
		}
		start := time.Now()
		l.Rotate(nil)
		spent += time.Since(start)
		if l.Len() != 0 {
			b.Fatalf("%d records left", l.Len())
		}
	}
	b.ReportMetric(float64(spent.Microseconds())/1000/float64(b.N), "rotate-ms")
}

// BenchmarkLedgerLoad is a root's whole life (init, three acks, done) with
// 1024 roots in flight in a table sized for 1.1× and for 2.2× that: 80 %
// and 40 % full. The acker sizes its ledger for twice its share (roomy).
func BenchmarkLedgerLoad(b *testing.B) {
	const inflight = 1024
	for _, sized := range []int{1126, 2252} {
		b.Run(fmt.Sprintf("inflight=%d/sized-for=%d", inflight, sized), func(b *testing.B) {
			l := New(Config{Generations: 3, ExpectedInFlight: sized})
			id := func(i int) uint64 { return uint64(i+inflight)<<8 | 3 }
			for i := -inflight; i < 0; i++ {
				l.Init(id(i), 1, 0xff)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				l.Init(id(i), 1, 0xff)
				old := id(i - inflight)
				l.Ack(old, 0x0f)
				l.Ack(old, 0x30)
				if o := l.Ack(old, 0xc0); o.Status != Completed {
					b.Fatalf("root %d: %v", i-inflight, o.Status)
				}
			}
			b.ReportMetric(float64(l.Len())/float64(len(l.slots)), "load")
		})
	}
}
