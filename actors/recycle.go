package actors

import (
	"sync"

	"github.com/acktor/acktor/cluster/wire"
	"github.com/acktor/acktor/messages"
)

// recycler hands the messages a task has consumed to the next task that
// builds one, arrays and all: the tracking messages (Track, AckBatch,
// Completed), which user code never sees and their receivers keep nothing
// of, and the tuple batches of processors that keep no tuple past Process
// (Reusers, and the runtime's own Counter) once every tuple is done.
// Reusing them spares the allocation and zeroing of their arrays, a few
// words per tuple per hop, and the collections that churn would bring on:
// with its roots in flight bounded, a tracked topology's live heap is
// small, so the collector runs often. A sender never recycles what it
// sent, since a message to another member is serialised after Send
// returns; its receiver there recycles its own copy. A tuple batch for
// another member is the exception: it goes as a framed copy, and its
// columns are recycled as it leaves (sendTuples).
//
// AckBatches come from and go back to cluster/wire's pool (wire.Acks),
// which the remote's serializer decodes other members' ack batches into.
type recycler struct {
	tracks    sync.Pool // *messages.Track
	completed sync.Pool // *messages.Completed
	tuples    sync.Pool // *messages.TupleBatch
}

// tupleBatch returns an empty batch from task, with room for n tuples if it
// is a new one, and anchor arrays if tracked.
func (r *recycler) tupleBatch(task uint32, n int, tracked bool) *messages.TupleBatch {
	if b, ok := r.tuples.Get().(*messages.TupleBatch); ok {
		*b = messages.TupleBatch{FromTask: task, AnchorCounts: b.AnchorCounts[:0], ValueCounts: b.ValueCounts[:0],
			Values: b.Values[:0], ContentIds: b.ContentIds[:0], Times: b.Times[:0],
			SpringIds: b.SpringIds[:0], TupleIds: b.TupleIds[:0]}
		return b
	}
	b := &messages.TupleBatch{
		FromTask:     task,
		AnchorCounts: make([]uint32, 0, n),
		ValueCounts:  make([]uint32, 0, n),
		Values:       make([]string, 0, n),
		ContentIds:   make([]uint64, 0, n),
		Times:        make([]int64, 0, n),
	}
	if tracked {
		b.SpringIds = make([]uint64, 0, n)
		b.TupleIds = make([]uint64, 0, n)
	}
	return b
}

// columns returns a recycled batch whose arrays a frame can be decoded
// into, or nil (none, or no recycler).
func (r *recycler) columns() *messages.TupleBatch {
	if r == nil {
		return nil
	}
	b, _ := r.tuples.Get().(*messages.TupleBatch)
	return b
}

// track returns an empty Track from task.
func (r *recycler) track(task uint32) *messages.Track {
	t, ok := r.tracks.Get().(*messages.Track)
	if !ok {
		return &messages.Track{Task: task}
	}
	*t = messages.Track{Task: task, SpringIds: t.SpringIds[:0], InitXors: t.InitXors[:0]}
	return t
}

// ackBatch returns an empty AckBatch, with room for n entries if it is a
// new one.
func (r *recycler) ackBatch(n int) *messages.AckBatch {
	if b := wire.Acks(); b != nil {
		return b
	}
	return &messages.AckBatch{SpringIds: make([]uint64, 0, n), XorDeltas: make([]uint64, 0, n)}
}

// completedOf wraps ids in a Completed and returns an empty array to
// gather the next ids in (nil when none was recycled).
func (r *recycler) completedOf(ids []uint64) (*messages.Completed, []uint64) {
	m, ok := r.completed.Get().(*messages.Completed)
	if !ok {
		return &messages.Completed{SpringIds: ids}, nil
	}
	spare := m.SpringIds[:0]
	*m = messages.Completed{SpringIds: ids}
	return m, spare
}

// The receivers' side: m has been read and nothing points into it.
func (r *recycler) doneTrack(m *messages.Track)         { r.tracks.Put(m) }
func (r *recycler) doneAcks(m *messages.AckBatch)       { wire.DoneAcks(m) }
func (r *recycler) doneCompleted(m *messages.Completed) { r.completed.Put(m) }

// doneTuples takes a batch whose tuples are all done; its values are let go
// at once, not when the array is next filled.
func (r *recycler) doneTuples(m *messages.TupleBatch) {
	clear(m.Values)
	r.tuples.Put(m)
}
