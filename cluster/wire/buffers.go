package wire

import (
	"math/bits"
	"sync"
	"unsafe"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
)

// An Encoded's bytes are lent to the remote when its serializer hands them
// out, and come back to the buffers once gRPC has marshalled the batch of
// envelopes that holds them into a buffer of its own. A member that sends
// a batch a millisecond then reuses a few buffers instead of allocating
// one a batch: on a worker of the three-member word count those were 30 MB
// a run, fresh pages the heap grew into and the collector then swept.

// classes are pools of buffers whose capacity is a power of two, one pool
// a power, up to 1<<(len(classes)-1) bytes; larger buffers are not kept.
var classes [25]sync.Pool

// lent holds the bytes of the Encoded messages the serializer handed out,
// by the address of their first byte, until gRPC has marshalled them. Not
// every lend comes back: Proto.Actor's endpoint writer drops the rest of
// the batch it is serializing when it learns that its peer is gone (a
// member that stops tells the others), and a panic in the writer drops its
// batch. Forgetting a lend is always safe (its bytes go to the collector
// instead), so lent keeps the lends of two generations of lentGeneration
// lends and forgets the older as the next one starts.
var lent lends[*byte]

// lentGeneration is how many lends a generation holds: more than the
// endpoint writers have in hand at once (a batch of a few envelopes each,
// at most Proto.Actor's batch size), and few enough that what a peer's
// leaving strands is soon forgotten.
const lentGeneration = 1024

type lends[K comparable] struct {
	mu       sync.Mutex
	now, old map[K][]byte
	n        int // lends into now
}

// lend records b in l by the address of its first byte (an Encoded's
// bytes that went out, a batch's bytes taken), unless they are out already
// (another Encoded shares them): false then.
func lend(l *lends[*byte], b []byte) bool {
	if cap(b) == 0 {
		return true // nothing to give back
	}
	return l.file(unsafe.SliceData(b), b)
}

// file records b under key p, unless p is out already: false then.
func (l *lends[K]) file(p K, b []byte) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.now[p]; ok {
		return false
	}
	if _, ok := l.old[p]; ok {
		return false
	}
	if l.now == nil || l.n == lentGeneration {
		l.old, l.now, l.n = l.now, make(map[K][]byte), 0
	}
	l.now[p] = b
	l.n++
	return true
}

// take returns the lent bytes at p and forgets them.
func (l *lends[K]) take(p K) ([]byte, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range []map[K][]byte{l.now, l.old} {
		if b, ok := m[p]; ok {
			delete(m, p)
			return b, true
		}
	}
	return nil, false
}

// move files the lend at from under to instead, if it is out.
func (l *lends[K]) move(from, to K) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range []map[K][]byte{l.now, l.old} {
		if b, ok := m[from]; ok {
			delete(m, from)
			m[to] = b
			return
		}
	}
}

// Buffer returns an empty buffer of capacity at least n, for an Encoded's
// Bytes: one given back by the remote if there is one.
func Buffer(n int) []byte {
	c := bits.Len(uint(max(n, 1) - 1))
	if c >= len(classes) {
		return make([]byte, 0, n)
	}
	if p, _ := classes[c].Get().(*[]byte); p != nil {
		return (*p)[:0]
	}
	return make([]byte, 0, 1<<c)
}

// release keeps b for Buffer if its capacity is one of the classes', and
// says whether it did.
func release(b []byte) bool {
	c := bits.Len(uint(cap(b)))
	if c == 0 || cap(b) != 1<<(c-1) || c > len(classes) {
		return false
	}
	b = b[:0]
	classes[c-1].Put(&b)
	return true
}

// giveBack releases the lent bytes among the envelopes of m, which gRPC
// has marshalled (or failed to). Nothing reads them after that: gRPC sends,
// retries and logs its own marshalled copy, and it would hand m itself only
// to a stats handler, an interceptor or its request tracing, none of which
// a member sets (cluster/node.go). It returns how many it released.
func giveBack(m *remote.RemoteMessage) int {
	n := 0
	for _, e := range m.GetMessageBatch().GetEnvelopes() {
		if cap(e.MessageData) == 0 {
			continue
		}
		if b, ok := lent.take(unsafe.SliceData(e.MessageData)); ok && release(b) {
			n++
		}
	}
	return n
}

// codec is gRPC's proto codec, which Proto.Actor's remote streams use, but
// for giving back what an Encoded lent once its batch is marshalled, and
// for marshalling remote messages into buffers of Buffer's (sent.go).
type codec struct{ encoding.Codec }

func (c codec) Marshal(v any) ([]byte, error) {
	m, ok := v.(*remote.RemoteMessage)
	if !ok {
		return c.Codec.Marshal(v)
	}
	out, err := marshalRemote(m)
	giveBack(m)
	return out, err
}

// Unmarshal decodes as the proto codec does, but for the envelopes of 4
// KiB or more in a remote's batch, whose bytes go in buffers of Buffer's
// (decodeRemote).
func (c codec) Unmarshal(data []byte, v any) error {
	if m, ok := v.(*remote.RemoteMessage); ok && decodeRemote(data, m) {
		return nil
	}
	return c.Codec.Unmarshal(data, v)
}

// ours says whether gRPC's proto codec is still this package's: another
// package's init that runs later could register its own.
var ours = sync.OnceValue(func() bool {
	_, ok := encoding.GetCodec(grpcproto.Name).(codec)
	return ok
})

// installCodec replaces gRPC's proto codec with codec, once, from init:
// gRPC reads its codecs without a lock.
func installCodec() bool {
	base := encoding.GetCodec(grpcproto.Name)
	if base == nil {
		return false
	}
	encoding.RegisterCodec(codec{base})
	return true
}
