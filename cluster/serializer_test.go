package cluster

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/acktor/acktor/messages"
)

// TestFramedBatchKeepsTheBytes: a framed batch, as a sender's proto
// serializer encodes it, decodes through Proto.Actor's serializer 0 to the
// same batch, its frame pointing into the envelope's bytes; every other
// encoding decodes as protobuf-go decodes it.
func TestFramedBatchKeepsTheBytes(t *testing.T) {
	keepFrames()
	keepFrames() // once is enough, twice is harmless
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
			got, err := remote.Deserialize(b, tupleBatchName, 0)
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
	keepFrames()
	rng := rand.New(rand.NewPCG(16, 4))
	for i := range 2000 {
		b := randomEncoding(rng)
		agree(t, i, b)
	}
}

func FuzzFramedBatch(f *testing.F) {
	keepFrames()
	f.Add([]byte{})
	for _, m := range []*messages.TupleBatch{{FromTask: 1, Frame: []byte("xyz")}, {Frame: []byte{0}}, {FromTask: 2, Times: []int64{3}}} {
		b, _ := proto.Marshal(m)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { agree(t, 0, b) })
}

// agree fails t unless serializer 0 and protobuf-go decode b alike.
func agree(t *testing.T, i int, b []byte) {
	t.Helper()
	want := &messages.TupleBatch{}
	werr := proto.Unmarshal(b, want)
	got, gerr := remote.Deserialize(b, tupleBatchName, 0)
	switch {
	case (werr == nil) != (gerr == nil):
		t.Fatalf("encoding %d %x: error %v, protobuf-go's %v", i, b, gerr, werr)
	case werr == nil && !proto.Equal(got.(*messages.TupleBatch), want):
		t.Fatalf("encoding %d %x: decoded %v, protobuf-go %v", i, b, got, want)
	}
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
