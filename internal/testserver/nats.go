package testserver

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// NatsServer starts the system's nats-server binary (Debian's is 2.9, older
// than the server the tests embed) with JetStream on 127.0.0.1 for the test
// and returns its client URL. Without the binary the test skips, unless
// ACKTOR_REQUIRE_NATS=1 (set by .ci/run) makes that a failure.
func NatsServer(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		if os.Getenv("ACKTOR_REQUIRE_NATS") == "1" {
			t.Fatal("nats-server not found and ACKTOR_REQUIRE_NATS=1: install Debian's nats-server")
		}
		t.Skip("nats-server not found: install Debian's nats-server (apt-get install nats-server) to run this test")
	}
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", FreePorts(t, 1)[0])
	host, port, _ := net.SplitHostPort(addr)
	log, err := os.Create(filepath.Join(dir, "nats.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-js", "-a", host, "-p", port, "-sd", filepath.Join(dir, "store"))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		_ = log.Close()
	})
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			_ = c.Close()
			return "nats://" + addr
		}
		if time.Now().After(deadline) {
			t.Fatal("nats-server did not listen in 15 s")
		}
	}
}
