// Package testserver starts what tests need on 127.0.0.1: free ports, and
// a real etcd server.
package testserver

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// FreePorts returns n ports free on 127.0.0.1 a moment ago.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return ports
}

// Etcd starts an etcd server (Debian's etcd-server) on 127.0.0.1 for the
// test and returns its client address. Without the etcd binary the test
// skips, unless ACKTOR_REQUIRE_ETCD=1 (set by .ci/run) makes that a failure.
func Etcd(t testing.TB) string {
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
	cmd := exec.Command(bin, "--name", "t", "--data-dir", t.TempDir(),
		"--listen-client-urls", "http://"+client, "--advertise-client-urls", "http://"+client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "t="+peer)
	log, err := os.Create(filepath.Join(t.TempDir(), "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait(); _ = log.Close() })
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if res, err := http.Get("http://" + client + "/health"); err == nil {
			_ = res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return client
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("etcd did not become healthy in 15 s")
		}
	}
}
