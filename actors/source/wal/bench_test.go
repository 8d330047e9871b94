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
// HTTP handler answering 2xx), then, in the same run, a raw sequential
// os.File.Write of the same framed bytes in writes of the same size with
// the same number of fsyncs spread evenly. One op is one record. Metrics:
// records/s and MB/s of the log, raw-MB/s of the baseline, ratio =
// MB/s / raw-MB/s, and records/fsync.
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
	var frames []byte // the frames of one append, for the baseline
	for i := range payloads {
		payloads[i] = make([]byte, benchRecordBytes)
		for j := range payloads[i] {
			payloads[i][j] = byte('a' + (i+j)%26)
		}
		frames = AppendFrame(frames, 0, payloads[i])
	}
	// Rounds alternate the log and the baseline, so that both meet the
	// disk in the same moods (a VM's disk speed drifts).
	rounds := 1
	if b.N >= 4*writers*batch {
		rounds = 4
	}
	var walTime, rawTime time.Duration
	var syncs uint64
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
		walTime += time.Since(start)
		b.StopTimer()
		after := l.Stats()
		if after.Records-before.Records != uint64(n) {
			b.Fatalf("%d records appended, want %d", after.Records-before.Records, n)
		}
		syncs += after.Syncs - before.Syncs
		rawTime += writeRaw(b, raw, frames, int64(after.Appends-before.Appends),
			after.Appended-before.Appended, int64(max(after.Syncs-before.Syncs, 1)))
	}
	st := l.Stats()
	mbs := float64(st.Appended) / walTime.Seconds() / 1e6
	rawMBs := float64(st.Appended) / rawTime.Seconds() / 1e6
	b.ReportMetric(float64(b.N)/walTime.Seconds(), "records/s")
	b.ReportMetric(mbs, "MB/s")
	b.ReportMetric(rawMBs, "raw-MB/s")
	b.ReportMetric(mbs/rawMBs, "ratio")
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

// writeRaw is the baseline: bytes bytes written to f in writes writes of
// (at most) len(frames) bytes, with syncs fsyncs spread evenly, the last
// after the last write. It returns the time it took.
func writeRaw(b *testing.B, f *os.File, frames []byte, writes, bytes, syncs int64) time.Duration {
	start := time.Now()
	written, synced := int64(0), int64(0)
	for w := range writes {
		n := min(int64(len(frames)), bytes-written)
		if _, err := f.Write(frames[:n]); err != nil {
			b.Fatal(err)
		}
		written += n
		if (w+1)*syncs/writes > synced {
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			synced++
		}
	}
	d := time.Since(start)
	if written != bytes || synced != syncs {
		b.Fatalf("raw wrote %d bytes with %d fsyncs, want %d and %d", written, synced, bytes, syncs)
	}
	return d
}
