package testserver

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/acktor/acktor/source"
)

// Drain reads src to its end, Next and Done on every root, and
// reports records/s over that; it fails unless it read want roots.
func Drain(b *testing.B, src source.Source, want int) {
	b.Helper()
	start := time.Now()
	n := 0
	for {
		r, err := src.Next()
		if errors.Is(err, source.ErrNotReady) {
			time.Sleep(50 * time.Microsecond)
			continue
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		src.Done(r.ID)
		n++
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if n != want {
		b.Fatalf("read %d records, want %d", n, want)
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "records/s")
}
