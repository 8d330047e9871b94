package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var ctx = context.Background()

func openLog(t testing.TB, dir string, opts Options) *Log {
	t.Helper()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func closeLog(t testing.TB, l *Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// payload is the deterministic payload of record i: its length varies.
func payload(i int) []byte {
	return fmt.Appendf(nil, "record %d %s", i, strings.Repeat("x", i%97))
}

func appendRecords(t testing.TB, l *Log, from, n int) uint64 {
	t.Helper()
	ps := make([][]byte, n)
	for i := range ps {
		ps[i] = payload(from + i)
	}
	first, err := l.Append(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	if first != uint64(from) {
		t.Fatalf("Append returned first offset %d, want %d", first, from)
	}
	return first
}

// readRange reads [from, to) with reads of at most max records.
func readRange(t testing.TB, l *Log, from, to uint64, max int) []Record {
	t.Helper()
	var out []Record
	for next := from; next < to; {
		recs, err := l.Read(next, max)
		if err != nil {
			t.Fatalf("Read(%d): %v", next, err)
		}
		if len(recs) == 0 || len(recs) > max {
			t.Fatalf("Read(%d, %d) returned %d records before End %d", next, max, len(recs), to)
		}
		out = append(out, recs...)
		next += uint64(len(recs))
	}
	return out
}

// checkRecords checks that recs are records from..from+len-1 with the
// payloads of payload(i).
func checkRecords(t testing.TB, recs []Record, from uint64) {
	t.Helper()
	for i, r := range recs {
		want := from + uint64(i)
		if r.Offset != want || !bytes.Equal(r.Payload, payload(int(want))) {
			t.Fatalf("record %d: offset %d payload %q, want offset %d payload %q", i, r.Offset, r.Payload, want, payload(int(want)))
		}
	}
}

func segmentFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(m)
	return m
}

func TestOptionsValidation(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want string // "" for valid
	}{
		{Options{}, ""},
		{Options{SegmentBytes: MinSegmentBytes, MaxRecordBytes: MinSegmentBytes - HeaderSize}, ""},
		{Options{SegmentBytes: 100}, "SegmentBytes"},
		{Options{SegmentBytes: MaxSegmentBytes + 1}, "SegmentBytes"},
		{Options{SegmentBytes: MinSegmentBytes, MaxRecordBytes: MinSegmentBytes}, "MaxRecordBytes"},
		{Options{MaxRecordBytes: -1}, "MaxRecordBytes"},
		{Options{MaxBytes: -1}, "MaxBytes"},
		{Options{MaxAge: -time.Second}, "MaxAge"},
		{Options{Sync: Grouped(-time.Millisecond)}, "Sync"},
	} {
		l, err := Open(t.TempDir(), tc.opts)
		if err == nil {
			closeLog(t, l)
		}
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), "Options."+tc.want)) {
			t.Errorf("Open(%+v): err %v, want one naming %q", tc.opts, err, tc.want)
		}
	}
}

func TestRoundTripAcrossSegmentRolls(t *testing.T) {
	for _, pol := range []SyncPolicy{EveryAppend, Grouped(time.Millisecond), NoSync} {
		t.Run(pol.String(), func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, Options{Sync: pol, SegmentBytes: MinSegmentBytes})
			n := 0
			for _, batch := range []int{1, 5, 20, 1, 30, 3, 7, 25, 2, 11, 30, 30} {
				appendRecords(t, l, n, batch)
				n += batch
			}
			if got := l.End(); got != uint64(n) {
				t.Fatalf("End = %d, want %d", got, n)
			}
			if segs := len(segmentFiles(t, dir)); segs < 3 {
				t.Fatalf("%d segments, want several", segs)
			}
			for _, max := range []int{1, 3, 1000} {
				checkRecords(t, readRange(t, l, 0, uint64(n), max), 0)
			}
			// Reads that start in the middle of a segment.
			for from := range uint64(n) {
				recs, err := l.Read(from, 2)
				if err != nil || len(recs) == 0 {
					t.Fatalf("Read(%d, 2) = %d records, %v", from, len(recs), err)
				}
				checkRecords(t, recs, from)
			}
			closeLog(t, l)

			// After a clean close nothing is truncated and appends go on.
			var logged []string
			l = openLog(t, dir, Options{Sync: pol, SegmentBytes: MinSegmentBytes,
				Logf: func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }})
			if r := l.Recovered(); r != (Recovery{}) || len(logged) > 0 {
				t.Fatalf("Recovered = %+v, logged %q after a clean close", r, logged)
			}
			appendRecords(t, l, n, 10)
			checkRecords(t, readRange(t, l, 0, uint64(n+10), 50), 0)
			if st := l.Stats(); st.Start != 0 || st.End != uint64(n+10) || st.Written != st.End || st.Segments != len(segmentFiles(t, dir)) {
				t.Fatalf("Stats = %+v", st)
			}
		})
	}
}

func TestReadLimits(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{Sync: NoSync, MaxRecordBytes: 2 << 20})
	big := bytes.Repeat([]byte("b"), MaxReadBytes/4+1)
	if _, err := l.Append(ctx, [][]byte{big, big, big, big, big, []byte("small")}); err != nil {
		t.Fatal(err)
	}
	recs, err := l.Read(0, 100)
	if err != nil || len(recs) != 4 {
		t.Fatalf("Read = %d records, %v; want 4 (MaxReadBytes)", len(recs), err)
	}
	if recs, err = l.Read(6, 100); err != nil || len(recs) != 0 {
		t.Fatalf("Read(End) = %d records, %v; want none, nil", len(recs), err)
	}
	if _, err = l.Read(7, 100); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("Read(End+1): %v, want ErrOutOfRange", err)
	}
	if recs, err = l.Read(0, 0); err != nil || len(recs) != 0 {
		t.Fatalf("Read(0, 0) = %d records, %v", len(recs), err)
	}
	// Payloads do not alias each other.
	recs, _ = l.Read(4, 2)
	_ = append(recs[0].Payload, "overwrite?"...)
	if string(recs[1].Payload) != "small" {
		t.Fatalf("payload 5 = %q after appending to payload 4", recs[1].Payload)
	}
}

func TestAppendEntriesTimes(t *testing.T) {
	now := time.Unix(1000, 0)
	l := openLog(t, t.TempDir(), Options{Sync: NoSync, Now: func() time.Time { return now }})
	if _, err := l.Append(ctx, [][]byte{[]byte("a")}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendEntries(ctx, []Entry{{Time: 7, Payload: []byte("b")}, {Payload: []byte("c")}}); err != nil {
		t.Fatal(err)
	}
	recs, err := l.Read(0, 10)
	if err != nil || len(recs) != 3 {
		t.Fatalf("Read = %d records, %v", len(recs), err)
	}
	for i, want := range []int64{now.UnixNano(), 7, now.UnixNano()} {
		if recs[i].Time != want {
			t.Errorf("record %d: time %d, want %d", i, recs[i].Time, want)
		}
	}
}

// writeLog writes n records with NoSync to dir in segments of segBytes and
// closes it.
func writeLog(t testing.TB, dir string, segBytes int64, n int) {
	t.Helper()
	l := openLog(t, dir, Options{Sync: NoSync, SegmentBytes: segBytes})
	for i := 0; i < n; i += 3 {
		appendRecords(t, l, i, min(3, n-i))
	}
	closeLog(t, l)
}

func copyDir(t testing.TB, from string) string {
	t.Helper()
	to := t.TempDir()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// A crash cuts the last record at any byte: Open truncates to the record
// before, says so, and appends go on at the right offset.
func TestTornTail(t *testing.T) {
	const n = 100
	orig := t.TempDir()
	writeLog(t, orig, MinSegmentBytes, n)
	segs := segmentFiles(t, orig)
	last := segs[len(segs)-1]
	info, err := os.Stat(last)
	if err != nil {
		t.Fatal(err)
	}
	size := info.Size()
	lastStart := size - HeaderSize - int64(len(payload(n-1)))
	if len(segs) < 2 || lastStart <= 0 {
		t.Fatalf("want several segments and several records in the last: %d segments, last record at %d", len(segs), lastStart)
	}
	for cut := lastStart; cut < size; cut++ {
		dir := copyDir(t, orig)
		path := filepath.Join(dir, filepath.Base(last))
		if err := os.Truncate(path, cut); err != nil {
			t.Fatal(err)
		}
		var logged []string
		l := openLog(t, dir, Options{SegmentBytes: MinSegmentBytes, Logf: func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }})
		r := l.Recovered()
		if cut == lastStart {
			if r != (Recovery{}) || len(logged) != 0 {
				t.Fatalf("cut at a record boundary: Recovered %+v, logged %q", r, logged)
			}
		} else {
			want := Recovery{Segment: path, Offset: n - 1, Pos: lastStart, TruncatedBytes: cut - lastStart, Reason: ErrIncomplete}
			if r != want {
				t.Fatalf("cut at %d: Recovered %+v, want %+v", cut, r, want)
			}
			wantLog := fmt.Sprintf("wal: truncated torn tail of %d bytes in segment %s at offset %d", cut-lastStart, path, n-1)
			if len(logged) != 1 || !strings.HasPrefix(logged[0], wantLog) {
				t.Fatalf("cut at %d: logged %q, want %q...", cut, logged, wantLog)
			}
		}
		if l.End() != n-1 {
			t.Fatalf("cut at %d: End %d, want %d", cut, l.End(), n-1)
		}
		if info, _ := os.Stat(path); info.Size() != lastStart {
			t.Fatalf("cut at %d: file has %d bytes, want %d", cut, info.Size(), lastStart)
		}
		appendRecords(t, l, n-1, 2)
		checkRecords(t, readRange(t, l, 0, n+1, 100), 0)
		closeLog(t, l)
	}
}

// A flipped byte anywhere in the last record of the last segment makes it
// a torn tail.
func TestFlippedByteInLastRecord(t *testing.T) {
	const n = 10
	orig := t.TempDir()
	writeLog(t, orig, MinSegmentBytes, n)
	segs := segmentFiles(t, orig)
	b, err := os.ReadFile(segs[len(segs)-1])
	if err != nil {
		t.Fatal(err)
	}
	lastStart := len(b) - HeaderSize - len(payload(n-1))
	for i := lastStart; i < len(b); i++ {
		dir := copyDir(t, orig)
		path := filepath.Join(dir, filepath.Base(segs[len(segs)-1]))
		c := append([]byte(nil), b...)
		c[i] ^= 0x10
		if err := os.WriteFile(path, c, 0o644); err != nil {
			t.Fatal(err)
		}
		l := openLog(t, dir, Options{})
		r := l.Recovered()
		if r.Offset != n-1 || r.Pos != int64(lastStart) || r.TruncatedBytes != int64(len(b)-lastStart) {
			t.Fatalf("byte %d flipped: Recovered %+v", i, r)
		}
		if !errors.Is(r.Reason, ErrChecksum) && !errors.Is(r.Reason, ErrIncomplete) {
			t.Fatalf("byte %d flipped: reason %v", i, r.Reason)
		}
		appendRecords(t, l, n-1, 1)
		checkRecords(t, readRange(t, l, 0, n, 100), 0)
		closeLog(t, l)
	}
}

// A bad frame in a sealed segment is an error naming the file and the
// position, and nothing is truncated.
func TestCorruptSealedSegment(t *testing.T) {
	const n = 200
	orig := t.TempDir()
	writeLog(t, orig, MinSegmentBytes, n)
	segs := segmentFiles(t, orig)
	if len(segs) < 3 {
		t.Fatalf("%d segments, want 3 or more", len(segs))
	}
	first, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	// Find record 5 in the first segment.
	pos := 0
	for i := range 5 {
		pos += HeaderSize + len(payload(i))
	}
	for _, tc := range []struct {
		name   string
		damage func([]byte) []byte
		errIs  error
		pos    int
	}{
		{"flipped payload byte", func(b []byte) []byte { b[pos+HeaderSize+2] ^= 1; return b }, ErrChecksum, pos},
		{"torn end", func(b []byte) []byte { return b[:len(b)-3] }, ErrIncomplete, -1},
		{"record missing", func(b []byte) []byte {
			end := len(b) - HeaderSize - len(payload(int(secondBase(t, segs)-1)))
			return b[:end]
		}, nil, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, orig)
			path := filepath.Join(dir, filepath.Base(segs[0]))
			if err := os.WriteFile(path, tc.damage(append([]byte(nil), first...)), 0o644); err != nil {
				t.Fatal(err)
			}
			l := openLog(t, dir, Options{})
			if r := l.Recovered(); r != (Recovery{}) {
				t.Fatalf("Recovered %+v: the last segment is fine", r)
			}
			for _, check := range []func() error{
				func() error { _, err := l.Read(0, 10); return err },
				l.Verify,
			} {
				err := check()
				var ce *CorruptError
				if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) || ce.Segment != path || !strings.Contains(err.Error(), path) {
					t.Fatalf("err %v, want a *CorruptError naming %s", err, path)
				}
				if tc.errIs != nil && !errors.Is(err, tc.errIs) {
					t.Fatalf("err %v, want %v", err, tc.errIs)
				}
				if tc.pos >= 0 && (ce.Pos != int64(tc.pos) || !strings.Contains(err.Error(), fmt.Sprintf("byte %d", tc.pos))) {
					t.Fatalf("err %v, want it at byte %d", err, tc.pos)
				}
			}
			// The other segments still read.
			base := secondBase(t, segs)
			checkRecords(t, readRange(t, l, base, n, 100), base)
		})
	}
}

// dirBytes is the size of the segment files in dir.
func dirBytes(t testing.TB, dir string) int64 {
	t.Helper()
	var n int64
	for _, p := range segmentFiles(t, dir) {
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		n += info.Size()
	}
	return n
}

// framedBytes is the size of the frames of records from..to-1.
func framedBytes(from, to int) int64 {
	var n int64
	for i := from; i < to; i++ {
		n += HeaderSize + int64(len(payload(i)))
	}
	return n
}

func secondBase(t testing.TB, segs []string) uint64 {
	base, ok := parseSegmentName(filepath.Base(segs[1]))
	if !ok {
		t.Fatalf("segment name %s", segs[1])
	}
	return base
}

// countingSync counts fsyncs and remembers the largest file size an fsync
// began with: what it made durable.
type countingSync struct {
	n      atomic.Int64
	synced atomic.Int64
}

func (c *countingSync) sync(f file) error {
	c.n.Add(1)
	if info, err := f.Stat(); err == nil {
		for {
			old := c.synced.Load()
			if info.Size() <= old || c.synced.CompareAndSwap(old, info.Size()) {
				break
			}
		}
	}
	return f.Sync()
}

// Many concurrent appenders share grouped fsyncs, and each returns only
// after an fsync that covered its records.
func TestGroupedSyncSharesFsyncs(t *testing.T) {
	const writers, appends = 32, 40
	dir := t.TempDir()
	var cs countingSync
	// One segment, so file sizes measure what is durable.
	l := openLog(t, dir, Options{Sync: Grouped(2 * time.Millisecond), hooks: &hooks{sync: cs.sync}})
	var mu sync.Mutex
	got := map[uint64][]byte{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range appends {
				p := fmt.Appendf(nil, "writer %d append %d", w, i)
				first, err := l.Append(ctx, [][]byte{p, p})
				if err != nil {
					t.Error(err)
					return
				}
				if l.End() < first+2 {
					t.Errorf("Append returned offset %d before End %d passed it", first, l.End())
				}
				mu.Lock()
				got[first], got[first+1] = p, p
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	total := writers * appends * 2
	if len(got) != total {
		t.Fatalf("%d distinct offsets, want %d", len(got), total)
	}
	recs := readRange(t, l, 0, uint64(total), 1000)
	for _, r := range recs {
		if !bytes.Equal(r.Payload, got[r.Offset]) {
			t.Fatalf("offset %d: %q, want %q", r.Offset, r.Payload, got[r.Offset])
		}
	}
	st := l.Stats()
	if int(st.Syncs) != int(cs.n.Load()) || st.Appends != writers*appends {
		t.Fatalf("Stats %+v, hook counted %d fsyncs", st, cs.n.Load())
	}
	if st.Syncs*4 > st.Appends {
		t.Fatalf("%d fsyncs for %d appends: want them shared (at most a quarter)", st.Syncs, st.Appends)
	}
	if cs.synced.Load() != st.Bytes {
		t.Fatalf("fsyncs covered %d bytes of %d", cs.synced.Load(), st.Bytes)
	}
	t.Logf("%d appends by %d writers, %d fsyncs", st.Appends, writers, st.Syncs)
}

// With EveryAppend an append returns after an fsync that began after its
// write: a lone appender fsyncs once per append.
func TestEveryAppendSyncs(t *testing.T) {
	var cs countingSync
	dir := t.TempDir()
	l := openLog(t, dir, Options{hooks: &hooks{sync: cs.sync}})
	for i := range 20 {
		appendRecords(t, l, i, 1)
		info, err := os.Stat(segmentFiles(t, dir)[0])
		if err != nil {
			t.Fatal(err)
		}
		if cs.synced.Load() != info.Size() {
			t.Fatalf("append %d returned with %d of %d bytes fsynced", i, cs.synced.Load(), info.Size())
		}
	}
	if n := cs.n.Load(); n != 20 {
		t.Fatalf("%d fsyncs for 20 appends", n)
	}
	// Concurrent appenders may share.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				if _, err := l.Append(ctx, [][]byte{[]byte("x")}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if l.End() != 180 || cs.n.Load() > 180 {
		t.Fatalf("End %d, %d fsyncs", l.End(), cs.n.Load())
	}
}

func TestTooLarge(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{SegmentBytes: MinSegmentBytes, MaxRecordBytes: 1000})
	appendRecords(t, l, 0, 2)
	before := l.Stats()
	for _, tc := range []struct {
		name  string
		recs  [][]byte
		index int
	}{
		{"one record", [][]byte{make([]byte, 1001)}, 0},
		{"second record", [][]byte{[]byte("ok"), make([]byte, 5000)}, 1},
		{"batch larger than a segment", slices.Repeat([][]byte{make([]byte, 1000)}, 5), -1},
	} {
		_, err := l.Append(ctx, tc.recs)
		var tl *TooLargeError
		if !errors.As(err, &tl) || !errors.Is(err, ErrTooLarge) || tl.Index != tc.index {
			t.Errorf("%s: err %v, want a *TooLargeError for record %d", tc.name, err, tc.index)
		}
	}
	if after := l.Stats(); after != before {
		t.Fatalf("Stats %+v after rejected appends, want %+v", after, before)
	}
	appendRecords(t, l, 2, 1)
	checkRecords(t, readRange(t, l, 0, 3, 10), 0)
}

func TestMapErr(t *testing.T) {
	for _, tc := range []struct {
		err     error
		noSpace bool
	}{
		{syscall.ENOSPC, true},
		{&os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}, true},
		{fmt.Errorf("wrapped: %w", syscall.EDQUOT), true},
		{syscall.EIO, false},
		{errors.New("other"), false},
	} {
		got := mapErr(tc.err)
		if errors.Is(got, ErrNoSpace) != tc.noSpace || !errors.Is(got, tc.err) {
			t.Errorf("mapErr(%v) = %v: ErrNoSpace %v, want %v, and the error kept", tc.err, got, errors.Is(got, ErrNoSpace), tc.noSpace)
		}
	}
}

// A write that fails with ENOSPC halfway is cut off again: no half record,
// the log goes on at the same offset.
func TestNoSpaceOnWrite(t *testing.T) {
	for _, pol := range []SyncPolicy{EveryAppend, Grouped(time.Millisecond), NoSync} {
		t.Run(pol.String(), func(t *testing.T) {
			dir := t.TempDir()
			var full atomic.Bool
			h := &hooks{writeAt: func(f file, b []byte, off int64) (int, error) {
				if full.Load() {
					n, _ := f.WriteAt(b[:len(b)/2], off) // a partial write, as a filling disk does
					return n, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
				}
				return f.WriteAt(b, off)
			}}
			l := openLog(t, dir, Options{Sync: pol, SegmentBytes: MinSegmentBytes, hooks: h})
			n := 0
			for n < 60 { // several segments
				appendRecords(t, l, n, 3)
				n += 3
			}
			full.Store(true)
			for range 3 {
				_, err := l.Append(ctx, [][]byte{payload(n), payload(n + 1)})
				if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("err %v, want ErrNoSpace and ENOSPC", err)
				}
			}
			st := l.Stats()
			if st.End != uint64(n) || st.Written != uint64(n) || dirBytes(t, dir) != framedBytes(0, n) || st.Bytes != framedBytes(0, n) {
				t.Fatalf("after ENOSPC: Stats %+v, files %d bytes, want End %d and %d bytes: no partial frame", st, dirBytes(t, dir), n, framedBytes(0, n))
			}
			checkRecords(t, readRange(t, l, 0, uint64(n), 100), 0) // reads go on
			full.Store(false)
			appendRecords(t, l, n, 2)
			checkRecords(t, readRange(t, l, 0, uint64(n+2), 100), 0)
			closeLog(t, l)
			l = openLog(t, dir, Options{})
			if r := l.Recovered(); r != (Recovery{}) || l.End() != uint64(n+2) {
				t.Fatalf("reopened: Recovered %+v, End %d", r, l.End())
			}
		})
	}
}

// A failed fsync fails the log: appends are refused (ErrNoSpace for
// ENOSPC), reads go on, and reopening recovers.
func TestFailedSync(t *testing.T) {
	for _, pol := range []SyncPolicy{EveryAppend, Grouped(time.Millisecond)} {
		t.Run(pol.String(), func(t *testing.T) {
			dir := t.TempDir()
			var fail atomic.Bool
			h := &hooks{sync: func(f file) error {
				if fail.Load() {
					return &os.PathError{Op: "sync", Path: f.Name(), Err: syscall.ENOSPC}
				}
				return f.Sync()
			}}
			l := openLog(t, dir, Options{Sync: pol, hooks: h})
			appendRecords(t, l, 0, 5)
			fail.Store(true)
			if _, err := l.Append(ctx, [][]byte{payload(5)}); !errors.Is(err, ErrNoSpace) {
				t.Fatalf("append during failed fsync: %v, want ErrNoSpace", err)
			}
			fail.Store(false)
			if _, err := l.Append(ctx, [][]byte{payload(5)}); !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "reopen") {
				t.Fatalf("append after failed fsync: %v, want the log failed", err)
			}
			if l.End() != 5 {
				t.Fatalf("End %d, want 5: the unsynced record must not be readable", l.End())
			}
			checkRecords(t, readRange(t, l, 0, 5, 10), 0)
			_ = l.Close()
			l = openLog(t, dir, Options{Sync: pol})
			// The record whose fsync failed may or may not be there: whole.
			end := l.End()
			if end != 5 && end != 6 {
				t.Fatalf("reopened End %d", end)
			}
			appendRecords(t, l, int(end), 1)
			checkRecords(t, readRange(t, l, 0, end+1, 10), 0)
		})
	}
}

func TestCancelledAppendWritesNothing(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	c, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.Append(c, [][]byte{[]byte("x")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if st := l.Stats(); st.Written != 0 || st.Bytes != 0 {
		t.Fatalf("Stats %+v", st)
	}
}

func TestClosed(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{Sync: Grouped(time.Millisecond)})
	appendRecords(t, l, 0, 3)
	ch := l.Changed()
	closeLog(t, l)
	<-ch // closed with the log
	if _, err := l.Append(ctx, [][]byte{[]byte("x")}); !errors.Is(err, ErrClosed) {
		t.Errorf("Append: %v", err)
	}
	if _, err := l.Read(0, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("Read: %v", err)
	}
	if err := l.Commit("r", 1); !errors.Is(err, ErrClosed) {
		t.Errorf("Commit: %v", err)
	}
	if err := l.Wait(ctx, 10); !errors.Is(err, ErrClosed) {
		t.Errorf("Wait: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestOpenLocks(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{})
	if l2, err := Open(dir, Options{}); err == nil {
		_ = l2.Close()
		t.Fatal("second Open of the same directory succeeded")
	} else if !strings.Contains(err.Error(), "open elsewhere") {
		t.Fatalf("err %v", err)
	}
	closeLog(t, l)
	closeLog(t, openLog(t, dir, Options{}))
}

// syncedDirs is the OS's file layer, noting the directories it fsyncs.
type syncedDirs struct {
	osFS
	dirs []string
}

func (s *syncedDirs) SyncDir(name string) error {
	s.dirs = append(s.dirs, name)
	return s.osFS.SyncDir(name)
}

// Open makes the directories it creates durable, fsyncing the parent of
// each, before the first segment is created (and its directory fsynced):
// else a power cut could take the log's directory, with every record
// fsynced in it, away. Opening it again fsyncs the directory and its
// parent: a process killed before it fsynced them may have left entries
// that are not durable yet.
func TestOpenSyncsDirs(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "a", "b")
	fsys := &syncedDirs{}
	closeLog(t, openLog(t, dir+"/", Options{hooks: &hooks{fs: fsys}}))
	for i := range fsys.dirs {
		fsys.dirs[i] = filepath.Clean(fsys.dirs[i])
	}
	if want := []string{root, filepath.Join(root, "a"), dir}; !slices.Equal(fsys.dirs, want) {
		t.Fatalf("a new log fsynced the directories %q, want %q", fsys.dirs, want)
	}
	fsys.dirs = nil
	closeLog(t, openLog(t, dir, Options{hooks: &hooks{fs: fsys}}))
	if want := []string{filepath.Join(root, "a"), dir}; !slices.Equal(fsys.dirs, want) {
		t.Fatalf("reopening the log fsynced the directories %q, want %q", fsys.dirs, want)
	}
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if l, err := Open(file, Options{}); err == nil {
		_ = l.Close()
		t.Fatal("Open of a file succeeded")
	}
}

func TestChangedAndWait(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{Sync: Grouped(time.Millisecond)})
	ch := l.Changed()
	done := make(chan error)
	go func() { done <- l.Wait(ctx, 0) }()
	select {
	case <-ch:
		t.Fatal("Changed before an append")
	case err := <-done:
		t.Fatalf("Wait returned %v before an append", err)
	case <-time.After(10 * time.Millisecond):
	}
	appendRecords(t, l, 0, 1)
	<-ch
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(ctx, time.Millisecond)
	defer cancel()
	if err := l.Wait(c, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait: %v", err)
	}
}

// With EveryAppend, an append that wrote before Close and waits for its
// fsync is answered by Close's fsync: nil if it succeeds (the record is
// durable), its error if it fails; never ErrClosed, which says nothing was
// written. An append after Close gets ErrClosed and writes nothing.
//
// A's fsync is held until Close has marked the log closed (and is held in
// the closing hook); B wrote meanwhile and queued behind A's fsync.
func TestEveryAppendWrittenBeforeClose(t *testing.T) {
	for _, closeFails := range []bool{false, true} {
		t.Run(fmt.Sprintf("close fsync fails %v", closeFails), func(t *testing.T) {
			dir := t.TempDir()
			inSync, release := make(chan struct{}), make(chan struct{})
			bWrote, closing, proceed, bWaits := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
			var syncs, writes atomic.Int32
			h := &hooks{
				writeAt: func(f file, b []byte, off int64) (int, error) {
					n, err := f.WriteAt(b, off)
					if writes.Add(1) == 2 {
						close(bWrote)
					}
					return n, err
				},
				sync: func(f file) error {
					switch syncs.Add(1) {
					case 1: // A's
						close(inSync)
						<-release
					case 2: // Close's
						if closeFails {
							return &os.PathError{Op: "sync", Path: f.Name(), Err: syscall.EIO}
						}
					}
					return f.Sync()
				},
				closing:   func() { close(closing); <-proceed },
				closeWait: func() { close(bWaits) },
			}
			l, err := Open(dir, Options{hooks: h})
			if err != nil {
				t.Fatal(err)
			}
			errA, errB, errClose := make(chan error, 1), make(chan error, 1), make(chan error, 1)
			go func() { _, err := l.Append(ctx, [][]byte{payload(0)}); errA <- err }()
			<-inSync
			go func() { _, err := l.Append(ctx, [][]byte{payload(1)}); errB <- err }()
			<-bWrote
			go func() { errClose <- l.Close() }()
			<-closing // the log is closed; Close waits to take the fsync lock
			close(release)
			if err := <-errA; err != nil {
				t.Fatalf("A, whose fsync began before Close: %v", err)
			}
			// B now finds the log closed; let Close go on once B waits for
			// it (or, wrongly, has returned).
			var gotB error
			select {
			case <-bWaits:
			case gotB = <-errB:
				t.Errorf("B returned %v before Close's fsync", gotB)
			}
			close(proceed)
			if gotB == nil {
				gotB = <-errB
			}
			cerr := <-errClose
			if _, err := l.Append(ctx, [][]byte{payload(2)}); !errors.Is(err, ErrClosed) {
				t.Errorf("append after Close: %v, want ErrClosed", err)
			}
			if closeFails {
				if !errors.Is(cerr, syscall.EIO) {
					t.Errorf("Close: %v, want its fsync's EIO", cerr)
				}
				if errors.Is(gotB, ErrClosed) || !errors.Is(gotB, syscall.EIO) {
					t.Errorf("B: %v, want the EIO of Close's fsync, not ErrClosed (B's record was written)", gotB)
				}
			} else {
				if cerr != nil {
					t.Fatalf("Close: %v", cerr)
				}
				if gotB != nil {
					t.Errorf("B: %v, want nil: Close's fsync made its record durable", gotB)
				}
			}
			l = openLog(t, dir, Options{})
			end := l.End()
			// B's record may be there or not after the failed fsync, whole;
			// the append after Close is not.
			if end != 2 && (!closeFails || end != 1) {
				t.Fatalf("reopened End %d, want A and B (or, after the failed fsync, A)", end)
			}
			checkRecords(t, readRange(t, l, 0, end, 10), 0)
		})
	}
}

// Close while appenders append, under every policy: an append that returns
// nil is durable at its offset, and one that returns ErrClosed left nothing
// in the log (a client may retry it without making a duplicate).
func TestCloseWhileAppending(t *testing.T) {
	for _, pol := range []SyncPolicy{EveryAppend, Grouped(time.Millisecond), NoSync} {
		t.Run(pol.String(), func(t *testing.T) {
			dir := t.TempDir()
			l, err := Open(dir, Options{Sync: pol})
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			acked := map[uint64]string{}
			refused := map[string]bool{}
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Go(func() {
					for i := 0; ; i++ {
						p := fmt.Sprintf("w%d i%d", w, i)
						first, err := l.Append(ctx, [][]byte{[]byte(p)})
						mu.Lock()
						switch {
						case err == nil:
							acked[first] = p
						case errors.Is(err, ErrClosed):
							refused[p] = true
						default:
							t.Error(err)
						}
						mu.Unlock()
						if err != nil {
							return
						}
					}
				})
			}
			time.Sleep(20 * time.Millisecond)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			l = openLog(t, dir, Options{})
			recs := readRange(t, l, 0, l.End(), 1000)
			for off, p := range acked {
				if off >= uint64(len(recs)) || string(recs[off].Payload) != p {
					t.Fatalf("acknowledged %q at offset %d is not in the log", p, off)
				}
			}
			for _, r := range recs {
				if refused[string(r.Payload)] {
					t.Fatalf("%q was refused with ErrClosed, yet it is in the log at offset %d", r.Payload, r.Offset)
				}
			}
			t.Logf("%d appends acknowledged, %d refused, End %d", len(acked), len(refused), len(recs))
		})
	}
}

// TestDamageBeforeWholeRecords: a bad frame in the middle of the last
// segment, with whole records after it, is damage to acknowledged records,
// not a torn tail: Open refuses the log, naming the file and the byte, and
// the file is left as it was (it used to be truncated there, dropping every
// answered record after the damage with one log line).
func TestDamageBeforeWholeRecords(t *testing.T) {
	const n = 50
	orig := t.TempDir()
	writeLog(t, orig, 1<<30, n) // one segment
	segs := segmentFiles(t, orig)
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	pos := 0
	for i := range 20 {
		pos += HeaderSize + len(payload(i))
	}
	for _, tc := range []struct {
		name string
		at   int
	}{
		{"a payload byte", pos + HeaderSize + 1},
		{"the time", pos + 9},
		{"the length", pos + 4},
		{"the checksum", pos},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, orig)
			path := filepath.Join(dir, filepath.Base(segs[0]))
			c := append([]byte(nil), b...)
			c[tc.at] ^= 0x10
			if err := os.WriteFile(path, c, 0o644); err != nil {
				t.Fatal(err)
			}
			l, err := Open(dir, Options{})
			if err == nil {
				l.Close()
				t.Fatal("Open took a log whose acknowledged records are damaged")
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), fmt.Sprintf("byte %d", pos)) {
				t.Fatalf("Open: %v, want a corrupt-segment error naming %s at byte %d", err, path, pos)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(after, c) {
				t.Fatal("Open changed the damaged segment")
			}
		})
	}
}
