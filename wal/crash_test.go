package wal

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// crashDirEnv, when set, makes TestCrashChild the child process of
// TestKill9: it appends to the log in that directory until it is killed.
const crashDirEnv = "ACKTOR_WAL_CRASH_DIR"

// crashPayload is the payload of record k of append i of writer w.
func crashPayload(w, i, k int) []byte {
	return fmt.Appendf(nil, "w%d-i%d-k%d %s", w, i, k, strings.Repeat("p", (w+i+k)%200))
}

// TestCrashChild is not a test of its own: run by TestKill9, it appends
// from several goroutines with Grouped fsyncs and prints "ack first n w i"
// once an append returned, that is, once the records are durable.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("the child process of TestKill9")
	}
	l, err := Open(dir, Options{Sync: Grouped(time.Millisecond), SegmentBytes: 4 * MinSegmentBytes})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	time.AfterFunc(time.Minute, func() { os.Exit(2) }) // should the parent not kill it
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	for w := range 8 {
		go func() {
			for i := 0; ; i++ {
				n := 1 + (w+i)%5
				batch := make([][]byte, n)
				for k := range batch {
					batch[k] = crashPayload(w, i, k)
				}
				first, err := l.Append(ctx, batch)
				if err != nil {
					fmt.Println("append:", err)
					os.Exit(1)
				}
				mu.Lock()
				fmt.Fprintf(out, "ack %d %d %d %d\n", first, n, w, i)
				out.Flush()
				mu.Unlock()
			}
		}()
	}
	select {} // until killed
}

// kill -9 of a process appending with grouped fsyncs, again and again:
// after each restart every acknowledged record is there, whole, at its
// offset, the offsets are dense, and appends go on.
func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	acked := map[uint64][]byte{}
	for round := range 4 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		got := 0
		deadline := time.Now().Add(10 * time.Second)
		for got < 300+round*137 && time.Now().Before(deadline) && sc.Scan() {
			var first uint64
			var n, w, i int
			if _, err := fmt.Sscanf(sc.Text(), "ack %d %d %d %d", &first, &n, &w, &i); err != nil {
				_ = cmd.Process.Kill()
				t.Fatalf("child said %q", sc.Text())
			}
			for k := range n {
				acked[first+uint64(k)] = crashPayload(w, i, k)
			}
			got++
		}
		if err := cmd.Process.Kill(); err != nil { // SIGKILL
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if got == 0 {
			t.Fatalf("round %d: the child acknowledged nothing", round)
		}

		l, err := Open(dir, Options{})
		if err != nil {
			t.Fatalf("round %d: reopening after kill -9: %v", round, err)
		}
		if err := l.Verify(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		end := l.End()
		for next := uint64(0); next < end; {
			recs, err := l.Read(next, 1000)
			if err != nil || len(recs) == 0 {
				t.Fatalf("round %d: Read(%d) = %d records, %v", round, next, len(recs), err)
			}
			for _, r := range recs {
				if want, ok := acked[r.Offset]; ok && string(r.Payload) != string(want) {
					t.Fatalf("round %d: offset %d holds %q, acknowledged %q", round, r.Offset, r.Payload, want)
				}
				next++
			}
		}
		for off := range acked {
			if off >= end {
				t.Fatalf("round %d: acknowledged offset %d lost (End %d)", round, off, end)
			}
		}
		t.Logf("round %d: %d acknowledged records, End %d, recovery %+v", round, len(acked), end, l.Recovered())
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
