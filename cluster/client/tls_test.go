package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/remote"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/acktor/acktor/actors"
	"github.com/acktor/acktor/cluster"
	"github.com/acktor/acktor/internal/certs"
	"github.com/acktor/acktor/internal/testserver"
	"github.com/acktor/acktor/source"
)

// tlsClientEnv, when set to a cluster config (JSON), makes
// TestTLSClientChild the remote client process of TestMutualTLS.
const tlsClientEnv = "ACKTOR_TLS_CLIENT"

// TestTLSClientChild is not a test of its own: run by TestMutualTLS as a
// process, it dials the cluster, fails a root of its own and prints what
// it heard of it, or why it could not dial.
func TestTLSClientChild(t *testing.T) {
	text := os.Getenv(tlsClientEnv)
	if text == "" {
		t.Skip("the remote client process of TestMutualTLS")
	}
	var cfg cluster.Config
	if err := json.Unmarshal([]byte(text), &cfg); err != nil {
		t.Fatal(err)
	}
	quiet := logrus.New()
	quiet.SetOutput(io.Discard)
	cl, err := Dial(cfg, Options{Ackers: 3}, 3*time.Second, quiet)
	if err != nil {
		fmt.Println("dial:", err)
		return
	}
	defer cl.Close()
	id, err := cl.Begin(cl.TupleID())
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Fail(id); err != nil {
		t.Fatal(err)
	}
	fmt.Println("event:", next(t, cl, 1)[id].Reason)
}

// syncBuffer is a log a test reads while the cluster writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMutualTLS: a member with cluster.tls takes a remote client process
// whose certificate the cluster's authority signed, which tracks its roots;
// a client process with another authority's certificate or with none finds
// no member, the refusal is logged once with its address, and a gRPC
// connection to the member's remote without a good certificate gets no
// answer.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	member := testserver.Certs(t, dir, "member")
	stranger := testserver.Certs(t, dir, "stranger")
	ports := testserver.FreePorts(t, 1)
	config := func(f *testserver.TLSFiles) cluster.Config {
		c := cluster.DefaultConfig()
		c.Name, c.Port = "tls", 0
		c.Automanaged.Port, c.Automanaged.Peers = ports[0], []string{fmt.Sprintf("127.0.0.1:%d", ports[0])}
		c.Automanaged.Refresh = 100 * time.Millisecond
		if f != nil {
			c.TLS = cluster.TLSConfig{CA: f.CA, Cert: f.Cert, Key: f.Key}
		}
		return c
	}

	var b actors.Builder
	b.Spout("s", 1, func(int, int) (source.Source, error) { return idle{}, nil })
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	var memberLog syncBuffer
	log := logrus.New()
	log.SetOutput(&memberLog)
	rcfg := actors.DefaultConfig()
	rcfg.Ackers, rcfg.Log = 3, log
	rt, err := actors.New(topo, rcfg)
	if err != nil {
		t.Fatal(err)
	}
	node, err := cluster.StartNode(config(&member), rt.WorkerKinds(), log)
	if err != nil {
		t.Fatal(err)
	}
	defer node.Cluster.Shutdown(false)
	host, port, err := node.System.GetHostPort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("%s:%d", host, port)

	for _, tc := range []struct {
		name  string
		files *testserver.TLSFiles
		want  string
	}{
		{"another authority", &stranger, "dial: client: no member hosting ackers found"},
		{"no TLS", nil, "dial: client: no member hosting ackers found"},
		{"the cluster's authority", &member, "event: failed"},
	} {
		cfg, err := json.Marshal(config(tc.files))
		if err != nil {
			t.Fatal(err)
		}
		child := exec.Command(os.Args[0], "-test.run", "^TestTLSClientChild$")
		child.Env = append(os.Environ(), tlsClientEnv+"="+string(cfg))
		out, err := child.CombinedOutput()
		if err != nil || !strings.Contains(string(out), tc.want) {
			t.Fatalf("a client process with %s: %v, want %q:\n%s", tc.name, err, tc.want, out)
		}
	}

	// The remote's gRPC itself, dialled directly.
	_, good, err := certs.Mutual(certs.Files(member), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, bad, err := certs.Mutual(certs.Files(stranger), nil)
	if err != nil {
		t.Fatal(err)
	}
	bad.RootCAs = good.RootCAs // trusts the member; the member does not trust it
	for _, tc := range []struct {
		name  string
		creds credentials.TransportCredentials
		want  codes.Code
	}{
		{"plaintext", insecure.NewCredentials(), codes.Unavailable},
		{"another authority", credentials.NewTLS(bad), codes.Unavailable},
		{"the cluster's authority", credentials.NewTLS(good), codes.Unimplemented}, // through, and not served
	} {
		conn, err := grpc.Dial(addr, grpc.WithTransportCredentials(tc.creds))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err = remote.NewRemotingClient(conn).ListProcesses(ctx, &remote.ListProcessesRequest{}, grpc.WaitForReady(false))
		cancel()
		_ = conn.Close()
		if status.Code(err) != tc.want {
			t.Fatalf("gRPC %s: %v, want %s", tc.name, err, tc.want)
		}
	}
	if got := strings.Count(memberLog.String(), "refused a connection from 127.0.0.1"); got != 1 {
		t.Fatalf("%d refusals logged, want 1 (once per address):\n%s", got, memberLog.String())
	}
}
