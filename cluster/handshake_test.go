package cluster

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// fakeMember serves Proto.Actor's Remoting stream: it reads the writer's
// ConnectRequest and, when answer is set, answers it, waits for one more
// message and sends a DisconnectRequest; otherwise it says nothing.
type fakeMember struct {
	remote.UnimplementedRemotingServer
	answer bool
}

func (f *fakeMember) Receive(s remote.Remoting_ReceiveServer) error {
	if _, err := s.Recv(); err != nil {
		return err
	}
	if !f.answer {
		<-s.Context().Done()
		return nil
	}
	if err := s.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectResponse{
		ConnectResponse: &remote.ConnectResponse{}}}); err != nil {
		return err
	}
	if _, err := s.Recv(); err != nil {
		return err
	}
	if err := s.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_DisconnectRequest{
		DisconnectRequest: &remote.DisconnectRequest{}}}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

// serveFake starts a fakeMember on a free loopback port until t ends.
func serveFake(t *testing.T, answer bool) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	remote.RegisterRemotingServer(srv, &fakeMember{answer: answer})
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return lis.Addr().String()
}

var connectRequest = &remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{
	ConnectRequest: &remote.ConnectRequest{ConnectionType: &remote.ConnectRequest_ServerConnection{
		ServerConnection: &remote.ServerConnection{SystemId: "test", Address: "127.0.0.1:1"}}}}}

// The writer's handshake, as Proto.Actor makes it: a member that never
// answers fails it within the bound and its connection is closed; one
// that answers keeps a stream that lives past the bound.
func TestHandshakeWithin(t *testing.T) {
	const within = 150 * time.Millisecond
	for _, tc := range []struct {
		name   string
		answer bool
	}{{"silent member", false}, {"answering member", true}} {
		t.Run(tc.name, func(t *testing.T) {
			// Connections other tests' actor systems left redialling start
			// goroutines of their own meanwhile (a writer waiting to dial
			// again, a connection's serializers, a dead-letter throttle):
			// those are ignored, and this test's connection is checked
			// closed or ready below. What the stream would leak (its
			// reader, its context watcher) is not.
			ignore := []goleak.Option{goleak.IgnoreCurrent(),
				goleak.IgnoreTopFunction("google.golang.org/grpc.(*addrConn).resetTransport"),
				goleak.IgnoreTopFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
				goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/remote.(*endpointWriter).initialize"),
				goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1")}
			t.Cleanup(func() { goleak.VerifyNone(t, ignore...) }) // after the server's cleanup
			addr := serveFake(t, tc.answer)
			conn, err := grpc.Dial(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithStreamInterceptor(handshakeWithin(within)))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			stream, err := remote.NewRemotingClient(conn).Receive(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if err := stream.Send(connectRequest); err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			errs := make(chan error, 1)
			go func() { _, err := stream.Recv(); errs <- err }()
			select {
			case err = <-errs:
			case <-time.After(20 * within):
				conn.Close()
				t.Fatalf("no answer: Recv still waiting after %v, want an error within about %v", 20*within, within)
			}
			took := time.Since(began)
			if !tc.answer {
				if err == nil {
					t.Fatalf("no answer: Recv gave none after %v, want an error within about %v", took, within)
				}
				if s := conn.GetState(); s != connectivity.Shutdown {
					t.Fatalf("the connection of a failed handshake is %v, want it closed", s)
				}
				return
			}
			if err != nil {
				t.Fatalf("the connect response: %v", err)
			}
			time.Sleep(2 * within) // past the bound: the stream must stay
			if err := stream.Send(&remote.RemoteMessage{}); err != nil {
				t.Fatalf("a send after the handshake: %v", err)
			}
			m, err := stream.Recv()
			if err != nil || m.GetDisconnectRequest() == nil {
				t.Fatalf("after the handshake: %v, %v; want the member's DisconnectRequest", m, err)
			}
			if s := conn.GetState(); s != connectivity.Ready {
				t.Fatalf("the connection after the handshake is %v, want it ready", s)
			}
		})
	}
}

// A writer to a member that took its connection and never answered gives
// the address up (what was queued to it is dropped, and what is sent there
// next goes to a new writer that dials afresh) instead of holding all of it
// for good.
func TestWriterGivesUpOnSilentMember(t *testing.T) {
	addr := serveFake(t, false)
	sys := quietSystem()
	cfg := remote.Configure("127.0.0.1", 0, remote.WithDialOptions(
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithStreamInterceptor(handshakeWithin(200*time.Millisecond))))
	cfg.MaxRetryCount = 1
	r := remote.NewRemote(sys, cfg)
	r.Start()
	defer func() { r.Shutdown(false); sys.Shutdown() }()
	gone := make(chan struct{}, 1)
	sub := sys.EventStream.Subscribe(func(e any) {
		if ev, ok := e.(*remote.EndpointTerminatedEvent); ok && ev.Address == addr {
			select {
			case gone <- struct{}{}:
			default:
			}
		}
	})
	defer sys.EventStream.Unsubscribe(sub)
	sys.Root.Send(actor.NewPID(addr, "someone"), wrapperspb.String("hello"))
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the writer to a member that never answered its connect request was still connecting after 10 s")
	}
}
