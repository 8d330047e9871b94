package actors

import (
	"sync/atomic"
	"time"
)

// The tasks' dispatcher: Proto.Actor's default throughput (a mailbox run
// yields the processor to other goroutines after that many messages, and
// carries on), idle workers kept at most, and how long each waits for the
// next mailbox.
const (
	mailboxThroughput = 300
	idleWorkers       = 16
	workerWait        = 200 * time.Millisecond
)

// workers is the Proto.Actor dispatcher of a runtime's tasks. The
// library's default starts a goroutine for every run of a mailbox, whose
// stack then grows through the task's code again each time. Across
// members, where mailboxes empty and start over with every remote batch,
// growing stacks took 4.3 % of the members' CPU in a profile of a word
// count, and starting and ending goroutines 2 % more.
// workers keeps the goroutines it starts, each waiting a moment for the
// next mailbox before it ends.
type workers struct {
	throughput int
	wait       time.Duration
	next       chan func() // unbuffered: a send succeeds only into an idle worker
	idle       atomic.Int32
	maxIdle    int32 // idle workers kept at most; more end at once
}

// newWorkers makes a dispatcher of the given throughput that keeps up to
// maxIdle idle workers, each for wait.
func newWorkers(throughput, maxIdle int, wait time.Duration) *workers {
	return &workers{throughput: throughput, wait: wait, next: make(chan func()), maxIdle: int32(maxIdle)}
}

// Schedule runs fn on an idle worker, or on a new one.
func (w *workers) Schedule(fn func()) {
	select {
	case w.next <- fn:
	default:
		go w.work(fn)
	}
}

// Throughput is how many messages a mailbox run takes between yields.
func (w *workers) Throughput() int { return w.throughput }

// rest counts the calling worker idle, unless maxIdle are.
func (w *workers) rest() bool {
	for {
		n := w.idle.Load()
		if n >= w.maxIdle {
			return false
		}
		if w.idle.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// work runs fn, then the mailboxes it is handed, until none comes for
// w.wait or enough others are idle.
func (w *workers) work(fn func()) {
	var t *time.Timer
	for {
		fn()
		if !w.rest() {
			return
		}
		if t == nil {
			t = time.NewTimer(w.wait)
		} else {
			t.Reset(w.wait)
		}
		select {
		case fn = <-w.next:
			w.idle.Add(-1)
			t.Stop()
		case <-t.C:
			w.idle.Add(-1)
			return
		}
	}
}
