package wire

import (
	"testing"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/protobuf/proto"
)

// TestRecyclesThisGRPC: the gRPC built in is the one whose flow control
// Sent's proof was read from. A new gRPC turns the giving back off: read
// the proof (sent.go) against its transport again before setting recycles.
func TestRecyclesThisGRPC(t *testing.T) {
	if !recycles {
		t.Fatalf("gRPC %s: sent buffers are not given back; check sent.go's proof against it", grpc.Version)
	}
}

// TestSentKeepsWhatMayBeUncopied: a stream keeps the buffers of its last
// messages until at least inFlight bytes of later ones, sent before the
// newest, follow each; a message the codec did not marshal into a buffer
// of Buffer's (one too small, or not a remote's) is not kept.
func TestSentKeepsWhatMayBeUncopied(t *testing.T) {
	c := encoding.GetCodec(grpcproto.Name)
	defer marshalled.reset()
	cases := []struct {
		name  string
		sizes []int // bytes of each message's one envelope
		kept  int   // messages kept after the last Add
	}{
		{"one", []int{pooledFrom}, 1},
		{"a few", []int{pooledFrom, pooledFrom, pooledFrom, pooledFrom}, 4},
		{"too small to keep", []int{10, pooledFrom - 100, 10}, 0},
		{"a large one behind", []int{pooledFrom, inFlight, pooledFrom}, 2},
		{"large ones", []int{inFlight, inFlight, inFlight, inFlight}, 2},
		{"just short of the bound", []int{pooledFrom, inFlight - pooledFrom - 100, pooledFrom, pooledFrom}, 4},
		{"at the bound", []int{pooledFrom, inFlight - pooledFrom, pooledFrom, pooledFrom}, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var s Sent
			for _, n := range tc.sizes {
				m := &remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: &remote.MessageBatch{
					Envelopes: []*remote.MessageEnvelope{{MessageData: make([]byte, n)}}}}}
				b, err := c.Marshal(m)
				if err != nil {
					t.Fatal(err)
				}
				want, _ := proto.Marshal(m)
				if string(b) != string(want) {
					t.Fatal("the codec marshalled other bytes than protobuf-go")
				}
				s.Add(m)
			}
			if len(s.bufs) != tc.kept {
				t.Errorf("kept %d buffers, want %d", len(s.bufs), tc.kept)
			}
			queued := 0
			for _, b := range s.bufs {
				queued += len(b) + grpcHeader
			}
			if queued != s.queued {
				t.Errorf("queued %d bytes, the buffers hold %d", s.queued, queued)
			}
		})
	}
	var s Sent
	s.Add(&remote.RemoteMessage{})
	s.Add("not a remote message")
	if len(s.bufs) != 0 {
		t.Errorf("kept %d buffers of messages the codec did not marshal", len(s.bufs))
	}
}
