package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acktor/acktor/member"
	"github.com/acktor/acktor/source"
)

// acktor runs the command in-process and returns its error.
func acktor(t *testing.T, args ...string) error {
	t.Helper()
	cmd, finish := newRoot()
	defer finish()
	cmd.SetArgs(args)
	cmd.SetOut(os.Stderr)
	return cmd.Execute()
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestWordcountBadInput(t *testing.T) {
	text := writeFile(t, "in.txt", "a b\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"wordcount"}, "--input FILE"},
		{[]string{"wordcount", "--input", text, "--frobnicate"}, "unknown flag: --frobnicate"},
		{[]string{"wordcount", "--input", filepath.Join(t.TempDir(), "missing.txt")}, "--input"},
		{[]string{"wordcount", "--input", t.TempDir()}, "is a directory"},
		{[]string{"wordcount", "--input", text, "--fail-rate", "1.5"}, "--fail-rate 1.5"},
		{[]string{"wordcount", "--input", text, "--generate", "-5"}, "--generate -5: want a number of lines"},
		{[]string{"wordcount", "--input", text, "--drop-rate", "-0.1"}, "--drop-rate -0.1"},
		{[]string{"wordcount", "--input", text, "--ackers", "-1"}, "--ackers -1"},
		{[]string{"wordcount", "--input", text, "--max-pending", "0"}, "--max-pending 0"},
		{[]string{"wordcount", "--input", text, "--timeout", "1ns"}, "--timeout 1ns"},
		{[]string{"wordcount", "--input", text, "--splitters", "0"}, "--splitters 0"},
		{[]string{"wordcount", "--input", "-", "--spouts", "2"}, "stdin"},
		{[]string{"wordcount", "--input", text, "--generate", "5"}, "give one"},
		{[]string{"wordcount", "--input", text, "--timeout", "soon"}, "--timeout"},
		{[]string{"wordcount", "--input", text, "--progress", "loud"}, "--progress"},
		{[]string{"wordcount", "--input", text, "--stats", filepath.Join(t.TempDir(), "no", "such", "dir.json")}, "--stats"},
		{[]string{"wordcount", "--input", text, "--output", filepath.Join(t.TempDir(), "no", "out.tsv")}, "--output"},
		{[]string{"wordcount", "--input", text, "--max-pending", "100000000"}, "--max-pending 100000000"},
		{[]string{"wordcount", "--input", text, "--window", "10s", "--pane", "3s"}, "not a multiple"},
		{[]string{"wordcount", "--input", text, "--pane", "1s"}, "--window 0s: want > 0"},
		{[]string{"wordcount", "--input", text, "--window", "-1s"}, "--window -1s"},
		{[]string{"wordcount", "--input", text, "--event-step", "1ms"}, "--event-step: only with --generate"},
		{[]string{"wordcount", "--generate", "5", "--event-step", "-1ms"}, "--event-step -1ms"},
		{[]string{"wordcount", "--input", text, "--memprofile", filepath.Join(t.TempDir(), "no", "mem.prof")}, "--memprofile"},
	} {
		err := acktor(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want it to mention %q", tc.args, err, tc.want)
		}
	}
}

// TestMemProfile: --memprofile leaves a profile (gzipped, as pprof writes
// them) once the command ends.
func TestMemProfile(t *testing.T) {
	text := writeFile(t, "in.txt", "a b a\n")
	prof := filepath.Join(t.TempDir(), "mem.prof")
	if err := acktor(t, "wordcount", "--input", text, "--output", os.DevNull, "--progress", "none", "--memprofile", prof); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(prof)
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("--memprofile wrote %d bytes (%v), want a gzipped profile", len(b), err)
	}
}

func TestWordcountOutputAndStats(t *testing.T) {
	text := writeFile(t, "in.txt", "the cat\nthe  dog\r\n\nZebra the cat é\n")
	out := filepath.Join(t.TempDir(), "out.tsv")
	stats := filepath.Join(t.TempDir(), "stats.json")
	for _, ackers := range []string{"2", "0"} {
		if err := acktor(t, "wordcount", "--input", text, "--output", out, "--stats", stats, "--ackers", ackers, "--progress", "none"); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		want := "Zebra\t1\ncat\t2\ndog\t1\nthe\t3\né\t1\n" // bytewise order
		if string(got) != want {
			t.Fatalf("ackers %s: output\n%q\nwant\n%q", ackers, got, want)
		}
		var st map[string]any
		b, err := os.ReadFile(stats)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"roots", "completed", "failed", "replayed", "timed_out", "dead_lettered",
			"tuples", "peak_in_flight", "elapsed_seconds", "tuples_per_second", "ackers"} {
			if _, ok := st[k]; !ok {
				t.Errorf("stats lack %q: %s", k, b)
			}
		}
		if st["roots"] != 3.0 || st["completed"] != 3.0 || st["tuples"] != 3.0+8.0 {
			t.Errorf("ackers %s: stats %s", ackers, b)
		}
		if n := len(st["ackers"].([]any)); (ackers == "2" && n != 2) || (ackers == "0" && n != 0) {
			t.Errorf("ackers %s: %d acker entries", ackers, n)
		}
	}
}

func TestWordcountDeadLetterExitsNonZero(t *testing.T) {
	text := writeFile(t, "in.txt", strings.Repeat("a b c d e f g h\n", 50))
	err := acktor(t, "wordcount", "--input", text, "--output", filepath.Join(t.TempDir(), "o"),
		"--fail-rate", "0.5", "--max-replays", "0", "--progress", "none")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 1 || !strings.Contains(ee.msg, "dead-lettered") {
		t.Fatalf("error %v, want exit 1 naming dead-lettered lines", err)
	}
}

func TestWordcountStdin(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdin
	os.Stdin = r
	defer func() { os.Stdin = old }()
	go func() {
		_, _ = w.WriteString("x y\ny z\n")
		_ = w.Close()
	}()
	out := filepath.Join(t.TempDir(), "out")
	if err := acktor(t, "wordcount", "--input", "-", "--output", out, "--progress", "none"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(out); string(got) != "x\t1\ny\t2\nz\t1\n" {
		t.Fatalf("output %q", got)
	}
}

// TestWordcountWindowStats: --window over generated event times reports
// the window in --stats; --exactly-once with failures still counts every
// generated word of the window once (the totals match the window's lines).
func TestWordcountWindowStats(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out.tsv")
	stats := filepath.Join(t.TempDir(), "stats.json")
	if err := acktor(t, "wordcount", "--generate", "3000", "--event-step", "1ms", "--window", "1s", "--pane", "100ms",
		"--exactly-once", "--fail-rate", "0.01", "--timeout", "200ms", "--max-replays", "30",
		"--output", out, "--stats", stats, "--progress", "none"); err != nil {
		t.Fatal(err)
	}
	var st struct {
		Counted, Duplicates uint64
		Window              *struct {
			Start, End  string
			SizeSeconds float64 `json:"size_seconds"`
		}
	}
	b, err := os.ReadFile(stats)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if st.Window == nil || st.Window.Start != "2026-01-01T00:00:02Z" || st.Window.End != "2026-01-01T00:00:03Z" || st.Window.SizeSeconds != 1 {
		t.Fatalf("stats window %+v, want [2s, 3s) after 2026-01-01", st.Window)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	truth, err := source.GeneratorTruthLines(member.GeneratorConfig(3000, time.Millisecond, 1), 2000, 3000)
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, w := range slices.Sorted(maps.Keys(truth)) {
		fmt.Fprintf(&want, "%s\t%d\n", w, truth[w])
	}
	if string(got) != want.String() {
		t.Fatalf("window counts differ from the truth of lines 2000..2999 (%d vs %d bytes)", len(got), want.Len())
	}
}

func TestGatewayURL(t *testing.T) {
	for _, tc := range []struct{ flag, want string }{
		{"http://127.0.0.1:7070", "http://127.0.0.1:7070"},
		{"https://gw.example:443/", "https://gw.example:443/"},
		{"127.0.0.1:7070", "http://127.0.0.1:7070"},
		{"localhost:7070", "http://localhost:7070"},
	} {
		if got := gatewayURL(tc.flag); got != tc.want {
			t.Errorf("gatewayURL(%q) = %q, want %q", tc.flag, got, tc.want)
		}
	}
}

// TestOutputKeptOnFailure: a word count that fails before its end leaves
// the output file as it was (it was truncated when the run began); the
// counts are written whole when a run ends.
func TestOutputKeptOnFailure(t *testing.T) {
	in := writeFile(t, "in.txt", "a b\nc\n")
	out := writeFile(t, "counts.tsv", "earlier\t1\n")
	stats := filepath.Join(t.TempDir(), "no-such-dir", "stats.json")
	if err := acktor(t, "wordcount", "--input", in, "--output", out, "--stats", stats, "--progress", "none"); err == nil {
		t.Fatal("a run whose stats cannot be written succeeded")
	}
	if b, _ := os.ReadFile(out); string(b) != "earlier\t1\n" {
		t.Fatalf("after a failed run the output holds %q", b)
	}
	if err := acktor(t, "wordcount", "--input", in, "--output", out, "--progress", "none"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(out); string(b) != "a\t1\nb\t1\nc\t1\n" {
		t.Fatalf("after a run the output holds %q", b)
	}
}

// BenchmarkWordcountOneLine runs `acktor wordcount` over a one-line file as
// a process of its own, as a user runs it ("one-line": start an embedded
// member, count, write, stop), and, in the same run, `acktor wordcount
// --help` ("help": the same binary starting and exiting with no member).
// The difference is what a member's start and stop cost a short job.
func BenchmarkWordcountOneLine(b *testing.B) {
	dir := b.TempDir()
	in := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(in, []byte("the quick brown fox\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	out := filepath.Join(dir, "out.txt")
	for _, bc := range []struct {
		name string
		args []string
	}{
		{"help", []string{"wordcount", "--help"}},
		{"one-line", []string{"wordcount", "--input", in, "--output", out}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				cmd := exec.Command(os.Args[0], bc.args...)
				cmd.Env = append(os.Environ(), asMain+"=1")
				if got, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%v: %v\n%s", bc.args, err, got)
				}
			}
		})
	}
	if got, err := os.ReadFile(out); err != nil || !strings.Contains(string(got), "fox\t1") {
		b.Fatalf("output %q, %v", got, err)
	}
}
