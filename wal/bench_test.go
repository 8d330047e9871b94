package wal

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// benchRecordBytes is the payload size of the benchmark records.
const benchRecordBytes = 256

// BenchmarkAppendGrouped measures appends with Grouped fsyncs from
// concurrent writers (each waiting for its batch to be durable, like an
// HTTP handler answering 2xx), then, in the same run, the disk work they
// needed: a raw loop appending the same number of bytes to a file with the
// same number of fsyncs, each after one write of the bytes since the one
// before. (One write per fsync: how many writes the log makes is its own
// overhead, not disk work.) One op is one record.
//
// Metrics: records/s and MB/s of the log; raw-MB/s of the raw loop;
// raw-ratio = MB/s / raw-MB/s; ratio = MB/s over the best that Grouped(d)
// allows on this disk, which is the slower of the raw loop and of the
// clock; records/fsync.
//
// The clock: each writer has one append outstanding and Grouped(d) starts
// at most one fsync every d, so a writer appends at most once per d, and
// the appends take at least (ceil(appends/writers) - 1) × d (the first
// fsync after a quiet spell comes at once), however fast the disk. With
// 16 writers of 1 record (the first case) that is 16 records per 2 ms,
// 8 k records/s or 2.2 MB/s, while the raw loop writes the same bytes with
// the same fsyncs, without waiting, at 10 to 20 MB/s: there raw-ratio is
// about 0.15 by construction of the policy, which trades fsyncs for
// waiting, not by an overhead of the log (Grouped(0) and EveryAppend sync
// as fast as the disk allows), and ratio measures how close the log keeps
// to its clock. 64 writers of 64 records are bound by the clock too on a
// disk that writes and fsyncs 1.1 MB in less than 2 ms (557 MB/s). When
// the disk is slower than the clock (large batches, Grouped(0)) the bound
// is the raw loop, and ratio = raw-ratio.
//
// Rounds alternate the log and the raw loop, so both meet the disk in the
// same moods (a VM's disk speed drifts).
func BenchmarkAppendGrouped(b *testing.B) {
	for _, bc := range []struct {
		interval       time.Duration
		writers, batch int
	}{
		{2 * time.Millisecond, 16, 1},   // one record per append: bound by the 2 ms clock
		{2 * time.Millisecond, 64, 64},  // 64 handlers with 64-record POSTs
		{2 * time.Millisecond, 64, 256}, // large batches: bound by the disk
		{0, 64, 64},                     // Grouped(0): fsyncs back to back
	} {
		b.Run(fmt.Sprintf("interval=%v/writers=%d/batch=%d", bc.interval, bc.writers, bc.batch), func(b *testing.B) {
			benchGrouped(b, bc.writers, bc.batch, bc.interval)
		})
	}
}

func benchGrouped(b *testing.B, writers, batch int, interval time.Duration) {
	root, err := os.MkdirTemp(b.TempDir(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(root)
	l, err := Open(filepath.Join(root, "wal"), Options{Sync: Grouped(interval)})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	raw, err := os.Create(filepath.Join(root, "raw"))
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	payloads := make([][]byte, batch)
	for i := range payloads {
		payloads[i] = make([]byte, benchRecordBytes)
		for j := range payloads[i] {
			payloads[i][j] = byte('a' + (i+j)%26)
		}
	}
	rounds := 1
	if b.N >= 4*writers*batch {
		rounds = 4
	}
	var walTime, rawTime, boundTime time.Duration
	var syncs uint64
	var rawBuf []byte
	b.ReportAllocs()
	b.ResetTimer()
	for r := range rounds {
		n := b.N / rounds
		if r == rounds-1 {
			n = b.N - (rounds-1)*(b.N/rounds)
		}
		before := l.Stats()
		b.StartTimer()
		start := time.Now()
		appendConcurrently(b, l, writers, n, payloads)
		took := time.Since(start)
		b.StopTimer()
		walTime += took
		after := l.Stats()
		if after.Records-before.Records != uint64(n) {
			b.Fatalf("%d records appended, want %d", after.Records-before.Records, n)
		}
		s := max(after.Syncs-before.Syncs, 1)
		syncs += s
		bytes := after.Appended - before.Appended
		if chunk := int((bytes + int64(s) - 1) / int64(s)); len(rawBuf) < chunk {
			rawBuf = make([]byte, chunk)
			for i := range rawBuf {
				rawBuf[i] = byte('a' + i%26)
			}
		}
		rt := writeRaw(b, raw, rawBuf, bytes, int64(s))
		rawTime += rt
		// The first fsync of a round comes at once (the log was quiet),
		// the others at least interval apart.
		turns := (after.Appends - before.Appends + uint64(writers) - 1) / uint64(writers)
		boundTime += max(rt, time.Duration(max(turns, 1)-1)*interval)
	}
	st := l.Stats()
	mbs := float64(st.Appended) / walTime.Seconds() / 1e6
	rawMBs := float64(st.Appended) / rawTime.Seconds() / 1e6
	b.ReportMetric(float64(b.N)/walTime.Seconds(), "records/s")
	b.ReportMetric(mbs, "MB/s")
	b.ReportMetric(rawMBs, "raw-MB/s")
	b.ReportMetric(boundTime.Seconds()/walTime.Seconds(), "ratio")
	b.ReportMetric(mbs/rawMBs, "raw-ratio")
	b.ReportMetric(float64(st.Records)/float64(max(syncs, 1)), "records/fsync")
}

// appendConcurrently appends n records from writers goroutines, in appends
// of len(payloads) records (the last one shorter).
func appendConcurrently(b *testing.B, l *Log, writers, n int, payloads [][]byte) {
	batch := int64(len(payloads))
	var left atomic.Int64
	left.Store(int64(n))
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for {
				k := min(left.Add(-batch)+batch, batch)
				if k <= 0 {
					return
				}
				if _, err := l.Append(ctx, payloads[:k]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// writeRaw is the raw loop: bytes bytes appended to f with syncs fsyncs,
// each after one write of the bytes since the previous one (sizes spread
// evenly; buf holds the largest). It returns the time it took.
func writeRaw(b *testing.B, f *os.File, buf []byte, bytes, syncs int64) time.Duration {
	start := time.Now()
	written := int64(0)
	for s := range syncs {
		n := (s+1)*bytes/syncs - written
		if n > 0 {
			if _, err := f.Write(buf[:n]); err != nil {
				b.Fatal(err)
			}
		}
		written += n
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	d := time.Since(start)
	if written != bytes {
		b.Fatalf("raw wrote %d bytes, want %d", written, bytes)
	}
	return d
}
