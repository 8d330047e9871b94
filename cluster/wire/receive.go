package wire

import (
	"unicode/utf8"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// A member gets the bytes of each message of 4 KiB or more (pooledFrom)
// that another sends it in a buffer of Buffer's instead of a fresh copy,
// and gives the buffer back once the message is decoded (a tuple batch's
// frame: Release): gRPC reads a batch of envelopes into a pooled buffer,
// and protobuf-go copied every envelope's bytes out of it, fresh memory for
// every message taken. On the driver of the three-member word count that
// copy was half of all it allocated (49 of 93 MB a run), and on a virtual
// machine the first touch of a fresh page is dear.

// held holds the buffers of the messages taken, by the address of their
// first byte until serializer 0 decodes them, then a framed batch's by its
// frame's first byte until the frame is decoded. A batch nobody decodes
// (it went to a dead letter, or on to another member) is forgotten after
// two generations, like a lend: its buffer then goes to the collector.
var held lends[*byte]

// Release gives back the buffer that f came in, f being a taken message's
// bytes or a framed batch's frame, once what it holds has been copied out
// (nothing may read f after); bytes that did not come in a buffer of
// Buffer's are left alone. It says whether it gave one back.
func Release(f []byte) bool {
	if cap(f) < pooledFrom/2 { // a frame starts a few bytes into its buffer
		return false
	}
	b, ok := held.take(unsafe.SliceData(f))
	return ok && release(b)
}

// decodeRemote decodes data as gRPC's proto codec would into m, but for
// the bytes of the envelopes in a batch that serializer 0 decodes, which it
// copies into buffers of Buffer's if they are large enough (pooledFrom):
// the serializer gives each back once it has decoded it, or, for a framed
// tuple batch, once the frame is (Release). It says no, and decodes
// nothing, for an encoding it does not take apart by hand (another kind of
// remote message, a field it does not know, one a message repeats):
// protobuf-go decodes that as before, and says what is wrong with it.
func decodeRemote(data []byte, m *remote.RemoteMessage) bool {
	num, typ, n := protowire.ConsumeTag(data)
	if n < 0 || num != 1 || typ != protowire.BytesType {
		return false
	}
	v, k := protowire.ConsumeBytes(data[n:])
	if k < 0 || n+k != len(data) {
		return false
	}
	batch := &remote.MessageBatch{}
	if !decodeBatch(v, batch) {
		return false
	}
	m.Reset()
	m.MessageType = &remote.RemoteMessage_MessageBatch{MessageBatch: batch}
	for _, e := range batch.Envelopes {
		if e.SerializerId == 0 && len(e.MessageData) >= pooledFrom { // serializer 0 gives it back (Deserialize)
			b := append(Buffer(len(e.MessageData)), e.MessageData...)
			if lend(&held, b) { // fresh from Buffer: never held already
				e.MessageData = b
				continue
			}
		}
		if e.MessageData != nil { // protobuf-go's copy, where data is gRPC's to reuse
			e.MessageData = append(make([]byte, 0, len(e.MessageData)), e.MessageData...)
		}
	}
	return true
}

// decodeBatch decodes a MessageBatch, its envelopes' bytes pointing into b.
func decodeBatch(b []byte, m *remote.MessageBatch) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType {
			return false
		}
		v, k := protowire.ConsumeBytes(b[n:])
		if k < 0 {
			return false
		}
		b = b[n+k:]
		switch num {
		case 1:
			if !utf8.Valid(v) {
				return false
			}
			m.TypeNames = append(m.TypeNames, string(v))
		case 2, 4:
			pid := &actor.PID{}
			if proto.Unmarshal(v, pid) != nil {
				return false
			}
			if num == 2 {
				m.Targets = append(m.Targets, pid)
			} else {
				m.Senders = append(m.Senders, pid)
			}
		case 3:
			e := &remote.MessageEnvelope{}
			if !decodeEnvelope(v, e) {
				return false
			}
			m.Envelopes = append(m.Envelopes, e)
		default:
			return false
		}
	}
	return true
}

// decodeEnvelope decodes a MessageEnvelope, its bytes pointing into b.
func decodeEnvelope(b []byte, e *remote.MessageEnvelope) bool {
	var seen uint16
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num < 1 || num > 8 || seen&(1<<num) != 0 {
			return false
		}
		seen |= 1 << num
		b = b[n:]
		if num == 2 || num == 6 {
			if typ != protowire.BytesType {
				return false
			}
			v, k := protowire.ConsumeBytes(b)
			if k < 0 {
				return false
			}
			b = b[k:]
			if num == 2 {
				e.MessageData = nil // protobuf-go's for no bytes
				if len(v) > 0 {
					e.MessageData = v[:len(v):len(v)]
				}
				continue
			}
			e.MessageHeader = &remote.MessageHeader{}
			if proto.Unmarshal(v, e.MessageHeader) != nil {
				return false
			}
			continue
		}
		if typ != protowire.VarintType {
			return false
		}
		x, k := protowire.ConsumeVarint(b)
		if k < 0 {
			return false
		}
		b = b[k:]
		switch num {
		case 1:
			e.TypeId = int32(x)
		case 3:
			e.Target = int32(x)
		case 4:
			e.Sender = int32(x)
		case 5:
			e.SerializerId = int32(x)
		case 7:
			e.TargetRequestId = uint32(x)
		case 8:
			e.SenderRequestId = uint32(x)
		}
	}
	return true
}
