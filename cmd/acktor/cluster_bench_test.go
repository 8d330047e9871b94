package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// runStats is what a run's --stats file says of its speed.
type runStats struct {
	Completed    uint64  `json:"completed"`
	Tuples       uint64  `json:"tuples"`
	TuplesPerSec float64 `json:"tuples_per_second"`
}

func readRunStats(tb testing.TB, path string) runStats {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var st runStats
	if err := json.Unmarshal(b, &st); err != nil {
		tb.Fatal(err)
	}
	return st
}

// BenchmarkClusterWordcount counts the same 1M lines on an embedded member
// and on three `acktor node` processes on this machine (the same tasks and
// ackers: 3 spout, 3 split and 2 count tasks, 3 ackers, max pending 1024),
// each a fresh process, in the same iteration. It reports both runs'
// tuples/s (the runs alone, as their --stats give them, not process or
// member start) and the cluster's over the embedded's: what crossing
// members costs (the goal is x-embedded >= 0.6).
func BenchmarkClusterWordcount(b *testing.B) {
	const lines = 1_000_000
	dir := b.TempDir()
	input, _ := writeInput(b, dir, lines)
	var embedded, clustered float64
	for i := range b.N {
		emb := filepath.Join(dir, "embedded-"+strconv.Itoa(i)+".json")
		cmd := exec.Command(os.Args[0], "wordcount", "--input", input, "--output", os.DevNull, "--stats", emb,
			"--progress", "none", "--ackers", "3", "--max-pending", "1024", "--spouts", "3", "--splitters", "3", "--counters", "2")
		cmd.Env = append(os.Environ(), asMain+"=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("embedded word count: %v\n%s", err, out)
		}
		e := readRunStats(b, emb)

		sub := filepath.Join(dir, "cluster-"+strconv.Itoa(i))
		if err := os.Mkdir(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		paths, _ := writeNodeConfigs(b, sub, input, "30s", "")
		w1, _ := startNode(b, paths[1])
		w2, _ := startNode(b, paths[2])
		driver, stderr := startDriver(b, paths[0])
		var tail []byte
		buf := make([]byte, 1<<16)
		for { // the driver's log, kept for an error
			n, err := stderr.Read(buf)
			tail = append(tail[max(0, len(tail)-4096):], buf[:n]...)
			if err != nil {
				break
			}
		}
		if err := driver.Wait(); err != nil {
			b.Fatalf("driver: %v\n%s", err, tail)
		}
		_ = w1.Process.Kill()
		_ = w2.Process.Kill()
		c := readRunStats(b, filepath.Join(sub, "stats.json"))
		if e.Completed != lines || c.Completed != lines {
			b.Fatalf("completed %d embedded and %d in the cluster, want %d", e.Completed, c.Completed, lines)
		}
		embedded += e.TuplesPerSec
		clustered += c.TuplesPerSec
	}
	b.ReportMetric(embedded/float64(b.N), "embedded-tuples/s")
	b.ReportMetric(clustered/float64(b.N), "cluster-tuples/s")
	b.ReportMetric(clustered/embedded, "x-embedded")
}
