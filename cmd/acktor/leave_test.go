package main

import (
	"bufio"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestNodeLeave sends SIGTERM to one of two workers while a word count of
// 6 000 000 lines runs over three `acktor node` processes: the leaving
// member moves its spout tasks, processor tasks and ackers to the others
// before it goes, so no line fails or replays and the counts are exact.
func TestNodeLeave(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes")
	}
	longEnough(t, nodeLeave)
}

// nodeLeave runs the word count of lines and tells a worker to leave once
// the run is under way. It reports false, having checked nothing, when the
// run ended less than 3 s after.
func nodeLeave(t *testing.T, lines int) bool {
	t.Helper()
	dir := t.TempDir()
	input, truth := writeInput(t, dir, lines)
	paths, _ := writeNodeConfigsN(t, 3, dir, input, "30s", "", "")
	worker, _ := startNode(t, paths[1])
	defer func() { _ = worker.Process.Kill() }() // a second attempt runs without the first's member
	leaver, _ := startNode(t, paths[2])
	driver, stderr := startDriver(t, paths[0])
	sc := bufio.NewScanner(stderr)
	tail := untilProgress(sc, nil) // the run is under way
	if err := leaver.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	left := make(chan error, 1)
	go func() { left <- leaver.Wait() }()
	stuck := time.AfterFunc(90*time.Second, func() { _ = driver.Process.Kill() })
	defer stuck.Stop()
	after, tail := driverDone(t, sc, tail, driver)
	select {
	case err := <-left:
		if err != nil {
			t.Fatalf("the leaving member: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the leaving member did not exit")
	}
	if after < 3 {
		t.Logf("%d lines: the run ended %d s after the worker was told to leave", lines, after)
		return false
	}
	st, b := readNodeStats(t, dir)
	if st.Completed != uint64(lines) || st.Failed != 0 || st.Replayed != 0 {
		t.Fatalf("stats: %s\n%s", b, strings.Join(tail[max(0, len(tail)-20):], "\n"))
	}
	exactCounts(t, dir, truth)
	return true
}
