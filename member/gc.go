package member

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// gcFloor is how far the heap may grow past its live bytes before the
// collector runs, at least: a tracked topology's live heap is small (its
// roots in flight are bounded) while it allocates fast, more so on a member
// that decodes what others send, and GOGC's 100 % of a few MB made a
// member collect dozens of times a second, a fifth of its CPU.
const gcFloor = 64 << 20

// gcPercent is the GOGC that lets the heap grow by floor over live bytes,
// and never less than base. A live heap under the runtime's minimum counts
// as that minimum, which GOGC scales too: a larger percentage would let
// the heap grow past floor.
func gcPercent(live, floor uint64, base int) int {
	if p := floor * 100 / max(live, minHeap); p > uint64(base) {
		return int(p)
	}
	return base
}

// minHeap is the Go runtime's smallest heap goal at GOGC=100.
const minHeap = 4 << 20

// tuneGC sets the collector's percentage to gcPercent of the live heap,
// read every interval, until the function it returns is called, which
// puts the old percentage back. It leaves the collector alone when the
// environment sets GOGC: the user chose.
func tuneGC(ctx context.Context, floor uint64, every time.Duration) (stop func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	base := debug.SetGCPercent(100)
	tune := func() {
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			debug.SetGCPercent(gcPercent(sample[0].Value.Uint64(), floor, base))
		}
	}
	tune()
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				tune()
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
		debug.SetGCPercent(base)
	}
}
