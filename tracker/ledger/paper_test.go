package ledger

import (
	"runtime"
	"testing"
)

// Each test here checks a sentence of the tracking paper, cited at its end.

// TestPaperFigure3 walks figure 3: root 01001 emits tuples 01010 and 01011;
// processor 1 turns 01010 into 01100, processor 2 turns 01011 into 01101, and
// processor 3 consumes 01100 and 01101. checkValue goes 00001, 00111, 00001,
// 00000 (the paper prints the intermediate values).
//
// Reference: the tracking paper §3.3, figure 3 (a)–(d).
func TestPaperFigure3(t *testing.T) {
	const spring, task = 0b01001, 3
	l := New(Config{Generations: 2})
	steps := []struct {
		init  bool
		delta uint64
		check uint64
	}{
		{true, 0b01010 ^ 0b01011, 0b00001},  // (a) the spring emits two tuples
		{false, 0b01010 ^ 0b01100, 0b00111}, // (b) processor 1
		{false, 0b01011 ^ 0b01101, 0b00001}, // (c) processor 2
		{false, 0b01100 ^ 0b01101, 0b00000}, // (d) processor 3 emits nothing
	}
	for i, s := range steps {
		var o Outcome
		if s.init {
			o = l.Init(spring, task, s.delta)
		} else {
			o = l.Ack(spring, s.delta)
		}
		if s.check != 0 {
			if o.Status != Pending {
				t.Fatalf("step %c: %v, want pending", 'a'+i, o.Status)
			}
			if j, ok := l.find(mix(spring)); !ok || l.slots[j].check() != s.check {
				t.Fatalf("step %c: checkValue %05b, want %05b", 'a'+i, l.slots[j].check(), s.check)
			}
			continue
		}
		if o.Status != Completed || o.Task != task {
			t.Fatalf("step %c: %+v, want completed for task %d", 'a'+i, o, task)
		}
	}
	if l.Len() != 0 {
		t.Fatal("the finished record was not removed from memory")
	}
	// Reference: the tracking paper §3.3, figure 3.
}

// TestPaperNonZeroMeansFailure: a tree with an unprocessed tuple keeps a
// non-zero checkValue and the spring's task is told to resend it when the
// record times out.
//
// Reference: the tracking paper §3.3 ("if a tuple is lost ... the result is not 0, and
// the task in the record is told to resend the root").
func TestPaperNonZeroMeansFailure(t *testing.T) {
	l := New(Config{Generations: 2})
	l.Init(0b01001, 3, 0b01010^0b01011)
	l.Ack(0b01001, 0b01010^0b01100) // 01011 and 01100 are never acked
	var told []uint32
	for range 2 {
		l.Rotate(func(spring uint64, task uint32) { told = append(told, task) })
	}
	if len(told) != 1 || told[0] != 3 {
		t.Fatalf("told %v, want task 3 once", told)
	}
	// Reference: the tracking paper §3.3.
}

// TestPaperMemoryPerRecord: a tracking record costs about 20 bytes whatever
// the size of its tree. We hold the table to at most 24 bytes per record in
// flight, slack included (BenchmarkLedgerMemory measures it against baselines).
//
// Reference: the tracking paper §2 and §3.1 ("about 20 bytes of memory per tuple").
func TestPaperMemoryPerRecord(t *testing.T) {
	const n = 200_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	l := New(Config{Generations: 3, ExpectedInFlight: n})
	for i := uint64(1); i <= n; i++ {
		l.Init(i, 1, i)
		for k := uint64(0); k < 10; k++ { // a tree of ten tuples per root costs nothing more
			l.Ack(i, k<<32|1)
			l.Ack(i, k<<32|1)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perRecord := float64(after.HeapAlloc-before.HeapAlloc) / n
	if l.Len() != n || perRecord > 24 {
		t.Fatalf("%d records, %.1f bytes each; want %d records at <= 24 bytes", l.Len(), perRecord, n)
	}
	runtime.KeepAlive(l)
	// Reference: the tracking paper §3.1.
}
