package wire

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/acktor/acktor/messages"
)

// bigFrame and bigAckBatch are as large as what members pool.
var (
	bigFrame    = []byte(strings.Repeat("a frame of tuples ", pooledFrom/16))
	bigAckBatch = &messages.AckBatch{SpringIds: make([]uint64, pooledFrom/16), XorDeltas: make([]uint64, pooledFrom/16)}
)

// remoteMessages are batches of envelopes as members send them, and the
// other remote messages, which protobuf-go decodes.
func remoteMessages(t testing.TB) []*remote.RemoteMessage {
	framed, err := proto.Marshal(&messages.TupleBatch{FromTask: 4, Frame: bigFrame})
	if err != nil {
		t.Fatal(err)
	}
	ack, _ := proto.Marshal(&messages.AckBatch{SpringIds: []uint64{1}, XorDeltas: []uint64{2}})
	bigAck, _ := proto.Marshal(bigAckBatch)
	batch := func(b *remote.MessageBatch) *remote.RemoteMessage {
		return &remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: b}}
	}
	return []*remote.RemoteMessage{
		batch(&remote.MessageBatch{
			TypeNames: []string{TupleBatch, AckBatch},
			Targets:   []*actor.PID{{Address: "127.0.0.1:1", Id: "split/0"}, {Address: "127.0.0.1:1", Id: "count/1", RequestId: 3}},
			Envelopes: []*remote.MessageEnvelope{
				{MessageData: framed, Target: 1},
				{TypeId: 1, MessageData: ack, Sender: 0, SenderRequestId: 9}, // too small to pool
				{TypeId: 1, MessageData: bigAck},
				{MessageData: framed, TargetRequestId: 7},
			},
			Senders: []*actor.PID{{Address: "127.0.0.1:2", Id: "acker/0"}},
		}),
		batch(&remote.MessageBatch{
			TypeNames: []string{"cluster.GrainRequest", TupleBatch},
			Envelopes: []*remote.MessageEnvelope{
				{MessageData: []byte("request"), MessageHeader: &remote.MessageHeader{HeaderData: map[string]string{"k": "v"}}},
				{TypeId: 1, SerializerId: 1, MessageData: framed}, // another serializer's: not held
				{TypeId: 1},                   // no bytes
				{TypeId: 5, MessageData: ack}, // a type id past the names
				{TypeId: -1, Target: -2, Sender: 1 << 30},
			},
		}),
		batch(&remote.MessageBatch{}),
		{MessageType: &remote.RemoteMessage_ConnectRequest{ConnectRequest: &remote.ConnectRequest{
			ConnectionType: &remote.ConnectRequest_ServerConnection{ServerConnection: &remote.ServerConnection{SystemId: "s", Address: "a"}}}}},
		{MessageType: &remote.RemoteMessage_DisconnectRequest{DisconnectRequest: &remote.DisconnectRequest{}}},
		{},
	}
}

// TestDecodeRemoteAgrees: gRPC's proto codec, as this package wraps it,
// decodes what members send as protobuf-go does, but for the bytes of the
// envelopes serializer 0 decodes, which it copies into buffers of Buffer's
// and holds until they are released; nothing it decoded points into what
// gRPC gave it.
func TestDecodeRemoteAgrees(t *testing.T) {
	c, ok := encoding.GetCodec(grpcproto.Name).(codec)
	if !ok {
		t.Fatalf("gRPC's proto codec is %T, not this package's", encoding.GetCodec(grpcproto.Name))
	}
	defer held.reset()
	for i, m := range remoteMessages(t) {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got := &remote.RemoteMessage{}
		if err := c.Unmarshal(b, got); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if !proto.Equal(got, m) {
			t.Fatalf("message %d decoded as %v, want %v", i, got, m)
		}
		batch := got.GetMessageBatch()
		for j, e := range batch.GetEnvelopes() {
			if len(e.MessageData) > 0 && within(e.MessageData, b) {
				t.Errorf("message %d, envelope %d: its bytes point into gRPC's buffer", i, j)
			}
			ours := e.SerializerId == 0 && len(e.MessageData) >= pooledFrom
			if isHeld := len(e.MessageData) > 0 && held.out(unsafe.SliceData(e.MessageData)); isHeld != ours {
				t.Errorf("message %d, envelope %d: held %v, want %v", i, j, isHeld, ours)
			}
		}
	}
}

// TestReleaseGivesBack: a framed batch decoded from a held buffer gives the
// buffer back once, when its frame is released; a batch or any other
// message protobuf-go decodes gives it back at once; a frame of any other
// bytes releases nothing.
func TestReleaseGivesBack(t *testing.T) {
	c := encoding.GetCodec(grpcproto.Name).(codec)
	defer held.reset()
	columns, _ := proto.Marshal(&messages.TupleBatch{FromTask: 2, Times: make([]int64, pooledFrom/8)})
	framed, _ := proto.Marshal(&messages.TupleBatch{FromTask: 4, Frame: bigFrame})
	ack, _ := proto.Marshal(bigAckBatch)
	m := &remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: &remote.MessageBatch{
		TypeNames: []string{TupleBatch, AckBatch},
		Envelopes: []*remote.MessageEnvelope{{MessageData: framed}, {MessageData: columns}, {TypeId: 1, MessageData: ack}},
	}}}
	b, _ := proto.Marshal(m)
	got := &remote.RemoteMessage{}
	if err := c.Unmarshal(b, got); err != nil {
		t.Fatal(err)
	}
	env := got.GetMessageBatch().Envelopes
	dec, err := remote.Deserialize(env[0].MessageData, TupleBatch, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := dec.(*messages.TupleBatch).Frame
	if !within(f, env[0].MessageData) {
		t.Fatal("the frame does not point into the held buffer")
	}
	if held.out(unsafe.SliceData(env[0].MessageData)) || !held.out(unsafe.SliceData(f)) {
		t.Error("the held buffer is not filed under its frame")
	}
	if _, err := remote.Deserialize(env[1].MessageData, TupleBatch, 0); err != nil {
		t.Fatal(err)
	}
	if held.out(unsafe.SliceData(env[1].MessageData)) {
		t.Error("a batch protobuf-go decoded still holds its buffer")
	}
	if !held.out(unsafe.SliceData(env[2].MessageData)) {
		t.Fatal("an ack batch's bytes are not held")
	}
	if ack, err := remote.Deserialize(env[2].MessageData, AckBatch, 0); err != nil || !proto.Equal(ack.(*messages.AckBatch), bigAckBatch) {
		t.Fatalf("the ack batch decoded as %v, %v", ack, err)
	}
	if held.out(unsafe.SliceData(env[2].MessageData)) {
		t.Error("an ack batch decoded still holds its buffer")
	}
	if !Release(f) {
		t.Fatal("releasing the frame gave nothing back")
	}
	if Release(f) {
		t.Error("releasing the frame twice gave its buffer back twice")
	}
	if Release([]byte("a frame nobody held")) || Release(nil) {
		t.Error("a frame of other bytes released a buffer")
	}
}

func FuzzDecodeRemote(f *testing.F) {
	for _, m := range remoteMessages(f) {
		b, _ := proto.Marshal(m)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { agreeRemote(t, 0, b) })
}

// TestDecodeRemoteAgreesOnAnyBytes: on envelopes made of their fields in
// any order, repeated, truncated, of another wire type or unknown, the
// codec agrees with protobuf-go: the same message, or both an error.
func TestDecodeRemoteAgreesOnAnyBytes(t *testing.T) {
	defer held.reset()
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range 3000 {
		agreeRemote(t, i, randomRemote(rng))
	}
}

// agreeRemote fails t unless the codec and protobuf-go decode b alike.
func agreeRemote(t *testing.T, i int, b []byte) {
	t.Helper()
	want := &remote.RemoteMessage{}
	werr := proto.Unmarshal(b, want)
	got := &remote.RemoteMessage{}
	gerr := encoding.GetCodec(grpcproto.Name).Unmarshal(b, got)
	switch {
	case (werr == nil) != (gerr == nil):
		t.Fatalf("encoding %d %x: error %v, protobuf-go's %v", i, b, gerr, werr)
	case werr == nil && !proto.Equal(got, want):
		t.Fatalf("encoding %d %x: decoded %v, protobuf-go %v", i, b, got, want)
	}
}

// randomRemote is a remote message whose batch holds a few envelopes of
// random fields, sometimes with a stray field, sometimes cut short.
func randomRemote(rng *rand.Rand) []byte {
	var batch []byte
	for range rng.IntN(4) {
		switch rng.IntN(5) {
		case 0:
			batch = protowire.AppendTag(batch, 1, protowire.BytesType)
			batch = protowire.AppendString(batch, []string{TupleBatch, AckBatch, "\xff"}[rng.IntN(3)])
		case 1:
			pid, _ := proto.Marshal(&actor.PID{Address: "a", Id: "b", RequestId: rng.Uint32()})
			batch = protowire.AppendTag(batch, protowire.Number(2+2*rng.IntN(2)), protowire.BytesType)
			batch = protowire.AppendBytes(batch, pid)
		default:
			batch = protowire.AppendTag(batch, 3, protowire.BytesType)
			batch = protowire.AppendBytes(batch, randomEnvelope(rng))
		}
	}
	if rng.IntN(10) == 0 {
		batch = protowire.AppendTag(batch, protowire.Number(5+rng.IntN(3)), protowire.VarintType)
		batch = protowire.AppendVarint(batch, 1)
	}
	b := protowire.AppendTag(nil, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, batch)
	if rng.IntN(10) == 0 {
		b = append(b, b...) // the batch twice: protobuf-go merges
	}
	if len(b) > 0 && rng.IntN(8) == 0 {
		b = b[:rng.IntN(len(b))]
	}
	return b
}

func randomEnvelope(rng *rand.Rand) []byte {
	var e []byte
	for range rng.IntN(6) {
		num := protowire.Number(1 + rng.IntN(9))
		switch {
		case num == 2 || num == 6 || rng.IntN(12) == 0:
			e = protowire.AppendTag(e, num, protowire.BytesType)
			v := make([]byte, rng.IntN(12))
			if num == 6 {
				v, _ = proto.Marshal(&remote.MessageHeader{HeaderData: map[string]string{"k": string(rune('a' + rng.IntN(3)))}})
			}
			for j := range v {
				if num != 6 {
					v[j] = byte(rng.Uint32())
				}
			}
			e = protowire.AppendBytes(e, v)
		default:
			e = protowire.AppendTag(e, num, protowire.VarintType)
			e = protowire.AppendVarint(e, rng.Uint64()>>rng.IntN(64))
		}
	}
	return e
}
