package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// asMain makes the test binary run the acktor command: the node tests start
// real processes of it.
const asMain = "ACKTOR_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMain) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// freePorts returns n ports free on 127.0.0.1 a moment ago.
func freePorts(t *testing.T, n int) []int {
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

// writeNodeConfigs writes one config per member of a 3-member cluster;
// member 0 drives the word count of input.
func writeNodeConfigs(t *testing.T, dir, input string) []string {
	ports := freePorts(t, 3)
	var peers []string
	for _, p := range ports {
		peers = append(peers, fmt.Sprintf("127.0.0.1:%d", p))
	}
	var paths []string
	for i, p := range ports {
		cfg := fmt.Sprintf(`cluster:
  name: failover
  host: 127.0.0.1
  provider: automanaged
  automanaged:
    port: %d
    peers: [%s]
    refresh: 500ms
tracker:
  ackers: 3
  timeout: 2s
  max_pending: 1024
  max_replays: 30
  progress: log
job:
  topology: wordcount
  driver: %v
  members: 3
  input: %s
  output: %s
  stats: %s
  spouts: 3
  splitters: 3
  counters: 2
`, p, strings.Join(peers, ", "), i == 0, input, filepath.Join(dir, "out.tsv"), filepath.Join(dir, "stats.json"))
		path := filepath.Join(dir, fmt.Sprintf("node%d.yaml", i))
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	return paths
}

// startNode starts `acktor node --config path` as a process of its own.
func startNode(t *testing.T, path string) (*exec.Cmd, *os.File) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "node", "--config", path, "--log-level", "info")
	cmd.Env = append(os.Environ(), asMain+"=1")
	log, err := os.Create(path + ".log")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		_ = log.Close()
	})
	return cmd, log
}

// TestNodeKilled runs the word count over three `acktor node` processes and
// kill -9s a worker mid-run: every line still finishes, none is
// dead-lettered, and every count is at least the truth.
func TestNodeKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(3, 3))
	var text strings.Builder
	truth := map[string]int64{}
	const lines = 400_000
	for range lines {
		for i := range 1 + rng.IntN(6) {
			w := "w" + strconv.Itoa(rng.IntN(300))
			truth[w]++
			if i > 0 {
				text.WriteByte(' ')
			}
			text.WriteString(w)
		}
		text.WriteByte('\n')
	}
	input := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(input, []byte(text.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	paths := writeNodeConfigs(t, dir, input)
	startNode(t, paths[1])
	victim, _ := startNode(t, paths[2])

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	driver := exec.CommandContext(ctx, os.Args[0], "node", "--config", paths[0])
	driver.Env = append(os.Environ(), asMain+"=1")
	stderr, err := driver.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := driver.Start(); err != nil {
		t.Fatal(err)
	}
	var tail []string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() { // the first progress line: the run is under way
		tail = append(tail, sc.Text())
		if strings.Contains(sc.Text(), "progress:") {
			break
		}
	}
	killedAt := time.Now()
	if err := victim.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		tail = append(tail, sc.Text())
	}
	if err := driver.Wait(); err != nil {
		t.Fatalf("driver: %v\n%s", err, strings.Join(tail[max(0, len(tail)-20):], "\n"))
	}
	t.Logf("the run finished %v after the kill:\n%s", time.Since(killedAt).Round(time.Millisecond), strings.Join(tail, "\n"))

	var st struct {
		Roots        uint64 `json:"roots"`
		Completed    uint64 `json:"completed"`
		Replayed     uint64 `json:"replayed"`
		DeadLettered uint64 `json:"dead_lettered"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "stats.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if st.Completed != st.Roots || st.Roots < lines || st.DeadLettered != 0 {
		t.Fatalf("stats: %s", b)
	}
	out, err := os.ReadFile(filepath.Join(dir, "out.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		w, n, _ := strings.Cut(l, "\t")
		got[w], _ = strconv.ParseInt(n, 10, 64)
	}
	for w, n := range truth {
		if got[w] < n {
			t.Fatalf("%s counted %d, truth %d", w, got[w], n)
		}
	}
	t.Logf("stats: roots %d, replayed %d", st.Roots, st.Replayed)
}

func TestNodeConfigErrors(t *testing.T) {
	good := "cluster:\n  automanaged:\n    port: 7000\n    peers: [127.0.0.1:7000]\njob:\n  input: in.txt\n"
	for _, tc := range []struct {
		name, text, want string
	}{
		{"unknown field", good + "  prot: 3\n", "field prot not found"},
		{"not yaml", "cluster: [", "yaml"},
		{"members", good + "  members: 0\n", "job.members 0"},
		{"no input", "job:\n  input: \"\"\n", "job.input: empty"},
		{"topology", good + "  topology: join\n", `job.topology "join"`},
		{"provider", "cluster:\n  provider: consul\n" + good[len("cluster:\n"):], `cluster.provider "consul"`},
		{"host", "cluster:\n  host: example.org\n" + good[len("cluster:\n"):], `cluster.host "example.org"`},
		{"peers", "cluster:\n  automanaged:\n    port: 7000\n    peers: [nohost]\njob:\n  input: in.txt\n", `cluster.automanaged.peers: "nohost"`},
		{"duration", good + "  window: soon\n", "line 7: cannot unmarshal !!str `soon` into time.Duration"},
		{"tracker", good[:len(good)-len("job:\n  input: in.txt\n")] + "tracker:\n  wait_members: 0s\njob:\n  input: in.txt\n", "tracker.wait_members"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "node.yaml", tc.text)
			err := acktor(t, "node", "--config", path)
			var ee *exitError
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &ee) || ee.code != 2 {
				t.Fatalf("error %v, want exit 2 mentioning %q", err, tc.want)
			}
		})
	}
	if err := acktor(t, "node", "--config", filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "--config") {
		t.Fatalf("missing file: %v", err)
	}
}

// TestNodeJobErrorsNameFields: a job the word count rejects names the
// config field, not the flag.
func TestNodeJobErrorsNameFields(t *testing.T) {
	in := writeFile(t, "in.txt", "a b\n")
	path := writeFile(t, "node.yaml", fmt.Sprintf("cluster:\n  automanaged:\n    port: %d\n    peers: [127.0.0.1:1]\ntracker:\n  ackers: -1\njob:\n  input: %s\n", freePorts(t, 1)[0], in))
	if err := acktor(t, "node", "--config", path); err == nil || !strings.Contains(err.Error(), "tracker.ackers -1") {
		t.Fatalf("error %v, want one naming tracker.ackers", err)
	}
}
