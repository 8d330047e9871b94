package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// waitFor polls cond, under l.mu, until it holds.
func waitFor(t *testing.T, l *Log, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l.mu.Lock()
		ok := cond()
		l.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// Concurrent appends with Grouped share writes as well as fsyncs: each
// group is written by a write per writeBehind bytes and one more before its
// fsync, not one per append.
func TestGroupedFewWrites(t *testing.T) {
	const writers, appends = 32, 30
	var writes atomic.Int64
	h := &hooks{writeAt: func(f file, b []byte, off int64) (int, error) {
		writes.Add(1)
		return f.WriteAt(b, off)
	}}
	l := openLog(t, t.TempDir(), Options{Sync: Grouped(2 * time.Millisecond), hooks: h})
	var mu sync.Mutex
	got := map[uint64][]byte{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range appends {
				batch := make([][]byte, 1+(w+i)%8)
				for k := range batch {
					batch[k] = bytes.Repeat(fmt.Appendf(nil, "w%d i%d k%d ", w, i, k), 100)
				}
				first, err := l.Append(ctx, batch)
				if err != nil {
					t.Error(err)
					return
				}
				if l.End() < first+uint64(len(batch)) {
					t.Errorf("Append returned offset %d before End %d passed it", first, l.End())
				}
				mu.Lock()
				for k, p := range batch {
					got[first+uint64(k)] = p
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	st := l.Stats()
	for _, r := range readRange(t, l, 0, st.End, 1000) {
		if !bytes.Equal(r.Payload, got[r.Offset]) {
			t.Fatalf("offset %d: %q, want %q", r.Offset, r.Payload, got[r.Offset])
		}
	}
	if len(got) != int(st.End) || st.Appends != writers*appends {
		t.Fatalf("%d records acknowledged, Stats %+v", len(got), st)
	}
	if max := int64(st.Syncs) + st.Appended/writeBehind; writes.Load() > max {
		t.Fatalf("%d writes for %d appends, %d fsyncs and %d bytes: want at most %d", writes.Load(), st.Appends, st.Syncs, st.Appended, max)
	}
	if st.Syncs*4 > st.Appends {
		t.Fatalf("%d fsyncs for %d appends: want them shared (at most a quarter)", st.Syncs, st.Appends)
	}
	t.Logf("%d appends, %d writes, %d fsyncs", st.Appends, writes.Load(), st.Syncs)
}

// An fsync that is due waits for the appenders the last one answered to
// come back, rather than taking those that are back and leaving the others
// to the next one: one that comes back a little late does not wait a whole
// interval more. The target is what the last fsync answered plus what
// waited when it ended.
func TestGroupedWaitsForAppendersBack(t *testing.T) {
	const interval = 150 * time.Millisecond
	open := func(t *testing.T) (*Log, *atomic.Int32) {
		var syncs atomic.Int32
		h := &hooks{sync: func(f file) error {
			if syncs.Add(1) == 1 {
				time.Sleep(100 * time.Millisecond) // a slow first fsync
			}
			return f.Sync()
		}}
		return openLog(t, t.TempDir(), Options{Sync: Grouped(interval), hooks: h}), &syncs
	}
	results := make(chan error, 4)
	appendAsync := func(l *Log, p string) {
		go func() {
			_, err := l.Append(ctx, [][]byte{[]byte(p)})
			results <- err
		}()
	}
	t.Run("target", func(t *testing.T) {
		l, syncs := open(t)
		appendAsync(l, "a0") // quiet: synced at once
		waitFor(t, l, "the first fsync", func() bool { return syncs.Load() == 1 })
		appendAsync(l, "b0") // comes during the fsync
		waitFor(t, l, "b0", func() bool { return l.stagedAppends() == 1 })
		if err := <-results; err != nil {
			t.Fatal(err)
		}
		l.mu.Lock()
		target := l.target
		l.mu.Unlock()
		if target != 2 {
			t.Errorf("target %d after an fsync of 1 append with 1 waiting, want 2", target)
		}
		if err := <-results; err != nil {
			t.Fatal(err)
		}
	})
	t.Run("waits", func(t *testing.T) {
		l, syncs := open(t)
		start := time.Now()
		appendRecords(t, l, 0, 1) // quiet: synced at once, slowly
		// As if that fsync had answered 3 appenders, which come back one
		// by one, the last after the next fsync is due (start+150ms).
		l.mu.Lock()
		l.target = 3
		l.mu.Unlock()
		appendAsync(l, "a1")
		appendAsync(l, "b1")
		waitFor(t, l, "a1 and b1", func() bool { return l.stagedAppends() == 2 })
		time.Sleep(time.Until(start.Add(interval + 40*time.Millisecond)))
		if n := syncs.Load(); n != 1 {
			t.Fatalf("%d fsyncs: the second started with 2 of 3 appends before it had to", n)
		}
		appendAsync(l, "c1")
		for range 3 {
			if err := <-results; err != nil {
				t.Fatal(err)
			}
		}
		if n := syncs.Load(); n != 2 {
			t.Fatalf("%d fsyncs, want one for the 3 appends", n)
		}
	})
}

// Fsyncs start at most once per interval; an append waits at most the
// interval for its fsync to start, even when fewer appends come than the
// last fsync answered; after a quiet spell it is synced at once.
func TestGroupedWaitBound(t *testing.T) {
	const interval = 200 * time.Millisecond // long beside an fsync of a loaded disk (26 ms seen under -race in CI)
	l := openLog(t, t.TempDir(), Options{Sync: Grouped(interval)})
	timed := func(i int) time.Duration {
		start := time.Now()
		appendRecords(t, l, i, 1)
		return time.Since(start)
	}
	if d := timed(0); d > interval/2 {
		t.Fatalf("the first append took %v, want it synced at once", d)
	}
	if d := timed(1); d < interval*8/10 || d > interval+time.Second {
		t.Fatalf("an append right after took %v, want it to wait for the next fsync (%v)", d, interval)
	}
	l.mu.Lock()
	l.target = 8 // as if the last fsync had answered 8 appenders, of which 1 comes back
	l.mu.Unlock()
	if d := timed(2); d < interval*8/10 || d > interval+time.Second {
		t.Fatalf("a lone append after a group of 8 took %v, want about the interval (%v)", d, interval)
	}
	time.Sleep(interval + interval/2)
	l.mu.Lock()
	l.target = 8
	l.mu.Unlock()
	if d := timed(3); d > interval/2 {
		t.Fatalf("an append after a quiet spell took %v, want it synced at once", d)
	}
	if st := l.Stats(); st.Syncs != 4 {
		t.Fatalf("%d fsyncs for 4 appends", st.Syncs)
	}
}

// A write that fails in the middle of a group fails the appends it carries
// and is cut off; the group's other appends succeed, at dense offsets.
func TestGroupedWriteFailureInGroup(t *testing.T) {
	big := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i)}, 100<<10) }
	for _, tc := range []struct {
		name      string
		failWrite int32 // the write that fails: 1 is A's
		failed    []int // the appends of the group (1 to 5) that fail
	}{
		{"write-behind fails", 2, []int{1, 2, 3}},
		{"last write fails", 3, []int{4, 5}},
		{"none fails", 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			gate := make(chan struct{})
			var syncs, writes atomic.Int32
			h := &hooks{
				sync: func(f file) error {
					if syncs.Add(1) == 1 {
						<-gate
					}
					return f.Sync()
				},
				writeAt: func(f file, b []byte, off int64) (int, error) {
					if writes.Add(1) == tc.failWrite {
						n, _ := f.WriteAt(b[:len(b)/2], off)
						return n, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
					}
					return f.WriteAt(b, off)
				},
			}
			l := openLog(t, dir, Options{Sync: Grouped(0), hooks: h})
			type result struct {
				first uint64
				err   error
			}
			results := make([]chan result, 6)
			add := func(i int, p []byte) {
				results[i] = make(chan result, 1)
				go func() {
					first, err := l.Append(ctx, [][]byte{p})
					results[i] <- result{first, err}
				}()
			}
			payloads := [][]byte{[]byte("a")}
			add(0, payloads[0]) // A: its fsync waits at the gate
			waitFor(t, l, "A's fsync", func() bool { return syncs.Load() == 1 })
			for i := 1; i <= 5; i++ {
				payloads = append(payloads, big(i))
				add(i, payloads[i])
				waitFor(t, l, fmt.Sprint("append ", i), func() bool { return l.stagedAppends() == i && !l.writing })
				if i == 3 && (l.pending.wi != 3 || writes.Load() != 2) {
					t.Fatalf("after 3 appends of 100 KiB: %d written, %d writes; want the first 3 written behind", l.pending.wi, writes.Load())
				}
			}
			close(gate)
			var want [][]byte
			for i := range 6 {
				r := <-results[i]
				if slicesContains(tc.failed, i) {
					if !errors.Is(r.err, ErrNoSpace) {
						t.Fatalf("append %d: %v, want ErrNoSpace", i, r.err)
					}
					continue
				}
				if r.err != nil || r.first != uint64(len(want)) {
					t.Fatalf("append %d: first %d, %v; want %d", i, r.first, r.err, len(want))
				}
				want = append(want, payloads[i])
			}
			st := l.Stats()
			if st.End != uint64(len(want)) || st.Written != st.End || st.Bytes != dirBytes(t, dir) {
				t.Fatalf("Stats %+v, files %d bytes, want End %d", st, dirBytes(t, dir), len(want))
			}
			var size int64
			for _, p := range want {
				size += HeaderSize + int64(len(p))
			}
			if st.Bytes != size {
				t.Fatalf("%d bytes in the log, want %d: no partial write left", st.Bytes, size)
			}
			if first, err := l.Append(ctx, [][]byte{[]byte("after")}); err != nil || first != uint64(len(want)) {
				t.Fatalf("append after: %d, %v", first, err)
			}
			want = append(want, []byte("after"))
			closeLog(t, l)
			l = openLog(t, dir, Options{})
			if r := l.Recovered(); r != (Recovery{}) {
				t.Fatalf("Recovered %+v", r)
			}
			recs := readRange(t, l, 0, uint64(len(want)), 100)
			for i, r := range recs {
				if !bytes.Equal(r.Payload, want[i]) {
					t.Fatalf("record %d: %d bytes, want %d", i, len(r.Payload), len(want[i]))
				}
			}
		})
	}
}

func slicesContains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Groups that cross segment boundaries: each append stays in one segment,
// offsets are dense, every record is there after a reopen.
func TestGroupedRollsInGroup(t *testing.T) {
	const writers, appends = 16, 30
	dir := t.TempDir()
	opts := Options{Sync: Grouped(time.Millisecond), SegmentBytes: MinSegmentBytes}
	l := openLog(t, dir, opts)
	type span struct{ first, n uint64 }
	var mu sync.Mutex
	got := map[uint64][]byte{}
	var spans []span
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range appends {
				batch := make([][]byte, 1+(w+i)%5)
				for k := range batch {
					batch[k] = fmt.Appendf(nil, "w%d i%d k%d %s", w, i, k, bytes.Repeat([]byte("x"), (w*7+i*13+k)%300))
				}
				first, err := l.Append(ctx, batch)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for k, p := range batch {
					got[first+uint64(k)] = p
				}
				spans = append(spans, span{first, uint64(len(batch))})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	closeLog(t, l)
	bases := segmentBases(t, dir)
	if len(bases) < 10 {
		t.Fatalf("%d segments, want many", len(bases))
	}
	for _, s := range spans {
		for _, b := range bases {
			if s.first < b && b < s.first+s.n {
				t.Fatalf("the append of offsets %d to %d is split at segment %d", s.first, s.first+s.n-1, b)
			}
		}
	}
	l = openLog(t, dir, opts)
	if l.End() != uint64(len(got)) {
		t.Fatalf("End %d, %d records acknowledged", l.End(), len(got))
	}
	for _, r := range readRange(t, l, 0, l.End(), 100) {
		if !bytes.Equal(r.Payload, got[r.Offset]) {
			t.Fatalf("offset %d: %q, want %q", r.Offset, r.Payload, got[r.Offset])
		}
	}
}

// Close while appenders append with Grouped: every append either fails
// with ErrClosed or is durable, and Close returns only once the staged
// appends are written and fsynced.
func TestGroupedCloseWhileAppending(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{Sync: Grouped(time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[uint64][]byte{}
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				p := bytes.Repeat(fmt.Appendf(nil, "w%d i%d ", w, i), 1+i%2000)
				first, err := l.Append(ctx, [][]byte{p})
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got[first] = p
				mu.Unlock()
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	l = openLog(t, dir, Options{})
	if r := l.Recovered(); r != (Recovery{}) {
		t.Fatalf("Recovered %+v after Close", r)
	}
	for off, p := range got {
		recs, err := l.Read(off, 1)
		if err != nil || len(recs) != 1 || !bytes.Equal(recs[0].Payload, p) {
			t.Fatalf("acknowledged offset %d: %d records, %v", off, len(recs), err)
		}
	}
	t.Logf("%d appends acknowledged before Close, End %d", len(got), l.End())
}

// An append whose context ends while it waits for its fsync returns the
// context's error; its records still become durable (at least once).
func TestGroupedContextWhileWaiting(t *testing.T) {
	gate := make(chan struct{})
	var syncs atomic.Int32
	h := &hooks{sync: func(f file) error {
		if syncs.Add(1) == 1 {
			<-gate
		}
		return f.Sync()
	}}
	l := openLog(t, t.TempDir(), Options{Sync: Grouped(0), hooks: h})
	c, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := l.Append(c, [][]byte{payload(0)}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Append: %v, want the context's error", err)
	}
	close(gate)
	if err := l.Wait(ctx, 0); err != nil {
		t.Fatal(err)
	}
	checkRecords(t, readRange(t, l, 0, 1, 10), 0)
}
