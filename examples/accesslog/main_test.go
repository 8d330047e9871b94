package main

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/acktor/acktor/internal/testserver"
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
	start := func(path string) *exec.Cmd {
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
	start(paths[1])
	start(paths[2])
	if err := start(paths[0]).Wait(); err != nil {
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
