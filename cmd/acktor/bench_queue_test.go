package main

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// TestBenchQueue runs one load for three seconds (the stages are measured
// over the last two): the row has about the arrival rate asked for and
// model and measurement side by side.
func TestBenchQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a topology for three seconds")
	}
	cmd, finish := newRoot()
	defer finish()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"bench", "queue", "--loads", "0.5", "--duration", "3s", "--service", "200us"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 2 || !strings.Contains(lines[0], "M/M/1") {
		t.Fatalf("output:\n%s", out.String())
	}
	f := strings.Fields(lines[1])
	if len(f) != 10 || f[0] != "0.50" {
		t.Fatalf("row %q", lines[1])
	}
	lambda, _ := strconv.ParseFloat(f[1], 64)
	modelL, _ := strconv.ParseFloat(f[4], 64)
	measuredL, _ := strconv.ParseFloat(f[6], 64)
	if f[4] == "unstable" { // a machine too busy to serve at 200 µs: the command must say so
		if !strings.Contains(out.String(), "this machine could not keep up") || lambda < 1500 || lambda > 3500 || measuredL <= 0 {
			t.Fatalf("output:\n%s", out.String())
		}
		t.Logf("the machine could not keep up; the command said so:\n%s", out.String())
		return
	}
	if len(lines) != 2 {
		t.Fatalf("output:\n%s", out.String())
	}
	if lambda < 1500 || lambda > 3500 || modelL <= 0 || measuredL <= 0 {
		t.Fatalf("row %q: λ %v (want about 2500), in stage %v by the model and %v measured", lines[1], lambda, modelL, measuredL)
	}
}

func TestBenchQueueFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--loads", "0.5,1.2"}, "--loads"},
		{[]string{"--loads", "x"}, "--loads"},
		{[]string{"--service", "1ns"}, "--service"},
		{[]string{"--servers", "0"}, "--servers"},
		{[]string{"--duration", "10ms"}, "--duration"},
	} {
		err := acktor(t, append([]string{"bench", "queue"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error naming %s", tc.args, err, tc.want)
		}
	}
}
