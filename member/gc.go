package member

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/acktor/acktor/cluster"
)

// gcFloor is how far the heap may grow past its live bytes before the
// collector runs, at most: a tracked topology's live heap is small (its
// roots in flight are bounded), and a member that decodes much of what
// others send (a counter's standby applies every batch again) collected
// dozens of times a second under GOGC's 100 % of a few MB.
const gcFloor = 64 << 20

// gcEvery is the shortest time between collections the tuner aims for: a
// member that collects more often gets twice the percentage, up to
// gcFloor's (past it, it collects as often as it must), and one that
// collects four times as seldom half, down to the percentage it started
// with. A member that allocates little so keeps a small heap, whose pages
// stay warm. A fixed 64 MB over the live bytes cost the three members of a
// batch word count 21 k page faults a run against 16–19 k with this pace,
// which ran 1.07× the tuples/s; a service with standbys, which collected
// up to 28 times a second under GOGC=100 and ran 0.82× as fast as under
// the fixed 64 MB, ran 1.03× as fast with this pace, and one without
// standbys 1.4×.
const gcEvery = 100 * time.Millisecond

// paceGC tunes the collector (tuneGC) for a member of a cluster of
// processes, which decodes what the others send, and leaves it alone on an
// embedded member: there a heap that grew 64 MB before each collection cost
// more in fresh pages and cache misses than the collections it saved (the
// word count's tracked runs at 8 ackers took 0.975× the CPU with GOGC=100,
// and 8 500 fewer page faults a run of 1M lines; over 4M lines 0.98×).
func paceGC(c cluster.Config) (stop func()) {
	if c.Provider == "embedded" {
		return func() {}
	}
	return tuneGC(gcFloor)
}

// nextPercent is the percentage after a collection that came interval
// after the one before, under percentage cur: doubled when collections
// come more often than gcEvery, halved when they come four times as
// seldom, and kept within [base, limit].
func nextPercent(cur, base, limit int, interval time.Duration) int {
	switch {
	case interval < gcEvery:
		cur *= 2
	case interval > 4*gcEvery:
		cur /= 2
	}
	return max(min(cur, limit), base)
}

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

// tuneGC sets the collector's percentage after every collection
// (nextPercent, at most gcPercent of the live heap) until the function it
// returns is called, which puts the old percentage back once no other
// caller still tunes (the first caller's floor holds for all). It leaves
// the collector alone when the environment sets GOGC: the user chose.
func tuneGC(floor uint64) (stop func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	tuner.Lock()
	defer tuner.Unlock()
	if tuner.users++; tuner.users == 1 {
		tuner.base = debug.SetGCPercent(100)
		tuner.stop = runTuner(floor, tuner.base)
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

// runTuner sets the percentage after each collection, when the live heap
// it reads was just measured, until stopped. Read on a timer instead, the
// percentage set for the minimum heap at the start held until the next
// tick, and a member's heap grew to 17 times its live bytes after its
// first collection: fresh memory, whose first touch is what a member's
// first second costs most on a virtual machine.
func runTuner(floor uint64, base int) (stop func()) {
	c := &gcChain{floor: floor, base: base, percent: base, last: time.Now(),
		sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	c.mu.Lock()
	defer c.mu.Unlock()
	debug.SetGCPercent(base) // until the first collection
	c.arm()
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.stopped = true
	}
}

// gcChain re-tunes after each collection: a cleanup on an object nothing
// references runs once a collection has found it unreachable, and arms the
// next one. It owns no goroutine; the runtime runs cleanups on its own.
type gcChain struct {
	mu      sync.Mutex
	stopped bool
	floor   uint64
	base    int
	percent int       // set last
	last    time.Time // of the collection before
	sample  []metrics.Sample
}

// arm leaves an object for the next collection to find: 64 bytes, since
// the runtime may pack tiny objects together, and a packed one's cleanup
// waits for its neighbours. c.mu is held.
func (c *gcChain) arm() {
	runtime.AddCleanup(new([64]byte), func(c *gcChain) { c.collected() }, c)
}

func (c *gcChain) collected() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return
	}
	c.tune()
	c.arm()
}

// tune sets the percentage for the time since the collection before and
// the live heap. c.mu is held.
func (c *gcChain) tune() {
	now := time.Now()
	interval := now.Sub(c.last)
	c.last = now
	metrics.Read(c.sample)
	if c.sample[0].Value.Kind() == metrics.KindUint64 {
		c.percent = nextPercent(c.percent, c.base, gcPercent(c.sample[0].Value.Uint64(), c.floor, c.base), interval)
		debug.SetGCPercent(c.percent)
	}
}
