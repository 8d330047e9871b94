package wal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acktor/acktor/internal/testclock"
)

func TestCommitPersists(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{})
	appendRecords(t, l, 0, 10)
	if _, ok := l.Committed("a"); ok {
		t.Fatal("unknown reader has a committed offset")
	}
	for _, c := range []struct {
		reader string
		off    uint64
	}{{"a", 5}, {"b", 7}, {"a", 6}, {"a", 6}, {"b", 2}} { // a reader may move back
		if err := l.Commit(c.reader, c.off); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		reader string
		off    uint64
		want   string
	}{
		{"a", 11, "out of range"},
		{"", 1, "reader name"},
		{strings.Repeat("x", MaxReaderName+1), 1, "reader name"},
		{"\xff", 1, "reader name"},
	} {
		if err := l.Commit(tc.reader, tc.off); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Commit(%q, %d): %v, want %q", tc.reader, tc.off, err, tc.want)
		}
	}
	closeLog(t, l)
	if _, err := os.Stat(filepath.Join(dir, commitsFile+".tmp")); !os.IsNotExist(err) {
		t.Fatalf("temporary file left: %v", err)
	}

	l = openLog(t, dir, Options{})
	if a, _ := l.Committed("a"); a != 6 {
		t.Fatalf("a = %d after reopen, want 6", a)
	}
	if b, ok := l.Committed("b"); b != 2 || !ok {
		t.Fatalf("b = %d, %v after reopen, want 2", b, ok)
	}
	if err := l.Forget("b"); err != nil {
		t.Fatal(err)
	}
	if got := l.Readers(); len(got) != 1 || got["a"] != 6 {
		t.Fatalf("Readers = %v", got)
	}
	for i := range MaxReaders - 1 {
		if err := l.Commit(fmt.Sprint("r", i), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Commit("one too many", 0); err == nil || !strings.Contains(err.Error(), "MaxReaders") {
		t.Fatalf("Commit of reader %d: %v", MaxReaders+1, err)
	}
}

// A crash between writing the temporary file and renaming it leaves the
// old offsets; a corrupt offsets file is an error, not a reset.
func TestCommitFileDamage(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{})
	appendRecords(t, l, 0, 3)
	if err := l.Commit("a", 2); err != nil {
		t.Fatal(err)
	}
	closeLog(t, l)
	if err := os.WriteFile(filepath.Join(dir, commitsFile+".tmp"), []byte(`{"a":`), 0o644); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, Options{})
	if a, _ := l.Committed("a"); a != 2 {
		t.Fatalf("a = %d, want 2", a)
	}
	closeLog(t, l)
	if err := os.WriteFile(filepath.Join(dir, commitsFile), []byte(`{"a":`), 0o644); err != nil {
		t.Fatal(err)
	}
	if l, err := Open(dir, Options{}); err == nil || !strings.Contains(err.Error(), commitsFile) {
		if l != nil {
			_ = l.Close()
		}
		t.Fatalf("Open with a corrupt %s: %v", commitsFile, err)
	}
}

// segmentBases returns the base offsets of the log's segments.
func segmentBases(t testing.TB, dir string) []uint64 {
	t.Helper()
	var bases []uint64
	for _, p := range segmentFiles(t, dir) {
		b, ok := parseSegmentName(filepath.Base(p))
		if !ok {
			t.Fatalf("segment name %s", p)
		}
		bases = append(bases, b)
	}
	return bases
}

func TestCommitDeletesSegments(t *testing.T) {
	const n = 300
	dir := t.TempDir()
	var logged []string
	var mu sync.Mutex
	logf := func(f string, a ...any) { mu.Lock(); logged = append(logged, fmt.Sprintf(f, a...)); mu.Unlock() }
	l := openLog(t, dir, Options{SegmentBytes: MinSegmentBytes, Sync: NoSync, Logf: logf})
	for i := 0; i < n; i += 10 {
		appendRecords(t, l, i, 10)
	}
	bases := segmentBases(t, dir)
	if len(bases) < 5 {
		t.Fatalf("%d segments, want 5 or more", len(bases))
	}
	if err := l.Retain(); err != nil || len(segmentBases(t, dir)) != len(bases) {
		t.Fatalf("Retain deleted segments with no reader registered (%v)", err)
	}
	// Reader a is done; b holds back everything below its offset's segment.
	if err := l.Commit("b", 0); err != nil {
		t.Fatal(err)
	}
	if err := l.Commit("a", n); err != nil {
		t.Fatal(err)
	}
	if got := segmentBases(t, dir); len(got) != len(bases) {
		t.Fatalf("segments %v, want all %v: reader b is at 0", got, bases)
	}
	mid := bases[2] + 1 // inside the third segment
	if err := l.Commit("b", mid); err != nil {
		t.Fatal(err)
	}
	if got := segmentBases(t, dir); got[0] != bases[2] || l.Start() != bases[2] {
		t.Fatalf("segments %v, Start %d: want the first two deleted", got, l.Start())
	}
	if _, err := l.Read(bases[2]-1, 1); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("Read of a deleted record: %v", err)
	}
	checkRecords(t, readRange(t, l, bases[2], n, 100), bases[2])
	if err := l.Forget("b"); err != nil {
		t.Fatal(err)
	}
	if got := segmentBases(t, dir); len(got) != 1 || l.Stats().Deleted != uint64(len(bases)-1) {
		t.Fatalf("segments %v after b was forgotten, want the active one only", got)
	}
	mu.Lock()
	if len(logged) != len(bases)-1 || !strings.Contains(logged[0], "every reader committed") {
		t.Fatalf("logged %q", logged)
	}
	mu.Unlock()
	closeLog(t, l)
	l = openLog(t, dir, Options{SegmentBytes: MinSegmentBytes})
	if l.Start() != bases[len(bases)-1] || l.End() != n {
		t.Fatalf("reopened: Start %d End %d", l.Start(), l.End())
	}
}

// A segment deleted under a reader stays readable until the reader is done.
func TestDeleteUnderReader(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{SegmentBytes: MinSegmentBytes, Sync: NoSync})
	for i := 0; i < 100; i += 10 {
		appendRecords(t, l, i, 10)
	}
	c, err := l.locate(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Commit("a", l.End()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.s.path); !os.IsNotExist(err) {
		t.Fatalf("segment still there: %v", err)
	}
	recs, err := readFrames(c.f, c.s.path, c.entry, 0, c.end, c.limit, 1000)
	if err != nil || len(recs) == 0 {
		t.Fatalf("read of the deleted segment: %d records, %v", len(recs), err)
	}
	checkRecords(t, recs, 0)
	l.unref(c.s)
	l.mu.Lock()
	closed := c.s.f == nil
	l.mu.Unlock()
	if !closed {
		t.Fatal("the deleted segment's file stays open")
	}
}

func TestRetentionBySize(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{SegmentBytes: MinSegmentBytes, MaxBytes: 3 * MinSegmentBytes, Sync: NoSync})
	if err := l.Commit("slow", 0); err != nil { // a hard limit: a reader does not hold it back
		t.Fatal(err)
	}
	n := 0
	for ; n < 500; n += 10 {
		appendRecords(t, l, n, 10)
		if st := l.Stats(); st.Bytes > 3*MinSegmentBytes+MinSegmentBytes {
			t.Fatalf("after %d records: %d bytes in %d segments", n, st.Bytes, st.Segments)
		}
	}
	st := l.Stats()
	if st.Start == 0 || st.Deleted == 0 || st.Bytes != dirBytes(t, dir) {
		t.Fatalf("Stats %+v, files %d bytes", st, dirBytes(t, dir))
	}
	if _, err := l.Read(0, 1); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("Read(0): %v", err)
	}
	checkRecords(t, readRange(t, l, st.Start, uint64(n), 100), st.Start)
}

func TestRetentionByAge(t *testing.T) {
	dir := t.TempDir()
	clock := testclock.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := Options{SegmentBytes: MinSegmentBytes, MaxAge: time.Hour, Sync: NoSync, Now: clock.Now}
	l := openLog(t, dir, opts)
	n := 0
	for ; n < 100; n += 10 { // old records
		appendRecords(t, l, n, 10)
	}
	oldBases := segmentBases(t, dir)
	clock.Add(50 * time.Minute)
	for ; n < 200; n += 10 { // newer records; the first roll seals the last old segment
		appendRecords(t, l, n, 10)
	}
	if err := l.Retain(); err != nil || l.Start() != 0 {
		t.Fatalf("Retain deleted segments 50 minutes old: Start %d, %v", l.Start(), err)
	}
	clock.Add(20 * time.Minute) // old ones are 70 minutes old, newer 20
	if err := l.Retain(); err != nil {
		t.Fatal(err)
	}
	// The last old segment may have got new records.
	if start := l.Start(); start != oldBases[len(oldBases)-1] && start != 100 {
		t.Fatalf("after 70 minutes: segments %v, Start %d; want the old ones %v gone but the last", segmentBases(t, dir), start, oldBases)
	}
	checkRecords(t, readRange(t, l, l.Start(), uint64(n), 100), l.Start())
	closeLog(t, l)

	// Segments sealed before Open are dated by their files' modification times.
	bases := segmentBases(t, dir)
	for i, p := range segmentFiles(t, dir) {
		mtime := clock.Now().Add(-2 * time.Hour)
		if i >= len(bases)/2 {
			mtime = clock.Now()
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	l = openLog(t, dir, opts)
	if l.Start() != bases[len(bases)/2] {
		t.Fatalf("reopened: Start %d, want %d (segments %v)", l.Start(), bases[len(bases)/2], bases)
	}
}
