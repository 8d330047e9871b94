// Package wire is what acktor's members put on Proto.Actor's remote beyond
// the library's own serializer, without changing a byte of what crosses:
// messages a sender has already encoded (Encoded), and tuple batches
// decoded in place. The cluster installs it before a member's remote
// starts (Install); the tasks send Encoded only where it is (Installed).
// It lives apart from both so that neither imports the other.
package wire

import (
	"fmt"
	"sync"
	"sync/atomic"
	_ "unsafe" // go:linkname, for Proto.Actor's serializers

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/acktor/acktor/messages"
)

// serializers is Proto.Actor's registry of serializers, indexed by the id
// an envelope names. Its endpoint writer always names 0, the proto
// serializer, and the registry has no exported way to replace it.
//
//go:linkname serializers github.com/asynkron/protoactor-go/remote.serializers
var serializers []remote.Serializer

var (
	once      sync.Once
	installed atomic.Bool
)

// Install wraps Proto.Actor's serializer 0 in this package's, once for the
// process. Call it before any remote of the process starts: the endpoint
// readers and writers read the registry without a lock.
func Install() {
	once.Do(func() {
		serializers[0] = serializer{serializers[0]}
		installed.Store(true)
	})
}

// Installed says whether Install ran: a remote may then be sent Encoded.
func Installed() bool { return installed.Load() }

// Encoded is a message already in its wire form: Bytes are what
// proto.Marshal makes of a message of type Type (its full protobuf name).
// The serializer sends them as they are, so a sender that encodes once,
// into a buffer of its own, can reuse the message it encoded at once, and
// the bytes are not copied again. Send one only to a remote, and only once
// Installed: the receiver decodes a Type, and nothing in a member takes an
// Encoded itself.
type Encoded struct {
	Type  string
	Bytes []byte
}

// TupleBatch is the protobuf name of messages.TupleBatch, an Encoded's Type.
var TupleBatch = string((&messages.TupleBatch{}).ProtoReflect().Descriptor().FullName())

// AckBatch is the protobuf name of messages.AckBatch.
var AckBatch = string((&messages.AckBatch{}).ProtoReflect().Descriptor().FullName())

// serializer is the serializer it wraps, but for Encoded messages, which
// it sends as they are, and framed tuple batches, whose frame it decodes
// in place: protobuf-go copies every bytes field it decodes, and the
// envelope's bytes, already a copy of what gRPC read, are the batch's and
// nobody else's. On a member that takes many batches that copy was a
// quarter of all it allocated.
type serializer struct{ remote.Serializer }

func (s serializer) Serialize(msg any) ([]byte, error) {
	if m, ok := msg.(*Encoded); ok {
		if len(m.Type) == 0 {
			return nil, fmt.Errorf("wire: an encoded message of %d bytes names no type", len(m.Bytes))
		}
		return m.Bytes, nil
	}
	return s.Serializer.Serialize(msg)
}

func (s serializer) GetTypeName(msg any) (string, error) {
	if m, ok := msg.(*Encoded); ok {
		return m.Type, nil
	}
	return s.Serializer.GetTypeName(msg)
}

func (s serializer) Deserialize(typeName string, b []byte) (any, error) {
	if typeName == TupleBatch {
		if m, ok := framedBatch(b); ok {
			return m, nil
		}
	}
	return s.Serializer.Deserialize(typeName, b)
}

// framedBatch decodes the TupleBatch encoded in b if it holds only a
// from_task and a frame, the frame pointing into b; otherwise it says no,
// and protobuf-go decodes b (or says what is wrong with it).
func framedBatch(b []byte) (*messages.TupleBatch, bool) {
	m := &messages.TupleBatch{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, false
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return nil, false
			}
			m.FromTask, b = uint32(v), b[n:]
		case num == 9 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, false
			}
			m.Frame, b = v[:len(v):len(v)], b[n:]
		default:
			return nil, false
		}
	}
	return m, len(m.Frame) > 0 // protobuf-go decodes an empty frame as none
}

// FramePrefix appends to b what precedes a frame of size bytes in the
// encoding of a TupleBatch from task that holds only the frame, as
// proto.Marshal writes it: the frame's bytes follow it.
func FramePrefix(b []byte, task uint32, size int) []byte {
	if task != 0 {
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(task))
	}
	b = protowire.AppendTag(b, 9, protowire.BytesType)
	return protowire.AppendVarint(b, uint64(size))
}
