package actors

import (
	"bytes"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// goroutineID is the number runtime.Stack gives the calling goroutine.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	return string(bytes.Fields(buf)[1])
}

// TestWorkersRunEveryMailboxOnce: mailboxes scheduled from many goroutines
// at once each run once; no more idle workers stay than the bound, and
// they end when no work comes.
func TestWorkersRunEveryMailboxOnce(t *testing.T) {
	for _, max := range []int{0, 1, 4} {
		w := newWorkers(300, max, 20*time.Millisecond)
		var ran atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 500 {
					wg.Add(1)
					w.Schedule(func() { ran.Add(1); wg.Done() })
				}
			})
		}
		wg.Wait()
		if ran.Load() != 4000 {
			t.Fatalf("max %d: %d runs, want 4000", max, ran.Load())
		}
		if idle := w.idle.Load(); idle > int32(max) {
			t.Fatalf("max %d: %d idle workers", max, idle)
		}
	}
	waitWorkersEnd(t)
}

// waitWorkersEnd fails t unless every worker goroutine ends within 5 s.
// (goleak would see the goroutines other tests' actor systems leave.)
func waitWorkersEnd(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		n := bytes.Count(buf, []byte("actors.(*workers).work("))
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d worker goroutines left after 5 s", n)
		}
	}
}

// TestWorkersReuseAnIdleOne: a mailbox scheduled while a worker waits runs
// on that worker, not on a new goroutine.
func TestWorkersReuseAnIdleOne(t *testing.T) {
	w := newWorkers(300, 1, time.Second)
	ids := make(chan string, 2)
	w.Schedule(func() { ids <- goroutineID() })
	first := <-ids
	for w.idle.Load() != 1 {
		time.Sleep(time.Millisecond)
	}
	w.Schedule(func() { ids <- goroutineID() })
	if second := <-ids; second != first {
		t.Fatalf("second mailbox ran on goroutine %s, want the idle worker %s", second, first)
	}
	waitWorkersEnd(t) // after its wait
}
