package actors

import (
	"sync/atomic"
	"time"
)

// The tasks' dispatcher: Proto.Actor's default throughput (messages a
// mailbox takes before it yields), idle workers kept at most, and how long
// each waits for the next mailbox.
const (
	mailboxThroughput = 300
	idleWorkers       = 16
	workerWait        = 200 * time.Millisecond
)

// workers is the Proto.Actor dispatcher of a runtime's tasks. The
// library's default starts a goroutine for every run of a mailbox, whose
// stack then grows through the task's code again each time: across
// members, where mailboxes empty and start over with every remote batch,
// growing stacks and starting goroutines took 6 % of a member's CPU.
// workers keeps the goroutines it starts, each waiting a moment for the
// next mailbox before it ends.
type workers struct {
	throughput int
	wait       time.Duration
	next       chan func() // unbuffered: a send succeeds only into an idle worker
	idle       atomic.Int32
	max        int32 // idle workers kept at most; more end at once
}

// newWorkers makes a dispatcher that runs throughput messages of a
// mailbox before yielding and keeps up to max idle workers, each for wait.
func newWorkers(throughput, max int, wait time.Duration) *workers {
	return &workers{throughput: throughput, wait: wait, next: make(chan func()), max: int32(max)}
}

// Schedule runs fn on an idle worker, or on a new one.
func (w *workers) Schedule(fn func()) {
	select {
	case w.next <- fn:
	default:
		go w.work(fn)
	}
}

// Throughput is how many messages a mailbox run takes before it yields.
func (w *workers) Throughput() int { return w.throughput }

// rest counts the calling worker idle, unless max are.
func (w *workers) rest() bool {
	for {
		n := w.idle.Load()
		if n >= w.max {
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
