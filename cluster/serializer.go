package cluster

import (
	"sync"
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

var frameOnce sync.Once

// keepFrames makes every member of this process decode a tuple batch that
// crosses as a frame without copying the frame: protobuf-go copies every
// bytes field it decodes, and the envelope's bytes, already a copy of what
// gRPC read, are the batch's and nobody else's. On a member that takes many
// batches that copy was a quarter of all it allocated. What goes on the
// wire does not change.
func keepFrames() {
	frameOnce.Do(func() { serializers[0] = frameSerializer{serializers[0]} })
}

var tupleBatchName = string((&messages.TupleBatch{}).ProtoReflect().Descriptor().FullName())

// frameSerializer is the serializer it wraps, but for a framed TupleBatch.
type frameSerializer struct{ remote.Serializer }

func (s frameSerializer) Deserialize(typeName string, b []byte) (any, error) {
	if typeName == tupleBatchName {
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
