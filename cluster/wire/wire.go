// Package wire is what acktor's members put on Proto.Actor's remote beyond
// the library's own serializer, without changing a byte of what crosses:
// messages a sender has already encoded (Encoded) into buffers that come
// back once gRPC has copied them out (Buffer), and tuple batches decoded in
// place. Importing it wraps Proto.Actor's serializer 0 and gRPC's proto
// codec, once for the process and before any remote can start; the tasks
// send Encoded only where that took (Installed). It lives apart from the
// cluster and the actors so that neither imports the other.
package wire

import (
	"fmt"
	"unsafe" // and go:linkname, for Proto.Actor's serializers

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/acktor/acktor/messages"
)

// serializers is Proto.Actor's registry of serializers, indexed by the id
// an envelope names. Its endpoint writer always names 0, the proto
// serializer, and the registry has no exported way to replace it.
//
//go:linkname serializers github.com/asynkron/protoactor-go/remote.serializers
var serializers []remote.Serializer

// protoSerializer is the type of Proto.Actor's serializer 0, as this
// package was written against it.
const protoSerializer = "*remote.protoSerializer"

// installed is set once, in init, before anything reads it.
var installed bool

// init wraps serializer 0 and gRPC's proto codec. Package remote's init,
// which registers the one, and gRPC's, which registers the other, have
// run, and no remote can have started: both registries are read without a
// lock. A Proto.Actor whose serializer 0 is another one is left alone, and
// its members send as the library does.
func init() {
	if len(serializers) > 0 && fmt.Sprintf("%T", serializers[0]) == protoSerializer && installCodec() {
		serializers[0] = serializer{serializers[0]}
		installed = true
	}
}

// Installed says whether serializer 0 and gRPC's proto codec are this
// package's: a remote may then be sent Encoded. Ask once every package's
// init has run.
func Installed() bool { return installed && ours() }

// Encoded is a message already in its wire form: Bytes are what
// proto.Marshal makes of a message of type Type (its full protobuf name).
// The serializer sends them as they are, so a sender that encodes once,
// into a buffer of Buffer's, can reuse the message it encoded at once, and
// the bytes are not copied again. Send one only to a remote, only once,
// and only once Installed: the receiver decodes a Type, and nothing in a
// member takes an Encoded itself. The bytes are the remote's from then on,
// whatever buffer they are in: once gRPC has copied them out, a buffer whose
// capacity is a power of two up to 16 MB goes back to Buffer's pools.
type Encoded struct {
	Type  string
	Bytes []byte
}

// The protobuf names of messages.TupleBatch and messages.AckBatch, as an
// Encoded's Type (TestTypeNames checks them against the schema).
const (
	TupleBatch = "acktor.TupleBatch"
	AckBatch   = "acktor.AckBatch"
)

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
		if m.Bytes == nil {
			return nil, fmt.Errorf("wire: an encoded %s with no bytes (serialized already: its bytes were lent)", m.Type)
		}
		if !lend(&lent, m.Bytes) {
			return nil, fmt.Errorf("wire: an encoded %s whose %d bytes another encoded message has lent", m.Type, len(m.Bytes))
		}
		b := m.Bytes
		m.Bytes = nil
		return b, nil
	}
	return s.Serializer.Serialize(msg)
}

func (s serializer) GetTypeName(msg any) (string, error) {
	if m, ok := msg.(*Encoded); ok {
		return m.Type, nil
	}
	return s.Serializer.GetTypeName(msg)
}

// Deserialize decodes b as a message of typeName. A name this binary does
// not know is an error here, where Proto.Actor's proto serializer would
// dereference nil and end the process.
func (s serializer) Deserialize(typeName string, b []byte) (any, error) {
	if typeName == TupleBatch {
		if m, ok := framedBatch(b); ok {
			held.move(unsafe.SliceData(b), unsafe.SliceData(m.Frame)) // Release finds it by its frame
			return m, nil
		}
	}
	defer Release(b) // protobuf-go copies what it decodes, and so does ackBatch: b is free once they have
	if typeName == AckBatch {
		if m, ok := ackBatch(b); ok {
			return m, nil
		}
	}
	if _, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(typeName)); err != nil {
		return nil, fmt.Errorf("wire: a message of type %q (%d bytes): %w", typeName, len(b), err)
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
