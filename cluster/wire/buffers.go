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
// by the address of their first byte, until gRPC has marshalled them.
// Proto.Actor's endpoint writer sends the envelopes it serializes at once,
// and gRPC marshals a message before it looks at its stream, so bytes stay
// here only if a stream is closed for sending in between.
var lent sync.Map

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

// lend records that b went out as an Encoded's bytes.
func lend(b []byte) {
	if cap(b) > 0 {
		lent.Store(unsafe.SliceData(b), b)
	}
}

// giveBack releases the lent bytes among the envelopes of m, which gRPC
// has marshalled (or failed to): nothing reads them after that (gRPC keeps
// only what it marshalled, and no stats handler that would see m is set).
// It returns how many it released.
func giveBack(m *remote.RemoteMessage) int {
	n := 0
	for _, e := range m.GetMessageBatch().GetEnvelopes() {
		if cap(e.MessageData) == 0 {
			continue
		}
		if b, ok := lent.LoadAndDelete(unsafe.SliceData(e.MessageData)); ok && release(b.([]byte)) {
			n++
		}
	}
	return n
}

// codec is gRPC's proto codec, which Proto.Actor's remote streams use, but
// for giving back what an Encoded lent once its batch is marshalled.
type codec struct{ encoding.Codec }

func (c codec) Marshal(v any) ([]byte, error) {
	out, err := c.Codec.Marshal(v)
	if m, ok := v.(*remote.RemoteMessage); ok {
		giveBack(m)
	}
	return out, err
}

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
