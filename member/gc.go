package member

import (
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

// tuner is the one GC tuner of the process: the collector's percentage is
// the process's, so members run in one process share it, and the last to
// end puts back the percentage the first found.
var tuner struct {
	sync.Mutex
	users int
	base  int
	stop  func()
}

// tuneGC sets the collector's percentage to gcPercent of the live heap,
// read every interval, until the function it returns is called, which
// puts the old percentage back once no other caller still tunes (the first
// caller's floor and interval hold for all). It leaves the collector alone
// when the environment sets GOGC: the user chose.
func tuneGC(floor uint64, every time.Duration) (stop func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	tuner.Lock()
	defer tuner.Unlock()
	if tuner.users++; tuner.users == 1 {
		tuner.base = debug.SetGCPercent(100)
		tuner.stop = runTuner(floor, tuner.base, every)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			tuner.Lock()
			defer tuner.Unlock()
			if tuner.users--; tuner.users == 0 {
				tuner.stop()
				debug.SetGCPercent(tuner.base)
			}
		})
	}
}

// runTuner sets the percentage now and then every interval, until stopped.
func runTuner(floor uint64, base int, every time.Duration) (stop func()) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	tune := func() {
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			debug.SetGCPercent(gcPercent(sample[0].Value.Uint64(), floor, base))
		}
	}
	tune()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				tune()
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
