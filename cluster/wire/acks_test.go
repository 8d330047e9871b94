package wire

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/acktor/acktor/messages"
)

// TestAckBatchAgreesWithProtobuf: on encodings made of AckBatch's fields in
// any order, its columns packed or not, repeated, truncated, of another
// wire type or with a stray field, serializer 0 agrees with protobuf-go:
// the same batch, or both an error.
func TestAckBatchAgreesWithProtobuf(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 9))
	for i := range 3000 {
		agreeAcks(t, i, randomAcks(rng))
	}
}

func FuzzAckBatch(f *testing.F) {
	f.Add([]byte{})
	for _, m := range []*messages.AckBatch{{SpringIds: []uint64{1, 2}, XorDeltas: []uint64{3, 4}, Version: 7, Routing: 9}, {Version: 1}} {
		b, _ := proto.Marshal(m)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { agreeAcks(t, 0, b) })
}

// agreeAcks fails t unless serializer 0 and protobuf-go decode b alike as
// an AckBatch, and gives serializer 0's back, so that the next decodes into
// its arrays.
func agreeAcks(t *testing.T, i int, b []byte) {
	t.Helper()
	if got, ok := agreeAs(t, i, b, AckBatch, &messages.AckBatch{}).(*messages.AckBatch); ok {
		DoneAcks(got)
	}
}

// randomAcks appends a few of AckBatch's fields in random order, a column
// packed or one entry at a time, sometimes a field of another number or
// wire type, sometimes cut short.
func randomAcks(rng *rand.Rand) []byte {
	var b []byte
	for range rng.IntN(6) {
		num := protowire.Number(1 + rng.IntN(2))
		switch rng.IntN(7) {
		case 0, 1:
			var packed []byte
			for range rng.IntN(5) {
				packed = protowire.AppendFixed64(packed, rng.Uint64())
			}
			if rng.IntN(10) == 0 {
				packed = append(packed, 1) // not a whole entry
			}
			b = protowire.AppendTag(b, num, protowire.BytesType)
			b = protowire.AppendBytes(b, packed)
		case 2:
			b = protowire.AppendTag(b, num, protowire.Fixed64Type)
			b = protowire.AppendFixed64(b, rng.Uint64())
		case 3:
			b = protowire.AppendTag(b, 3, protowire.VarintType)
			b = protowire.AppendVarint(b, rng.Uint64()>>rng.IntN(64))
		case 4:
			b = protowire.AppendTag(b, 4, protowire.Fixed64Type)
			b = protowire.AppendFixed64(b, rng.Uint64())
		case 5:
			b = protowire.AppendTag(b, protowire.Number(3+rng.IntN(4)), protowire.BytesType)
			b = protowire.AppendBytes(b, []byte{1})
		case 6:
			b = protowire.AppendTag(b, num, protowire.VarintType)
			b = protowire.AppendVarint(b, 5)
		}
	}
	if len(b) > 0 && rng.IntN(6) == 0 {
		b = b[:rng.IntN(len(b))]
	}
	return b
}

// TestAckBatchReusesArrays: an ack batch read and given back lends its
// arrays to the next one decoded.
func TestAckBatchReusesArrays(t *testing.T) {
	b, _ := proto.Marshal(&messages.AckBatch{SpringIds: make([]uint64, 64), XorDeltas: make([]uint64, 64)})
	first, err := remote.Deserialize(b, AckBatch, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := unsafe.SliceData(first.(*messages.AckBatch).SpringIds)
	for range 100 { // a pool may drop what it is given: try again
		DoneAcks(first.(*messages.AckBatch))
		next, err := remote.Deserialize(b, AckBatch, 0)
		if err != nil {
			t.Fatal(err)
		}
		if unsafe.SliceData(next.(*messages.AckBatch).SpringIds) == p {
			return
		}
		first = next
		p = unsafe.SliceData(next.(*messages.AckBatch).SpringIds)
	}
	t.Fatal("no ack batch decoded into the arrays of one given back")
}
