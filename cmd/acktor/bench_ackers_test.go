package main

import (
	"bytes"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/acktor/acktor/tracker/ring"
)

// readAckersCSV reads the --csv file of bench ackers, one map per row.
func readAckersCSV(t *testing.T, path string) []map[string]string {
	t.Helper()
	return readCSV(t, path, ackersCSVHeader)
}

// A small run: one experiment-2 row per k with every root placed and every
// pre-sized table at most ~23 B a record unless it grew, and experiment 3
// with the spread the ring package documents for DefaultReplicas (≤ 1.10)
// and a larger one with the paper's two points.
//
// Reference: the tracking paper §4.2, §4.3, figures 4(b) and 4(c)
func TestBenchAckersCSV(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out.csv")
	const roots, maxAckers = 20_000, 3
	if err := acktor(t, "bench", "ackers", "--roots", strconv.Itoa(roots), "--max-ackers", strconv.Itoa(maxAckers), "--csv", out); err != nil {
		t.Fatal(err)
	}
	rows := readAckersCSV(t, out)
	if len(rows) != maxAckers+2*len(benchAckersPaperRoots) {
		t.Fatalf("%d rows, want %d", len(rows), maxAckers+2*len(benchAckersPaperRoots))
	}
	for i, row := range rows[:maxAckers] {
		k := i + 1
		if row["experiment"] != "2" || int(num(t, row, "ackers")) != k || int(num(t, row, "roots")) != roots ||
			int(num(t, row, "replicas")) != ring.DefaultReplicas {
			t.Fatalf("row %d: %v, want experiment 2, %d ackers, %d roots", i, row, k, roots)
		}
		sum := 0
		for _, c := range strings.Fields(row["counts"]) {
			n, err := strconv.Atoi(c)
			if err != nil {
				t.Fatalf("row %d: counts %q: %v", i, row["counts"], err)
			}
			sum += n
		}
		if len(strings.Fields(row["counts"])) != k || sum != roots {
			t.Errorf("row %d: counts %q, want %d counts summing to %d", i, row["counts"], k, roots)
		}
		perRecord := num(t, row, "bytes/record")
		switch {
		case num(t, row, "max/mean") < 1 || num(t, row, "min/mean") > 1:
			t.Errorf("row %d: max/mean %s, min/mean %s", i, row["max/mean"], row["min/mean"])
		case row["grown"] == "0" && perRecord > 24:
			t.Errorf("row %d: pre-sized, nothing grew, yet %.2f B a record, want <= 24", i, perRecord)
		case perRecord > 24*1.5 || num(t, row, "unsized_bytes/record") > 24*1.5:
			t.Errorf("row %d: %.2f and %s B a record, want at most one growth by half over 24", i, perRecord, row["unsized_bytes/record"])
		case num(t, row, "max_bytes") < num(t, row, "mean_bytes"):
			t.Errorf("row %d: max_bytes %s < mean_bytes %s", i, row["max_bytes"], row["mean_bytes"])
		case (k == 1) != (row["paper"] != "—"):
			t.Errorf("row %d: paper %q", i, row["paper"])
		}
	}
	if rows[0]["grown"] != "0" {
		t.Errorf("one acker pre-sized for all roots grew: %v", rows[0])
	}
	spread := map[int]float64{} // max/mean at 100k roots by replicas
	for i, row := range rows[maxAckers:] {
		if row["experiment"] != "3" || int(num(t, row, "ackers")) != benchAckersPaperAckers || row["mean_bytes"] != "" {
			t.Fatalf("row %d: %v, want experiment 3, 6 ackers, no memory", maxAckers+i, row)
		}
		mm := num(t, row, "max/mean")
		if mm < 1 || num(t, row, "min/mean") > 1 {
			t.Errorf("row %d: max/mean %v, min/mean %s", maxAckers+i, mm, row["min/mean"])
		}
		if int(num(t, row, "roots")) == 100_000 {
			spread[int(num(t, row, "replicas"))] = mm
		}
	}
	if d := spread[ring.DefaultReplicas]; d > 1.10 {
		t.Errorf("100k roots, %d replicas: max/mean %.3f, want <= 1.10 (tracker/ring's documented bound)", ring.DefaultReplicas, d)
	}
	if p, d := spread[2], spread[ring.DefaultReplicas]; !(p > d) {
		t.Errorf("100k roots: max/mean %.3f with 2 replicas, not above %.3f with %d", p, d, ring.DefaultReplicas)
	}
}

// Same flags, same output.
func TestBenchAckersDeterministic(t *testing.T) {
	run := func() string {
		cmd, finish := newRoot()
		defer finish()
		var stdout bytes.Buffer
		cmd.SetOut(&stdout)
		cmd.SetArgs([]string{"bench", "ackers", "--roots", "3000", "--max-ackers", "2", "--seed", "7"})
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
		return stdout.String()
	}
	a, b := run(), run()
	if a != b {
		t.Fatalf("two runs differ:\n%s\n%s", a, b)
	}
	if !strings.Contains(a, "Experiment 2") || !strings.Contains(a, "Experiment 3") {
		t.Fatalf("output:\n%s", a)
	}
	for l := range strings.Lines(a) {
		if strings.HasSuffix(strings.TrimSuffix(l, "\n"), " ") {
			t.Errorf("trailing blanks in %q", l)
		}
	}
}

// Bad flags fail with exit status 2 and a message naming the flag.
func TestBenchAckersBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--roots", "0"}, "--roots 0"},
		{[]string{"--roots", "20000000"}, "--roots 20000000"},
		{[]string{"--max-ackers", "0"}, "--max-ackers 0"},
		{[]string{"--max-ackers", "65"}, "--max-ackers 65"},
		{[]string{"--replicas", "0"}, "--replicas 0"},
		{[]string{"--replicas", "5000"}, "--replicas 5000"},
		{[]string{"--paper-replicas", "-1"}, "--paper-replicas -1"},
		{[]string{"--csv", filepath.Join(t.TempDir(), "no", "such", "dir.csv")}, "--csv"},
		{[]string{"--frobnicate"}, "unknown flag: --frobnicate"},
	} {
		err := acktor(t, append([]string{"bench", "ackers", "--roots", "100"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one naming %q", tc.args, err, tc.want)
			continue
		}
		var ee *exitError
		if strings.HasPrefix(tc.want, "--") && tc.want != "--csv" && (!errors.As(err, &ee) || ee.code != 2) {
			t.Errorf("%v: error %v, want exit status 2", tc.args, err)
		}
	}
}
