package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/acktor/acktor/internal/testserver"
)

// withTLS gives the node config at path a cluster.tls section with f's
// files.
func withTLS(t *testing.T, path string, f testserver.TLSFiles) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tls := fmt.Sprintf("cluster:\n  tls:\n    ca: %s\n    cert: %s\n    key: %s\n", f.CA, f.Cert, f.Key)
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), "cluster:\n", tls, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestNodeMutualTLS runs the word count over three `acktor node` members
// that talk mutual TLS, while two more processes listed among the peers
// try to take part: one with a certificate of another authority, one with
// none. Neither joins: the counts are exact, nothing replays, the members
// log the refusal, and the two never see a member but themselves.
func TestNodeMutualTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five processes")
	}
	const lines = 300_000
	dir := t.TempDir()
	input, truth := writeInput(t, dir, lines)
	paths, _ := writeNodeConfigsN(t, 5, dir, input, "30s", "", "")
	member := testserver.Certs(t, dir, "member")
	for _, p := range paths[:3] {
		withTLS(t, p, member)
	}
	withTLS(t, paths[3], testserver.Certs(t, dir, "stranger"))
	startNode(t, paths[3])
	startNode(t, paths[4])
	startNode(t, paths[1])
	startNode(t, paths[2])
	driver, stderr := startDriver(t, paths[0])
	sc := bufio.NewScanner(stderr)
	stuck := time.AfterFunc(90*time.Second, func() { _ = driver.Process.Kill() })
	defer stuck.Stop()
	_, tail := driverDone(t, sc, nil, driver)
	st, b := readNodeStats(t, dir)
	if st.Completed != lines || st.Failed != 0 || st.Replayed != 0 {
		t.Fatalf("stats: %s", b)
	}
	exactCounts(t, dir, truth)
	logs := map[string]string{"driver": strings.Join(tail, "\n")}
	for i, p := range paths[1:] {
		b, err := os.ReadFile(p + ".log")
		if err != nil {
			t.Fatal(err)
		}
		logs[fmt.Sprint("node", i+1)] = string(b)
	}
	// The strangers poll every peer each refresh: each member logs their
	// address, the same 127.0.0.1, once.
	for _, m := range []string{"driver", "node1", "node2"} {
		if n := strings.Count(logs[m], "refused a connection from 127.0.0.1"); n != 1 {
			t.Fatalf("%s logged %d refusals, want 1:\n%s", m, n, logs[m])
		}
	}
	for _, stranger := range []string{"node3", "node4"} {
		if alone := regexp.MustCompile(`members=[^1]`); alone.MatchString(logs[stranger]) {
			t.Fatalf("%s saw other members:\n%s", stranger, logs[stranger])
		}
	}
}
