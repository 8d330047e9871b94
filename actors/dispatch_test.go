package actors

import (
	"bytes"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// goroutineID is the number runtime.Stack gives the calling goroutine.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	return string(bytes.Fields(buf)[1])
}

// TestWorkersRunEveryMailboxOnce: mailboxes scheduled from many goroutines
// at once each run once; no more workers stay idle than the bound, and
// they end when no work comes (synctest.Test fails if a goroutine of its
// bubble is left, and a lost mailbox deadlocks the bubble).
func TestWorkersRunEveryMailboxOnce(t *testing.T) {
	for _, maxIdle := range []int{0, 1, 4} {
		synctest.Test(t, func(t *testing.T) {
			w := newWorkers(300, maxIdle, 20*time.Millisecond)
			var ran [8 * 500]atomic.Int32
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					for i := range 500 {
						wg.Add(1)
						w.Schedule(func() { ran[g*500+i].Add(1); wg.Done() })
					}
				})
			}
			wg.Wait()
			for i := range ran {
				if n := ran[i].Load(); n != 1 {
					t.Fatalf("max idle %d: mailbox %d ran %d times", maxIdle, i, n)
				}
			}
			synctest.Wait() // every worker ran its last mailbox and waits, or ended
			if idle := w.idle.Load(); idle > int32(maxIdle) {
				t.Fatalf("max idle %d: %d idle workers", maxIdle, idle)
			}
			time.Sleep(w.wait) // on the bubble's clock: the idle workers end
		})
	}
}

// TestWorkersReuseAnIdleOne: a mailbox scheduled while a worker waits runs
// on that worker, not on a new goroutine.
func TestWorkersReuseAnIdleOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorkers(300, 1, time.Second)
		ids := make(chan string, 2)
		w.Schedule(func() { ids <- "1 " + goroutineID() })
		first := <-ids
		synctest.Wait() // the worker waits in its select
		if w.idle.Load() != 1 {
			t.Fatalf("%d idle workers, want 1", w.idle.Load())
		}
		w.Schedule(func() { ids <- "2 " + goroutineID() })
		if second := <-ids; second != "2 "+first[2:] {
			t.Fatalf("second mailbox: %q, want it on the idle worker (first %q)", second, first)
		}
		time.Sleep(w.wait)
	})
}
