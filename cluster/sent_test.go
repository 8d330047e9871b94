package cluster

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// checkingMember answers the writer's handshake, then takes messages
// slowly and checks each one's bytes against what its number says they
// must be: a buffer given back while gRPC's writer still had to copy it
// would be written over by the next message marshalled into it.
type checkingMember struct {
	remote.UnimplementedRemotingServer
	want int
	errs chan error
}

// payload is message i's bytes: sizes from a few bytes to past a write
// quota, and a fill that says which message they are.
func payload(i int) []byte {
	b := make([]byte, []int{100, 3 << 10, 17 << 10, 40 << 10, 90 << 10}[i%5]+i%7)
	for j := range b {
		b[j] = byte(i*31 + j)
	}
	return b
}

func (f *checkingMember) Receive(s remote.Remoting_ReceiveServer) error {
	if _, err := s.Recv(); err != nil {
		return err
	}
	if err := s.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectResponse{
		ConnectResponse: &remote.ConnectResponse{}}}); err != nil {
		return err
	}
	var bad error
	for i := range f.want {
		m, err := s.Recv()
		if err != nil {
			f.errs <- fmt.Errorf("message %d: %w", i, err)
			return err
		}
		if i%8 == 0 {
			time.Sleep(time.Millisecond) // the writer waits on flow control meanwhile
		}
		env := m.GetMessageBatch().GetEnvelopes()
		if want := payload(i); bad == nil && (len(env) != 1 || string(env[0].MessageData) != string(want)) {
			bad = fmt.Errorf("message %d arrived changed (%d envelopes)", i, len(env))
		}
	}
	f.errs <- bad
	<-s.Context().Done()
	return nil
}

// TestSentBuffersComeBackCopied: a member's stream marshals what it sends
// into buffers that come back for the next messages, and every message
// arrives as it was sent, through flow control's waits (small windows, a
// slow reader).
func TestSentBuffersComeBackCopied(t *testing.T) {
	const n = 400
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	member := &checkingMember{want: n, errs: make(chan error, 1)}
	srv := grpc.NewServer(grpc.InitialWindowSize(64<<10), grpc.InitialConnWindowSize(64<<10))
	remote.RegisterRemotingServer(srv, member)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	conn, err := grpc.Dial(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStreamInterceptor(handshakeWithin(5*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := remote.NewRemotingClient(conn).Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(connectRequest); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		m := &remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: &remote.MessageBatch{
			TypeNames: []string{"t"}, Envelopes: []*remote.MessageEnvelope{{MessageData: payload(i)}}}}}
		if err := stream.Send(m); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	select {
	case err := <-member.errs:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the member did not take every message in 30 s")
	}
}
