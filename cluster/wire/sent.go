package wire

import (
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// gRPC marshals each message a stream sends into a fresh buffer and hands
// it to the connection's writer goroutine, which copies it into its frames
// later and tells nobody when: on a worker of the three-member word count
// those buffers were half of all it allocated (25 of 55 MB a run). A
// member's streams have them marshalled into buffers of Buffer's instead
// (marshalRemote), and give each back once gRPC's own flow control proves
// that the writer has copied it out (Sent).
//
// The proof, from gRPC 1.60's transport (internal/transport): SendMsg takes
// a message's size from the stream's write quota (64 KiB) and waits only
// while the quota is not above 0; the writer gives the quota back a piece
// of at most one HTTP/2 frame (16 KiB) at a time, just before it copies
// that piece, and copies a stream's messages in order. So once SendMsg of
// the newest message has returned, fewer than inFlight bytes of the
// messages before it are still to copy, and an earlier message followed by
// at least inFlight bytes of messages before the newest has been copied.
// gRPC keeps a message for a retry only until the stream's first answer (a
// stream commits then), which a member's stream has had before it sends
// anything else.

// inFlight is gRPC 1.60's write quota of a stream (defaultWriteQuota) and
// its largest frame (http2MaxFrameLen): the most of a stream's earlier
// messages its writer may not yet have copied when SendMsg returns.
const inFlight = 64<<10 + 16<<10

// grpcHeader is the bytes gRPC puts before each message, which the quota
// counts.
const grpcHeader = 5

// recycles says whether the gRPC built in is the one the proof above was
// read from; with another, no buffer is given back (TestRecyclesThisGRPC
// fails, to have the proof read again).
var recycles = grpc.Version == "1.60.1"

// marshalled holds the buffer each remote message was marshalled into, by
// message, until the stream that sent it takes it (Sent.Add). A message
// sent by a stream that does not take it (a server's answer, another
// program's client) is forgotten after two generations, its buffer left to
// the collector.
var marshalled lends[*remote.RemoteMessage]

// pooledFrom is the smallest message or envelope whose bytes go in a
// buffer of Buffer's: below it, a fresh one costs less than the pool's
// bookkeeping (BenchmarkRemoteBatches' 140-byte batch took 1.25x the CPU
// with every message pooled), and the bytes of the many are few.
const pooledFrom = 4 << 10

// marshalRemote marshals m as gRPC's proto codec would, into a buffer of
// Buffer's that it files in marshalled if it is large enough to keep.
func marshalRemote(m *remote.RemoteMessage) ([]byte, error) {
	n := proto.Size(m)
	if n < pooledFrom {
		return proto.MarshalOptions{UseCachedSize: true}.Marshal(m)
	}
	out, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(Buffer(n), m)
	if err != nil {
		return nil, err
	}
	if recycles {
		marshalled.file(m, out)
	}
	return out, nil
}

// Sent is what one gRPC stream of Proto.Actor's remote has sent in
// buffers of Buffer's and its writer may not yet have copied, oldest
// first. A stream's SendMsg calls come one at a time, and so must Add's.
type Sent struct {
	bufs   [][]byte
	queued int // bytes of bufs, gRPC's headers included
}

// Add files the buffer m was marshalled into, once SendMsg(m) has returned
// without an error on a stream that has had its first answer, and gives
// back the buffers that the writer has copied.
func (s *Sent) Add(m any) {
	r, ok := m.(*remote.RemoteMessage)
	if !ok {
		return
	}
	b, ok := marshalled.take(r)
	if !ok {
		return
	}
	for len(s.bufs) > 0 && s.queued-(len(s.bufs[0])+grpcHeader) >= inFlight {
		s.queued -= len(s.bufs[0]) + grpcHeader
		release(s.bufs[0])
		s.bufs[0] = nil
		s.bufs = s.bufs[1:]
	}
	s.bufs = append(s.bufs, b)
	s.queued += len(b) + grpcHeader
}
