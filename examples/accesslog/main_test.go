package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acktor/acktor/gateway"
	"github.com/acktor/acktor/internal/testserver"
	"github.com/acktor/acktor/member"
	"github.com/acktor/acktor/window"
)

// asMain makes the test binary run the example: the test starts real
// processes of it.
const asMain = "ACCESSLOG_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMain) == "1" {
		os.Args = append(os.Args[:1], strings.Fields(os.Getenv(asMain+"_ARGS"))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// start runs the example with the config at path, its output in path.log;
// the test kills it at the end if it still runs.
func start(t *testing.T, path string) *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), asMain+"=1", asMain+"_ARGS=--config "+path)
	out, err := os.Create(path + ".log")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait(); _ = out.Close() })
	return cmd
}

// truth is the status<TAB>requests<TAB>bytes lines of access.log, counted
// plainly.
func truth(t *testing.T) string {
	f, err := os.Open("access.log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	reqs, bytes := map[string]int{}, map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		n, _ := strconv.Atoi(fs[3])
		reqs[fs[2]]++
		bytes[fs[2]] += n
	}
	var b strings.Builder
	for _, s := range slices.Sorted(maps.Keys(reqs)) {
		fmt.Fprintf(&b, "%s\t%d\t%d\n", s, reqs[s], bytes[s])
	}
	return b.String()
}

// TestThreeMembers runs the example's topology on three processes of it,
// from configs like the committed ones, and checks the driver's results
// against the log counted plainly.
func TestThreeMembers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes")
	}
	dir := t.TempDir()
	ports := testserver.FreePorts(t, 3)
	in, err := filepath.Abs("access.log")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for i := range 3 {
		text, err := os.ReadFile(fmt.Sprintf("node%d.yaml", i))
		if err != nil {
			t.Fatal(err)
		}
		cfg := string(text)
		for j, p := range ports {
			cfg = strings.ReplaceAll(cfg, fmt.Sprint(16350+j), fmt.Sprint(p))
		}
		cfg = strings.NewReplacer("examples/accesslog/access.log", in, "status.tsv", filepath.Join(dir, "status.tsv")).Replace(cfg)
		paths = append(paths, filepath.Join(dir, fmt.Sprintf("node%d.yaml", i)))
		if err := os.WriteFile(paths[i], []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	start(t, paths[1])
	start(t, paths[2])
	if err := start(t, paths[0]).Wait(); err != nil {
		b, _ := os.ReadFile(paths[0] + ".log")
		t.Fatalf("driver: %v\n%s", err, b)
	}
	got, err := os.ReadFile(filepath.Join(dir, "status.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	if want := truth(t); string(got) != want {
		t.Fatalf("results\n%s\nwant\n%s", got, want)
	}
}

// generatedTruth is the requests and bytes per status of the first n
// generated lines, counted plainly (malformed lines left out, as parse
// rejects them).
func generatedTruth(seed, n uint64) map[string]window.Entry {
	out := map[string]window.Entry{}
	for i := range n {
		fs := strings.Fields(accessLine(seed, i))
		if len(fs) != 4 {
			continue
		}
		b, err := strconv.ParseInt(fs[3], 10, 64)
		if err != nil {
			continue
		}
		e := out[fs[2]]
		e.Key, e.Count, e.Sum = fs[2], e.Count+1, e.Sum+b
		out[fs[2]] = e
	}
	return out
}

// TestServiceThreeMembers serves the example on three processes of it,
// from the committed service configs with free ports and a short stream,
// until every member's gateway answers the generated lines' counts
// exactly; then stops them one by one with SIGTERM, the others still
// answering the same, and checks that each exits cleanly.
func TestServiceThreeMembers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes")
	}
	const lines = 1500
	dir := t.TempDir()
	ports := testserver.FreePorts(t, 6) // three members', three gateways'
	var paths []string
	var seed uint64
	for i := range 3 {
		text, err := os.ReadFile(fmt.Sprintf("service%d.yaml", i))
		if err != nil {
			t.Fatal(err)
		}
		cfg := string(text)
		for j := range 3 {
			cfg = strings.ReplaceAll(cfg, fmt.Sprint(16370+j), fmt.Sprint(ports[j]))
			cfg = strings.ReplaceAll(cfg, fmt.Sprintf("127.0.0.1:%d ", 7170+j), fmt.Sprintf("127.0.0.1:%d ", ports[3+j]))
		}
		cfg = strings.NewReplacer("lines: 5400000", fmt.Sprintf("lines: %d", lines), "rate: 500", "rate: 200").Replace(cfg)
		paths = append(paths, filepath.Join(dir, fmt.Sprintf("service%d.yaml", i)))
		if err := os.WriteFile(paths[i], []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := member.Load(paths[i])
		if err != nil {
			t.Fatal(err)
		}
		if c.Job.Lines != lines || c.Job.Mode != "service" || c.Gateway.Address != fmt.Sprintf("127.0.0.1:%d", ports[3+i]) {
			t.Fatalf("%s: lines %d, mode %s, gateway %s: the rewrite missed", paths[i], c.Job.Lines, c.Job.Mode, c.Gateway.Address)
		}
		seed = c.Tracker.Seed
	}
	want := generatedTruth(seed, lines)
	began := time.Now()
	t.Setenv("ACKTOR_TOKEN", "s3cret") // the admin endpoints on, as in the README
	cmds := make([]*exec.Cmd, 3)
	for i := range 3 {
		cmds[i] = start(t, paths[i])
	}
	client := &http.Client{Timeout: 5 * time.Second}
	// counts is what the gateway on port answers now, by status.
	counts := func(port int) (map[string]window.Entry, error) {
		res, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/api/counters/status?top=10", port))
		if err != nil {
			return nil, err
		}
		defer res.Body.Close()
		var a gateway.CounterAnswer
		if err := json.NewDecoder(res.Body).Decode(&a); err != nil || res.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s: %v", res.Status, err)
		}
		got := map[string]window.Entry{}
		for _, e := range a.Top {
			got[e.Key] = e
		}
		return got, nil
	}
	members := []int{0, 1, 2}
	// agree waits until every running member's gateway answers want.
	agree := func(running []int, within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for _, i := range running {
			for {
				got, err := counts(ports[3+i])
				if err == nil && maps.Equal(got, want) {
					break
				}
				if time.Now().After(deadline) {
					log, _ := os.ReadFile(paths[i] + ".log")
					t.Fatalf("member %d's gateway: %v (%v), want %v; the end of its log:\n%s", i, got, err, want, log[max(0, len(log)-4096):])
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
	agree(members, 20*time.Second)
	t.Logf("every gateway answers the %d lines' counts after %v", lines, time.Since(began).Round(time.Millisecond))
	for i := range 3 {
		if err := cmds[i].Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := cmds[i].Wait(); err != nil {
			b, _ := os.ReadFile(paths[i] + ".log")
			t.Fatalf("member %d after SIGTERM: %v\n%s", i, err, b)
		}
		t.Logf("member %d exited after SIGTERM at %v", i, time.Since(began).Round(time.Millisecond))
		if i < 2 {
			agree(members[i+1:], 10*time.Second) // the windows moved with the counter tasks
		}
	}
}
