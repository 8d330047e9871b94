package wire

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/acktor/acktor/messages"
)

// TestFramedBatchKeepsTheBytes: a framed batch, as a sender's proto
// serializer encodes it, decodes through Proto.Actor's serializer 0 to the
// same batch, its frame pointing into the envelope's bytes; every other
// encoding decodes as protobuf-go decodes it.
func TestFramedBatchKeepsTheBytes(t *testing.T) {
	if !Installed() {
		t.Fatalf("serializer 0 is %T, not this package's", serializers[0])
	}
	frame := []byte("a frame: its header, columns and values")
	cases := []struct {
		name    string
		batch   *messages.TupleBatch
		aliases bool
	}{
		{"framed", &messages.TupleBatch{FromTask: 7, Frame: frame}, true},
		{"framed, task 0", &messages.TupleBatch{Frame: frame}, true},
		{"framed, a large task", &messages.TupleBatch{FromTask: 1 << 31, Frame: frame}, true},
		{"columns", &messages.TupleBatch{FromTask: 3, AnchorCounts: []uint32{1}, SpringIds: []uint64{9}, TupleIds: []uint64{5},
			ValueCounts: []uint32{1}, Values: []string{"w"}}, false},
		{"a frame and a column", &messages.TupleBatch{FromTask: 3, Frame: frame, Times: []int64{1}}, false},
		{"empty", &messages.TupleBatch{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := proto.Marshal(tc.batch)
			if err != nil {
				t.Fatal(err)
			}
			got, err := remote.Deserialize(b, TupleBatch, 0)
			if err != nil {
				t.Fatal(err)
			}
			m, ok := got.(*messages.TupleBatch)
			if !ok || !proto.Equal(m, tc.batch) {
				t.Fatalf("decoded %v, want %v", got, tc.batch)
			}
			if into := len(m.Frame) > 0 && within(m.Frame, b); into != tc.aliases {
				t.Errorf("frame points into the envelope's bytes: %v, want %v", into, tc.aliases)
			}
		})
	}
	// Other messages go to the proto serializer as before.
	ack := &messages.AckBatch{SpringIds: []uint64{1, 2}, XorDeltas: []uint64{3, 4}}
	b, _ := proto.Marshal(ack)
	got, err := remote.Deserialize(b, string(ack.ProtoReflect().Descriptor().FullName()), 0)
	if err != nil || !proto.Equal(got.(*messages.AckBatch), ack) {
		t.Fatalf("ack batch decoded as %v, %v", got, err)
	}
}

// within says whether s lies inside b.
func within(s, b []byte) bool {
	p, lo := uintptr(unsafe.Pointer(unsafe.SliceData(s))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return p >= lo && p+uintptr(len(s)) <= lo+uintptr(len(b))
}

// TestFramedBatchAgreesWithProtobuf: on encodings made of the batch's own
// fields in any order, repeated, truncated or with a stray field, the
// decoder agrees with protobuf-go: the same batch, or both an error.
func TestFramedBatchAgreesWithProtobuf(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 4))
	for i := range 2000 {
		b := randomEncoding(rng)
		agree(t, i, b)
	}
}

func FuzzFramedBatch(f *testing.F) {
	f.Add([]byte{})
	for _, m := range []*messages.TupleBatch{{FromTask: 1, Frame: []byte("xyz")}, {Frame: []byte{0}}, {FromTask: 2, Times: []int64{3}}} {
		b, _ := proto.Marshal(m)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { agree(t, 0, b) })
}

// agree fails t unless serializer 0 and protobuf-go decode b alike as a
// TupleBatch.
func agree(t *testing.T, i int, b []byte) {
	t.Helper()
	agreeAs(t, i, b, TupleBatch, &messages.TupleBatch{})
}

// agreeAs fails t unless serializer 0 and protobuf-go decode b alike as
// typeName, which want is an empty message of; it returns serializer 0's
// message, or nil for an error.
func agreeAs(t *testing.T, i int, b []byte, typeName string, want proto.Message) any {
	t.Helper()
	werr := proto.Unmarshal(b, want)
	got, gerr := remote.Deserialize(b, typeName, 0)
	switch {
	case (werr == nil) != (gerr == nil):
		t.Fatalf("encoding %d %x: error %v, protobuf-go's %v", i, b, gerr, werr)
	case werr == nil && !proto.Equal(got.(proto.Message), want):
		t.Fatalf("encoding %d %x: decoded %v, protobuf-go %v", i, b, got, want)
	}
	return got
}

// randomEncoding appends a few of TupleBatch's fields in random order,
// sometimes a field of another number or wire type, sometimes cut short.
func randomEncoding(rng *rand.Rand) []byte {
	var b []byte
	for range rng.IntN(5) {
		switch rng.IntN(6) {
		case 0, 1:
			b = protowire.AppendTag(b, 1, protowire.VarintType)
			b = protowire.AppendVarint(b, rng.Uint64()>>rng.IntN(64))
		case 2, 3:
			b = protowire.AppendTag(b, 9, protowire.BytesType)
			v := make([]byte, rng.IntN(20))
			for j := range v {
				v[j] = byte(rng.Uint32())
			}
			b = protowire.AppendBytes(b, v)
		case 4:
			b = protowire.AppendTag(b, protowire.Number(1+rng.IntN(10)), protowire.Fixed64Type)
			b = protowire.AppendFixed64(b, rng.Uint64())
		case 5:
			b = protowire.AppendTag(b, 1, protowire.BytesType)
			b = protowire.AppendBytes(b, []byte{1, 2})
		}
	}
	if len(b) > 0 && rng.IntN(4) == 0 {
		b = b[:rng.IntN(len(b))]
	}
	return b
}

// TestEncodedGoesAsItIs: serializer 0 sends an Encoded's bytes, not a copy,
// under its type's name, refuses one that names no type or whose bytes it
// already lent, and serializes everything else as before.
func TestEncodedGoesAsItIs(t *testing.T) {
	ack := &messages.AckBatch{SpringIds: []uint64{1, 2}, XorDeltas: []uint64{3, 4}}
	enc, _ := proto.Marshal(ack)
	b, name, err := remote.Serialize(&Encoded{Type: AckBatch, Bytes: enc}, 0)
	if err != nil || name != AckBatch || len(b) != len(enc) || unsafe.SliceData(b) != unsafe.SliceData(enc) {
		t.Fatalf("Serialize(Encoded) = %d bytes (the same: %v), %q, %v; want the %d bytes given, %q", len(b),
			len(b) > 0 && unsafe.SliceData(b) == unsafe.SliceData(enc), name, err, len(enc), AckBatch)
	}
	if _, _, err := remote.Serialize(&Encoded{Bytes: enc}, 0); err == nil {
		t.Error("Serialize(Encoded with no type) did not fail")
	}
	defer lent.reset()
	twice := &Encoded{Type: AckBatch, Bytes: bytes.Clone(enc)}
	if _, _, err := remote.Serialize(twice, 0); err != nil {
		t.Fatalf("Serialize(Encoded) = %v", err)
	}
	if b, _, err := remote.Serialize(twice, 0); err == nil {
		t.Errorf("Serialize(the same Encoded again) = %d bytes, want an error: they were lent", len(b))
	}
	shared := make([]byte, 4, 8)
	if _, _, err := remote.Serialize(&Encoded{Type: AckBatch, Bytes: shared}, 0); err != nil {
		t.Fatalf("Serialize(Encoded) = %v", err)
	}
	if b, _, err := remote.Serialize(&Encoded{Type: AckBatch, Bytes: shared[:2]}, 0); err == nil {
		t.Errorf("Serialize(an Encoded whose bytes another lent) = %d bytes, want an error", len(b))
	}
	b, name, err = remote.Serialize(ack, 0)
	if err != nil || name != AckBatch || !bytes.Equal(b, enc) {
		t.Errorf("Serialize(AckBatch) = %x, %q, %v; want %x, %q", b, name, err, enc, AckBatch)
	}
}

// TestTypeNames: the names Encoded messages carry are the schema's.
func TestTypeNames(t *testing.T) {
	for name, m := range map[string]proto.Message{TupleBatch: &messages.TupleBatch{}, AckBatch: &messages.AckBatch{}} {
		if got := string(m.ProtoReflect().Descriptor().FullName()); got != name {
			t.Errorf("%T is %q in the schema, not %q", m, got, name)
		}
	}
}

// TestUnknownTypeIsAnError: a message of a type this binary does not
// know, as a newer member might send, is an error that names it, not a
// nil dereference in Proto.Actor's serializer.
func TestUnknownTypeIsAnError(t *testing.T) {
	for _, name := range []string{"acktor.NoSuchMessage", "", "not a name"} {
		m, err := remote.Deserialize([]byte{8, 1}, name, 0)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", name)) {
			t.Errorf("type %q: decoded %v, error %v; want an error naming the type", name, m, err)
		}
	}
}

// TestFramePrefix: the prefix and the frame are what proto.Marshal makes
// of a batch that holds only the task and the frame.
func TestFramePrefix(t *testing.T) {
	for _, task := range []uint32{0, 1, 300, 1 << 31} {
		for _, size := range []int{1, 127, 128, 20000} {
			frame := bytes.Repeat([]byte{7}, size)
			want, err := proto.MarshalOptions{Deterministic: true}.Marshal(&messages.TupleBatch{FromTask: task, Frame: frame})
			if err != nil {
				t.Fatal(err)
			}
			if got := append(FramePrefix(nil, task, size), frame...); !bytes.Equal(got, want) {
				t.Errorf("task %d, frame of %d bytes: prefix and frame %x, proto.Marshal %x", task, size, got[:min(len(got), 12)], want[:min(len(want), 12)])
			}
		}
	}
}

// TestEncodedBytesComeBack: gRPC's proto codec is this package's; when it
// marshals a batch of envelopes, the bytes the serializer lent come back
// to the buffers, the batch's bytes are what the envelopes held, and bytes
// it did not lend stay where they are.
func TestEncodedBytesComeBack(t *testing.T) {
	c, ok := encoding.GetCodec(grpcproto.Name).(codec)
	if !ok {
		t.Fatalf("gRPC's proto codec is %T, not this package's", encoding.GetCodec(grpcproto.Name))
	}
	ack := &messages.AckBatch{SpringIds: []uint64{1, 2}, XorDeltas: []uint64{3, 4}}
	buf, err := proto.MarshalOptions{}.MarshalAppend(Buffer(proto.Size(ack)), ack)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := remote.Serialize(&Encoded{Type: AckBatch, Bytes: buf}, 0)
	if err != nil {
		t.Fatal(err)
	}
	own := []byte("bytes of another serializer")
	m := &remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: &remote.MessageBatch{
		TypeNames: []string{AckBatch, "other"},
		Envelopes: []*remote.MessageEnvelope{{MessageData: b}, {MessageData: own, TypeId: 1}, {}},
	}}}
	want, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	defer lent.reset()
	if !lent.out(unsafe.SliceData(b)) {
		t.Fatal("the serializer did not record the bytes it lent")
	}
	got, err := c.Marshal(m)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Marshal = %x, %v; want %x", got, err, want)
	}
	if lent.out(unsafe.SliceData(b)) {
		t.Error("the lent bytes did not come back once marshalled")
	}
	if n := giveBack(m); n != 0 {
		t.Errorf("giving the batch back again released %d buffers, want 0", n)
	}
	other := &remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: &remote.MessageBatch{
		Envelopes: []*remote.MessageEnvelope{{MessageData: []byte("not lent")}}}}}
	if n := giveBack(other); n != 0 {
		t.Errorf("a batch of bytes nobody lent released %d buffers, want 0", n)
	}
	if n := giveBack(&remote.RemoteMessage{}); n != 0 {
		t.Errorf("a message with no batch released %d buffers, want 0", n)
	}
}

// out says whether the bytes at p are lent.
func (l *lends[K]) out(p K) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, now := l.now[p]
	_, old := l.old[p]
	return now || old
}

// reset forgets every lend.
func (l *lends[K]) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.now, l.old, l.n = nil, nil, 0
}

// probe is a codec that fails the test if the bytes at p are no longer
// lent when it marshals.
type probe struct {
	encoding.Codec
	t *testing.T
	p *byte
}

func (c probe) Marshal(v any) ([]byte, error) {
	if !lent.out(c.p) {
		c.t.Error("lent bytes came back before the codec marshalled them")
	}
	return c.Codec.Marshal(v)
}

// TestGiveBackAfterMarshal: lent bytes come back only after the codec it
// wraps has marshalled the batch, and also when that failed (gRPC then
// drops the message).
func TestGiveBackAfterMarshal(t *testing.T) {
	defer lent.reset()
	base := encoding.GetCodec(grpcproto.Name).(codec).Codec
	for _, typ := range []string{AckBatch, "\xff: not UTF-8, so Marshal fails"} {
		b, _, err := remote.Serialize(&Encoded{Type: AckBatch, Bytes: append(Buffer(8), 1, 2, 3)}, 0)
		if err != nil {
			t.Fatal(err)
		}
		m := &remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: &remote.MessageBatch{
			TypeNames: []string{typ}, Envelopes: []*remote.MessageEnvelope{{MessageData: b}}}}}
		_, err = codec{probe{base, t, unsafe.SliceData(b)}}.Marshal(m)
		if lent.out(unsafe.SliceData(b)) {
			t.Errorf("type %q (Marshal: %v): the lent bytes did not come back", typ, err)
		}
	}
}

// TestLendsForget: a lend that never comes back (its writer dropped the
// batch) is forgotten once two generations of lends have followed it, and
// one within the last generation is not.
func TestLendsForget(t *testing.T) {
	defer lent.reset()
	first := make([]byte, 1)
	if !lend(&lent, first) {
		t.Fatal("a first lend was refused")
	}
	var last []byte
	for range 2 * lentGeneration {
		last = make([]byte, 1)
		lend(&lent, last)
	}
	if lent.out(unsafe.SliceData(first)) {
		t.Errorf("a lend %d lends old is still kept", 2*lentGeneration)
	}
	if !lent.out(unsafe.SliceData(last)) {
		t.Error("the last lend was forgotten")
	}
	if lend(&lent, last) {
		t.Error("lending bytes that are out again was not refused")
	}

	lent.reset()
	older := append(Buffer(8), 1)
	lend(&lent, older)
	for range lentGeneration {
		lend(&lent, make([]byte, 1))
	}
	if !lent.out(unsafe.SliceData(older)) || lend(&lent, older) {
		t.Error("a lend one generation old was forgotten, or lent again")
	}
	m := &remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: &remote.MessageBatch{
		Envelopes: []*remote.MessageEnvelope{{MessageData: older}}}}}
	if n := giveBack(m); n != 1 || lent.out(unsafe.SliceData(older)) {
		t.Errorf("giving back a lend one generation old released %d buffers (want 1), and it is out: %v", n, lent.out(unsafe.SliceData(older)))
	}
}

// TestBuffers: Buffer gives an empty buffer of the class that holds the
// size asked (an exact one past the largest), release keeps only buffers
// of a class's capacity, and a buffer released comes back from Buffer.
func TestBuffers(t *testing.T) {
	cases := []struct{ n, cap int }{
		{0, 1}, {1, 1}, {2, 2}, {3, 4}, {5, 8}, {4096, 4096}, {4097, 8192}, {1 << 24, 1 << 24}, {1<<24 + 1, 1<<24 + 1},
	}
	for _, tc := range cases {
		if b := Buffer(tc.n); len(b) != 0 || cap(b) != tc.cap {
			t.Errorf("Buffer(%d): len %d, cap %d; want 0, %d", tc.n, len(b), cap(b), tc.cap)
		}
	}
	for k := range len(classes) {
		back := false
		for range 50 { // a pool may drop what it is given (the race detector drops a quarter)
			b := make([]byte, 0, 1<<k)
			release(b)
			if back = unsafe.SliceData(Buffer(1<<k/2+1)) == unsafe.SliceData(b); back {
				break
			}
		}
		if !back {
			t.Errorf("a released buffer of %d bytes never came back", 1<<k)
		}
	}
	kept := []struct {
		cap  int
		kept bool
	}{
		{0, false}, {1, true}, {3, false}, {4096, true}, {4097, false}, {1 << 24, true}, {1 << 25, false},
	}
	for _, tc := range kept {
		if got := release(make([]byte, 0, tc.cap)); got != tc.kept {
			t.Errorf("release(cap %d) = %v, want %v", tc.cap, got, tc.kept)
		}
	}
}
