package cluster

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/acktor/acktor/cluster/wire"
)

// connectWithin bounds the handshake of a member's writer to another
// member: the stream, its ConnectRequest and the ConnectResponse. It takes
// milliseconds; the bound is for a peer that took the connection and never
// answered, which held the writer, and every message queued behind it, for
// good (Proto.Actor makes the stream with no deadline).
const connectWithin = 5 * time.Second

// receiveMethod is the stream Proto.Actor's endpoint writer opens to each
// member it sends to.
const receiveMethod = "/remote.Remoting/Receive"

// handshakeWithin is a stream interceptor that cancels a writer's stream
// whose first message (the ConnectResponse) has not come within d, so that
// the writer's attempt fails and Proto.Actor tries again or gives the
// address up: what was queued to it is dropped (a caller's request times
// out and asks again) and what is sent there next goes to a new writer. A
// connection whose stream failed before that answer is closed: the writer
// dials afresh for its next attempt and leaves the old one open. Other
// streams pass through untouched; once answered, the stream gives back the
// buffers of what it sent as gRPC is done with them (wire.Sent), and
// nothing here reads what is sent (cluster/wire's lends follow gRPC's
// marshalling).
func handshakeWithin(d time.Duration) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
		streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if method != receiveMethod {
			return streamer(ctx, desc, cc, method, opts...)
		}
		ctx, cancel := context.WithCancel(ctx)
		giveUp := func() {
			cancel()
			_ = cc.Close() // closing twice (the writer's own stop) is harmless
		}
		timer := time.AfterFunc(d, giveUp)
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			timer.Stop()
			giveUp()
			return nil, err
		}
		return &handshakeStream{ClientStream: cs, timer: timer, giveUp: giveUp, cancel: cancel, within: d}, nil
	}
}

// handshakeStream is a writer's stream until and after its ConnectResponse.
// The writer receives the answer on the goroutine that sends the request,
// and only then starts the goroutine that receives the rest, so answered
// needs no lock.
type handshakeStream struct {
	grpc.ClientStream
	timer    *time.Timer
	giveUp   func()
	cancel   context.CancelFunc
	within   time.Duration
	answered bool
	sent     wire.Sent // what went in buffers that come back
}

func (s *handshakeStream) SendMsg(m any) error {
	err := s.ClientStream.SendMsg(m)
	if err != nil && !s.answered {
		s.timer.Stop()
		s.giveUp()
	}
	if err == nil && s.answered { // committed: gRPC keeps nothing for a retry
		s.sent.Add(m)
	}
	return err
}

func (s *handshakeStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	switch {
	case s.answered:
		if err != nil {
			s.cancel() // the stream ended: release its context
		}
		return err
	case err == nil && s.timer.Stop():
		s.answered = true
		return nil
	}
	s.timer.Stop()
	s.giveUp()
	if err == nil { // the answer came as the bound passed, and the stream is gone
		err = status.Errorf(codes.DeadlineExceeded, "cluster: no connect response from the member within %v", s.within)
	}
	return err
}
