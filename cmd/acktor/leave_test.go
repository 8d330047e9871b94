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
	const lines = 6_000_000 // a run of several seconds: the move must happen while it lasts
	dir := t.TempDir()
	input, truth := writeInput(t, dir, lines)
	paths, _ := writeNodeConfigsN(t, 3, dir, input, "30s", "", "")
	startNode(t, paths[1])
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
		t.Fatalf("the run ended %d s after the worker was told to leave: too soon to move anything", after)
	}
	st, b := readNodeStats(t, dir)
	if st.Completed != lines || st.Failed != 0 || st.Replayed != 0 {
		t.Fatalf("stats: %s\n%s", b, strings.Join(tail[max(0, len(tail)-20):], "\n"))
	}
	got := readCounts(t, dir)
	for w, n := range truth {
		if got[w] != n {
			t.Fatalf("%s counted %d, truth %d", w, got[w], n)
		}
	}
}
