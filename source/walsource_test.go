package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/acktor/acktor/internal/testclock"
	"github.com/acktor/acktor/wal"
)

// checkLeaks checks for goroutines left when the test and its cleanups
// (which close the logs) are done.
func checkLeaks(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
}

func openWALLog(t *testing.T, dir string, opts wal.Options) *wal.Log {
	t.Helper()
	l, err := wal.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func appendStrings(t *testing.T, l *wal.Log, ps ...string) uint64 {
	t.Helper()
	b := make([][]byte, len(ps))
	for i, p := range ps {
		b[i] = []byte(p)
	}
	first, err := l.Append(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	return first
}

func openWALSource(t *testing.T, cfg WALConfig) Source {
	t.Helper()
	src, err := WAL(cfg)(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func nextN(t *testing.T, src Source, n int) []Root {
	t.Helper()
	roots := make([]Root, 0, n)
	for range n {
		r, err := src.Next()
		if err != nil {
			t.Fatalf("Next after %d roots: %v", len(roots), err)
		}
		roots = append(roots, r)
	}
	return roots
}

func committed(t *testing.T, l *wal.Log, reader string) uint64 {
	t.Helper()
	off, ok := l.Committed(reader)
	if !ok {
		t.Fatalf("reader %s has no committed offset", reader)
	}
	return off
}

func TestWALSourceCannotBeSplit(t *testing.T) {
	checkLeaks(t)
	l := openWALLog(t, t.TempDir(), wal.Options{})
	for _, tc := range []struct {
		cfg         WALConfig
		task, tasks int
		want        string
	}{
		{WALConfig{Log: l, Reader: "r"}, 0, 2, "cannot be split"},
		{WALConfig{Log: l, Reader: "r"}, 1, 1, "task is 1"},
		{WALConfig{Reader: "r"}, 0, 1, "WALConfig.Log"},
		{WALConfig{Log: l}, 0, 1, "WALConfig.Reader"},
		{WALConfig{Log: l, Reader: "r", Window: -1}, 0, 1, "WALConfig.Window"},
		{WALConfig{Log: l, Reader: "r", CommitEvery: -1}, 0, 1, "WALConfig.CommitEvery"},
		{WALConfig{Log: l, Reader: strings.Repeat("r", 1000)}, 0, 1, "reader name"},
	} {
		src, err := WAL(tc.cfg)(tc.task, tc.tasks)
		if err == nil {
			src.Close()
			t.Fatalf("%+v task %d of %d: no error", tc.cfg, tc.task, tc.tasks)
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "source: wal") {
			t.Errorf("task %d of %d: error %q, want it to contain %q", tc.task, tc.tasks, err, tc.want)
		}
	}
}

// Done out of order: the committed offset is the contiguous prefix of
// finished offsets.
func TestWALSourceCommitsContiguousPrefix(t *testing.T) {
	checkLeaks(t)
	l := openWALLog(t, t.TempDir(), wal.Options{Sync: wal.NoSync})
	for i := range 10 {
		appendStrings(t, l, fmt.Sprint("r", i))
	}
	clock := testclock.New(time.Unix(0, 0))
	src := openWALSource(t, WALConfig{Log: l, Reader: "spout", CommitEvery: time.Second, Now: clock.Now})
	defer src.Close()
	if got := committed(t, l, "spout"); got != 0 {
		t.Fatalf("registered at %d, want 0", got)
	}
	roots := nextN(t, src, 10)
	for i, r := range roots {
		if r.ID != uint64(i) || r.Payload != fmt.Sprint("r", i) || r.Time == 0 {
			t.Fatalf("root %d = %+v", i, r)
		}
	}
	for _, step := range []struct {
		done []uint64
		want uint64
	}{
		{[]uint64{3, 1}, 0},
		{[]uint64{0}, 2},
		{[]uint64{2}, 4},
		{[]uint64{2, 1, 99}, 4}, // duplicates and unknown ids change nothing
		{[]uint64{9, 8, 7, 6, 5}, 4},
		{[]uint64{4}, 10},
	} {
		clock.Add(time.Second) // the first Done that moves the prefix commits
		for _, id := range step.done {
			src.Done(id)
		}
		if got := committed(t, l, "spout"); got != step.want {
			t.Fatalf("after Done(%v): committed %d, want %d", step.done, got, step.want)
		}
	}
	// No Done: no commit within the interval.
	appendStrings(t, l, "r10")
	nextN(t, src, 1)
	src.Done(10)
	if got := committed(t, l, "spout"); got != 10 {
		t.Fatalf("committed %d within CommitEvery, want still 10", got)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if got := committed(t, l, "spout"); got != 11 {
		t.Fatalf("committed %d after Close, want 11", got)
	}
}

// A reopened source resumes at the committed offset: what was not finished
// is read again, at least once.
func TestWALSourceResumes(t *testing.T) {
	checkLeaks(t)
	dir := t.TempDir()
	l := openWALLog(t, dir, wal.Options{Sync: wal.Grouped(time.Millisecond)})
	for i := range 20 {
		appendStrings(t, l, fmt.Sprint("r", i))
	}
	src := openWALSource(t, WALConfig{Log: l, Reader: "spout"})
	nextN(t, src, 12)
	for _, id := range []uint64{0, 1, 2, 3, 4, 6, 7} {
		src.Done(id)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l = openWALLog(t, dir, wal.Options{})
	src = openWALSource(t, WALConfig{Log: l, Reader: "spout", StopAtEnd: true})
	defer src.Close()
	var ids []uint64
	for {
		r, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if r.Payload != fmt.Sprint("r", r.ID) {
			t.Fatalf("root %+v", r)
		}
		ids = append(ids, r.ID)
	}
	if len(ids) != 15 || ids[0] != 5 || ids[14] != 19 {
		t.Fatalf("reopened source read %v, want 5 to 19", ids)
	}
	// Another reader starts at the beginning.
	other := openWALSource(t, WALConfig{Log: l, Reader: "audit", StopAtEnd: true})
	defer other.Close()
	if r, err := other.Next(); err != nil || r.ID != 0 {
		t.Fatalf("new reader's first root %+v, %v", r, err)
	}
}

func TestWALSourceReplay(t *testing.T) {
	checkLeaks(t)
	l := openWALLog(t, t.TempDir(), wal.Options{Sync: wal.NoSync})
	appendStrings(t, l, "a", "b", "c")
	src := openWALSource(t, WALConfig{Log: l, Reader: "spout"})
	defer src.Close()
	nextN(t, src, 2)
	if p, err := src.Replay(1); err != nil || p != "b" {
		t.Fatalf("Replay(1) = %q, %v", p, err)
	}
	src.Done(1)
	for _, id := range []uint64{1, 2, 3} { // done, not handed out, past the end
		if _, err := src.Replay(id); !errors.Is(err, ErrUnknownRoot) {
			t.Errorf("Replay(%d): %v, want ErrUnknownRoot", id, err)
		}
	}
	if p, err := src.Replay(0); err != nil || p != "a" {
		t.Fatalf("Replay(0) = %q, %v", p, err)
	}
}

func TestWALSourceBadRecord(t *testing.T) {
	checkLeaks(t)
	l := openWALLog(t, t.TempDir(), wal.Options{Sync: wal.NoSync})
	appendStrings(t, l, "ok", "bad \xff\xfe", "fine")
	src := openWALSource(t, WALConfig{Log: l, Reader: "spout", CommitEvery: time.Nanosecond})
	defer src.Close()
	if r, err := src.Next(); err != nil || r.Payload != "ok" {
		t.Fatalf("Next = %+v, %v", r, err)
	}
	_, err := src.Next()
	var bad *BadRecord
	if !errors.As(err, &bad) || bad.ID != 1 || bad.Payload != "bad \xff\xfe" || !strings.Contains(bad.Reason, "offset 1") || !strings.Contains(bad.Reason, "UTF-8") {
		t.Fatalf("Next: %v, want a *BadRecord for offset 1", err)
	}
	if r, err := src.Next(); err != nil || r.Payload != "fine" {
		t.Fatalf("Next after the bad record = %+v, %v", r, err)
	}
	for id := range uint64(3) { // the spout calls Done for the dead-lettered record too
		src.Done(id)
	}
	if got := committed(t, l, "spout"); got != 3 {
		t.Fatalf("committed %d, want 3", got)
	}
}

// Without StopAtEnd the source follows the log; with it, it ends at the
// end it saw at open.
func TestWALSourceFollowsOrStops(t *testing.T) {
	checkLeaks(t)
	l := openWALLog(t, t.TempDir(), wal.Options{Sync: wal.Grouped(time.Millisecond)})
	appendStrings(t, l, "a")
	follow := openWALSource(t, WALConfig{Log: l, Reader: "follow"})
	defer follow.Close()
	stop := openWALSource(t, WALConfig{Log: l, Reader: "stop", StopAtEnd: true})
	defer stop.Close()
	if total := follow.Total(); total != -1 {
		t.Fatalf("Total = %d", total)
	}
	nextN(t, follow, 1)
	nextN(t, stop, 1)
	if _, err := follow.Next(); !errors.Is(err, ErrNotReady) {
		t.Fatalf("follow at the end: %v, want ErrNotReady", err)
	}
	appendStrings(t, l, "b")
	if r, err := follow.Next(); err != nil || r.Payload != "b" {
		t.Fatalf("follow after an append: %+v, %v", r, err)
	}
	if _, err := stop.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("stop after an append: %v, want io.EOF", err)
	}
}

func TestWALSourceEventTime(t *testing.T) {
	checkLeaks(t)
	l := openWALLog(t, t.TempDir(), wal.Options{Sync: wal.NoSync})
	if _, err := l.AppendEntries(context.Background(), []wal.Entry{{Time: 12345, Payload: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	src := openWALSource(t, WALConfig{Log: l, Reader: "r"})
	defer src.Close()
	if r := nextN(t, src, 1)[0]; r.Time != 12345 {
		t.Fatalf("root time %d, want the record's 12345", r.Time)
	}
}

// Window bounds the records out beyond the first one not Done.
func TestWALSourceWindow(t *testing.T) {
	checkLeaks(t)
	l := openWALLog(t, t.TempDir(), wal.Options{Sync: wal.NoSync})
	for i := range 200 {
		appendStrings(t, l, fmt.Sprint(i))
	}
	src := openWALSource(t, WALConfig{Log: l, Reader: "r", Window: 100}) // rounded up to 128
	defer src.Close()
	roots := nextN(t, src, 128)
	for _, r := range roots[1:] {
		src.Done(r.ID)
	}
	if _, err := src.Next(); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Next with 128 out: %v, want ErrNotReady", err)
	}
	src.Done(0)
	rest := nextN(t, src, 72)
	if rest[0].ID != 128 || rest[71].ID != 199 {
		t.Fatalf("after Done(0): %d to %d", rest[0].ID, rest[71].ID)
	}
}

// Records deleted by retention before the source read them are skipped.
func TestWALSourceSkipsDeleted(t *testing.T) {
	checkLeaks(t)
	l := openWALLog(t, t.TempDir(), wal.Options{Sync: wal.NoSync, SegmentBytes: wal.MinSegmentBytes, MaxBytes: 2 * wal.MinSegmentBytes})
	// No commit during the test: a commit runs retention, which would
	// delete more while the test looks.
	src := openWALSource(t, WALConfig{Log: l, Reader: "r", CommitEvery: time.Hour})
	defer src.Close()
	appendStrings(t, l, "first")
	nextN(t, src, 1) // out, and then deleted
	for i := range 500 {
		appendStrings(t, l, fmt.Sprintf("record %d %s", i+1, strings.Repeat("x", 50)))
	}
	start := l.Start()
	if start == 0 {
		t.Fatal("retention deleted nothing")
	}
	if _, err := src.Replay(0); !errors.Is(err, wal.ErrOutOfRange) {
		t.Fatalf("Replay of a deleted record: %v", err)
	}
	src.Done(0) // the spout dead-letters it
	var r Root
	for {
		var err error
		if r, err = src.Next(); !errors.Is(err, ErrNotReady) {
			if err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if r.ID != start {
		t.Fatalf("first root after the deletion: %d, want Start %d", r.ID, start)
	}
}

// A commit that fails (the log closed under the source) is reported by
// Close.
func TestWALSourceCommitError(t *testing.T) {
	checkLeaks(t)
	l, err := wal.Open(t.TempDir(), wal.Options{Sync: wal.NoSync})
	if err != nil {
		t.Fatal(err)
	}
	appendStrings(t, l, "a")
	src := openWALSource(t, WALConfig{Log: l, Reader: "r", CommitEvery: time.Hour})
	nextN(t, src, 1)
	src.Done(0)
	_ = l.Close()
	if err := src.Close(); !errors.Is(err, wal.ErrClosed) {
		t.Fatalf("Close: %v, want the commit's error", err)
	}
	if _, err := src.Next(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
}

// The backlog is the durable records not handed out yet.
func TestWALSourceBacklog(t *testing.T) {
	checkLeaks(t)
	l := openWALLog(t, t.TempDir(), wal.Options{Sync: wal.NoSync})
	src := openWALSource(t, WALConfig{Log: l, Reader: "r"})
	defer src.Close()
	bl, ok := src.(Backlogger)
	if !ok {
		t.Fatal("the WAL source does not tell its backlog")
	}
	appendStrings(t, l, "a", "b", "c", "d", "e")
	if n := bl.Backlog(); n != 5 {
		t.Fatalf("backlog %d before reading, want 5", n)
	}
	nextN(t, src, 2)
	if n := bl.Backlog(); n != 3 {
		t.Fatalf("backlog %d after two, want 3", n)
	}
}
