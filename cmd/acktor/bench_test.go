package main

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/acktor/acktor/sketch"
)

// benchText returns a text of distinct words w0, w1, … in which word k
// occurs 1 + 60/(k+1) times (a Zipf-like law), first appearances in order.
func benchText(distinct int) string {
	var b strings.Builder
	for round := 0; round <= 60; round++ {
		for k := range distinct {
			if round < 1+60/(k+1) {
				fmt.Fprintf(&b, "w%d ", k)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// readBenchCSV returns the rows of the sketch bench's --csv file.
func readBenchCSV(t *testing.T, path string) []map[string]string {
	t.Helper()
	return readCSV(t, path, strings.Split("dataset,n,w,d,n/wd,p5,p6,inexact_plain,inexact_cu,relerr8,relerr_plain,relerr_cu,relerr_vector,cm_bytes,vector_bytes,vector_count_bytes,note", ","))
}

// readCSV reads a --csv file into one map per row, from column name to
// cell, after checking its header.
func readCSV(t *testing.T, path string, header []string) []map[string]string {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	recs, err := csv.NewReader(fh).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 || strings.Join(recs[0], ",") != strings.Join(header, ",") {
		t.Fatalf("CSV header %q, want %q", recs, header)
	}
	var rows []map[string]string
	for _, rec := range recs[1:] {
		row := make(map[string]string, len(rec))
		for i, c := range rec {
			row[recs[0][i]] = c
		}
		rows = append(rows, row)
	}
	return rows
}

// num parses a numeric cell of row.
func num(t *testing.T, row map[string]string, col string) float64 {
	t.Helper()
	x, err := strconv.ParseFloat(row[col], 64)
	if err != nil {
		t.Fatalf("row %v: column %s: %v", row, col, err)
	}
	return x
}

// The table of both data sets: one row per data set and ratio, n and the
// formulas as documented, the Vector exact, conservative update never worse
// than plain, and formula (5) matching the measured share on the Zipf data.
func TestBenchSketchCSV(t *testing.T) {
	text := writeFile(t, "in.txt", benchText(2500))
	out := filepath.Join(t.TempDir(), "out.csv")
	const w, d = 64, 8
	args := []string{"bench", "sketch", "--input", text, "--width", "64", "--zipf-lines", "5000", "--csv", out}
	if err := acktor(t, args...); err != nil {
		t.Fatal(err)
	}
	rows := readBenchCSV(t, out)
	ratios := []float64{0.25, 0.5, 1, 1.0001, 2, 4}
	if len(rows) != 2*len(ratios) {
		t.Fatalf("%d rows, want %d", len(rows), 2*len(ratios))
	}
	for i, row := range rows {
		name, r := "zipf", ratios[i%len(ratios)]
		if i >= len(ratios) {
			name = "text:in.txt"
		}
		n := int(num(t, row, "n"))
		wantN := int(math.Ceil(r * w * d))
		if r == 1 {
			wantN = w * d
		}
		switch {
		case row["dataset"] != name || row["note"] != "":
			t.Errorf("row %d: dataset %q, note %q, want %q and no note", i, row["dataset"], row["note"], name)
		case n != wantN || num(t, row, "w") != w || num(t, row, "d") != d:
			t.Errorf("row %d: n %d, w %s, d %s, want %d, %d, %d", i, n, row["w"], row["d"], wantN, w, d)
		case r == 1.0001 && n != w*d+1:
			t.Errorf("row %d: ratio 1.0001 gives n %d, want w·d+1 = %d", i, n, w*d+1)
		case math.Abs(num(t, row, "p5")-sketch.InexactShare(n, w, d)) > 1e-4:
			t.Errorf("row %d: p5 %s, formula (5) gives %.4f", i, row["p5"], sketch.InexactShare(n, w, d))
		case num(t, row, "relerr_vector") != 0:
			t.Errorf("row %d: the exact vector has relative error %s", i, row["relerr_vector"])
		case num(t, row, "inexact_cu") > num(t, row, "inexact_plain"):
			t.Errorf("row %d: conservative update inexact share %s > plain %s", i, row["inexact_cu"], row["inexact_plain"])
		case num(t, row, "relerr_cu") > num(t, row, "relerr_plain"):
			t.Errorf("row %d: conservative update relative error %s > plain %s", i, row["relerr_cu"], row["relerr_plain"])
		case num(t, row, "cm_bytes") != 8*w*d || num(t, row, "vector_count_bytes") != float64(8*n) || num(t, row, "vector_bytes") < float64(3*n):
			t.Errorf("row %d: bytes %s, %s, %s", i, row["cm_bytes"], row["vector_bytes"], row["vector_count_bytes"])
		}
		// Formula (5) against the measured share: at ratio 1 for the Zipf
		// data, as the paper's claim; loosely for every row.
		diff := math.Abs(num(t, row, "inexact_plain") - num(t, row, "p5"))
		if name == "zipf" && r == 1 && diff >= 0.05 || diff >= 0.15 {
			t.Errorf("row %d (%s, ratio %v): measured inexact share %s, formula (5) %s", i, name, r, row["inexact_plain"], row["p5"])
		}
	}

	// Same flags, same output; another seed, other hashes.
	first, _ := os.ReadFile(out)
	if err := acktor(t, args...); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(out); !bytes.Equal(first, again) {
		t.Error("the same flags gave another CSV")
	}
	if err := acktor(t, append(args, "--seed", "2")...); err != nil {
		t.Fatal(err)
	}
	if other, _ := os.ReadFile(out); bytes.Equal(first, other) {
		t.Error("--seed 2 gave the same CSV as --seed 1")
	}
}

// The table on stdout has the CSV's header and rows, aligned, without
// trailing blanks.
func TestBenchSketchTable(t *testing.T) {
	text := writeFile(t, "in.txt", benchText(200))
	cmd, finish := newRoot()
	defer finish()
	var stdout bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetArgs([]string{"bench", "sketch", "--input", text, "--width", "16", "--zipf-lines", "500", "--ratios", "0.5,1"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", stdout.String())
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "dataset  ") || !strings.Contains(lines[0], "relerr_vector") {
		t.Fatalf("table:\n%s", stdout.String())
	}
	col := strings.Index(lines[0], "relerr_vector")
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l[col:], "0.0000 ") {
			t.Errorf("relerr_vector not aligned or not 0 in %q", l)
		}
		if strings.HasSuffix(l, " ") {
			t.Errorf("trailing blanks in %q", l)
		}
	}
}

// A data set with too few distinct keys is measured with a narrower width,
// and the note says so.
func TestBenchSketchNarrowsWidth(t *testing.T) {
	text := writeFile(t, "small.txt", benchText(40))
	out := filepath.Join(t.TempDir(), "out.csv")
	if err := acktor(t, "bench", "sketch", "--input", text, "--width", "16", "--zipf-lines", "0", "--ratios", "0.5,1", "--csv", out); err != nil {
		t.Fatal(err)
	}
	rows := readBenchCSV(t, out)
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rows))
	}
	for i, want := range []string{"20", "40"} { // width 40/8 = 5
		if rows[i]["n"] != want || rows[i]["w"] != "5" || !strings.Contains(rows[i]["note"], "w 16→5") {
			t.Errorf("row %d: n %s, w %s, note %q; want n %s, w 5 and a note", i, rows[i]["n"], rows[i]["w"], rows[i]["note"], want)
		}
	}
}

// Without --input and without the default text, only the Zipf data set.
func TestBenchSketchSkipsMissingDefaultText(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := acktor(t, "bench", "sketch", "--width", "16", "--zipf-lines", "500", "--ratios", "1", "--csv", "out.csv"); err != nil {
		t.Fatal(err)
	}
	if rows := readBenchCSV(t, "out.csv"); len(rows) != 1 || rows[0]["dataset"] != "zipf" {
		t.Errorf("rows %v, want one zipf row", rows)
	}
	if err := acktor(t, "bench", "sketch", "--zipf-lines", "0"); err == nil || !strings.Contains(err.Error(), "no data set") {
		t.Errorf("no data set: error %v", err)
	}
}

func TestBenchSketchBadFlags(t *testing.T) {
	text := writeFile(t, "in.txt", benchText(100))
	tiny := writeFile(t, "tiny.txt", "a b c\n")
	base := []string{"bench", "sketch", "--input", text, "--width", "4", "--zipf-lines", "100"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--depth", "0"}, "--depth 0"},
		{[]string{"--depth", "65"}, "--depth 65"},
		{[]string{"--width", "0"}, "--width 0"},
		{[]string{"--width", "100000000"}, "--width 100000000"},
		{[]string{"--width", "ten"}, "--width"},
		{[]string{"--ratios", "0.5,x,2"}, `element 2, "x"`},
		{[]string{"--ratios", "1,-2"}, `element 2, "-2"`},
		{[]string{"--ratios", "0"}, `element 1, "0"`},
		{[]string{"--ratios", "1,,2"}, `element 2, ""`},
		{[]string{"--ratios", "NaN"}, `--ratios "NaN"`},
		{[]string{"--ratios", "Inf"}, `--ratios "Inf"`},
		{[]string{"--ratios", ""}, "--ratios"},
		{[]string{"--zipf-lines", "-1"}, "--zipf-lines -1"},
		{[]string{"--zipf-lines", "1", "--width", "64"}, "--zipf-lines 1"}, // too few distinct keys
		{[]string{"--input", filepath.Join(t.TempDir(), "missing.txt")}, "--input"},
		{[]string{"--input", t.TempDir()}, "is a directory"},
		{[]string{"--input", tiny}, "--input " + tiny},
		{[]string{"--csv", filepath.Join(t.TempDir(), "no", "such", "out.csv")}, "--csv"},
	} {
		err := acktor(t, append(append([]string(nil), base...), tc.args...)...)
		var ee *exitError
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want it to mention %q", tc.args, err, tc.want)
		} else if errors.As(err, &ee) && ee.code != 2 {
			t.Errorf("%v: exit status %d, want 2", tc.args, ee.code)
		}
	}
}
