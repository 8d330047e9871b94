// Package testserver starts what tests need on 127.0.0.1: free ports, a
// real etcd server, an embedded NATS JetStream server.
package testserver

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// handedOut are the ports FreePorts gave in this test binary: the kernel
// may give a port again once its listener closed, and two calls of one test
// (a gateway's port, then the members') must not get the same one.
var handedOut sync.Map

// FreePorts returns n ports free on 127.0.0.1 a moment ago, none it returned
// before in this process.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l) // held until the end, so the kernel gives another
		port := l.Addr().(*net.TCPAddr).Port
		if _, again := handedOut.LoadOrStore(port, true); !again {
			ports = append(ports, port)
		}
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return ports
}

// Etcd starts an etcd server (Debian's etcd-server) on 127.0.0.1 for the
// test and returns its client address. Without the etcd binary the test
// skips, unless ACKTOR_REQUIRE_ETCD=1 (set by .ci/run) makes that a failure.
func Etcd(t testing.TB) string { return StartEtcd(t).Addr }

// EtcdServer is an etcd server a test started.
type EtcdServer struct {
	Addr   string // its client address, host:port
	args   []string
	log    *os.File
	cmd    *exec.Cmd
	client *http.Client // of its health checks
	scheme string
}

// StartEtcd is Etcd, returning the server so that the test can restart it.
func StartEtcd(t testing.TB) *EtcdServer {
	t.Helper()
	return startEtcd(t, nil)
}

// StartEtcdTLS is StartEtcd serving clients over TLS with f's certificate,
// and only clients with a certificate f's authority signed
// (--client-cert-auth).
func StartEtcdTLS(t testing.TB, f TLSFiles) *EtcdServer {
	t.Helper()
	return startEtcd(t, &f)
}

func startEtcd(t testing.TB, f *TLSFiles) *EtcdServer {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		if os.Getenv("ACKTOR_REQUIRE_ETCD") == "1" {
			t.Fatal("etcd not found and ACKTOR_REQUIRE_ETCD=1: install Debian's etcd-server")
		}
		t.Skip("etcd not found: install Debian's etcd-server (apt-get install etcd-server) to run this test")
	}
	ports := FreePorts(t, 2)
	client, peer := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	s := &EtcdServer{Addr: client, scheme: "http", client: http.DefaultClient}
	if f != nil {
		s.scheme, s.client = "https", tlsClient(t, *f)
	}
	s.args = []string{bin, "--name", "t", "--data-dir", t.TempDir(),
		"--listen-client-urls", s.scheme + "://" + client, "--advertise-client-urls", s.scheme + "://" + client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "t=" + peer}
	if f != nil {
		s.args = append(s.args, "--cert-file", f.Cert, "--key-file", f.Key, "--client-cert-auth", "--trusted-ca-file", f.CA)
	}
	if s.log, err = os.Create(filepath.Join(t.TempDir(), "etcd.log")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.kill(); _ = s.log.Close() })
	s.start(t)
	return s
}

// Restart kills the server (SIGKILL) and, down later, starts it again on
// its data at the same address.
func (s *EtcdServer) Restart(t testing.TB, down time.Duration) {
	t.Helper()
	s.kill()
	time.Sleep(down)
	s.start(t)
}

func (s *EtcdServer) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_, _ = s.cmd.Process.Wait()
}

// start runs the server and waits until it is healthy.
func (s *EtcdServer) start(t testing.TB) {
	t.Helper()
	s.cmd = exec.Command(s.args[0], s.args[1:]...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if res, err := s.client.Get(s.scheme + "://" + s.Addr + "/health"); err == nil {
			_ = res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("etcd did not become healthy in 15 s")
		}
	}
}

// JetStream starts an embedded nats-server with JetStream on a random port
// of 127.0.0.1, its store in a temporary directory; stop shuts it down and
// waits until it has (callers checking for leaked goroutines stop it
// first).
func JetStream(tb testing.TB) (srv *server.Server, stop func()) {
	tb.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: tb.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		tb.Fatalf("nats-server: %v", err)
	}
	srv.Start()
	stop = func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
	if !srv.ReadyForConnections(10 * time.Second) {
		stop()
		tb.Fatal("nats-server not ready in 10 s")
	}
	return srv, stop
}
