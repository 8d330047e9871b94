package actors

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/acktor/acktor/source"
)

// drainSource reads the source of one task alone to its end, Next and Done
// on every root, and closes it; it returns the roots read.
func drainSource(f source.Factory) (int, error) {
	src, err := f(0, 1)
	if err != nil {
		return 0, err
	}
	n := 0
	for {
		r, err := src.Next()
		switch {
		case errors.Is(err, source.ErrNotReady):
			time.Sleep(50 * time.Microsecond)
			continue
		case errors.Is(err, io.EOF):
			return n, src.Close()
		case err != nil:
			_ = src.Close()
			return n, err
		}
		src.Done(r.ID)
		n++
	}
}

// benchTracked runs b.N records of a broker through the tracking runtime
// (one spout task, two ackers) into a counter by word, and reads the same
// records with the source alone (Next and Done; alone must read them
// afresh, under another group or consumer) in the same run. It reports
// records/s of both and "ratio", tracked over alone.
func benchTracked(b *testing.B, tracked, alone source.Factory) {
	var bb Builder
	bb.Spout("broker", 1, tracked)
	bb.Counter("count", 2, CounterOptions{Value: -1}, nil).Fields("broker", 0)
	topo, err := bb.Build()
	if err != nil {
		b.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Log = quietLog()
	rt, err := New(topo, cfg)
	if err != nil {
		b.Fatal(err)
	}
	member := startMember(b, rt)

	b.ResetTimer()
	start := time.Now()
	n, err := drainSource(alone)
	if err != nil {
		b.Fatal(err)
	}
	aloneTook := time.Since(start)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start = time.Now()
	st, err := rt.Run(ctx, member, nil)
	trackedTook := time.Since(start)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if n != b.N {
		b.Fatalf("the source alone read %d records, want %d", n, b.N)
	}
	if st.Roots != uint64(b.N) || st.Completed != st.Roots || st.DeadLettered != 0 {
		b.Fatalf("run stats %+v, want %d roots completed", st.Progress, b.N)
	}
	if k := st.Counters["count"]; k == nil || k.Applied != uint64(b.N) {
		b.Fatalf("counter %+v, want %d applied", k, b.N)
	}
	b.ReportMetric(float64(b.N)/trackedTook.Seconds(), "records/s")
	b.ReportMetric(float64(b.N)/aloneTook.Seconds(), "source-records/s")
	b.ReportMetric(aloneTook.Seconds()/trackedTook.Seconds(), "ratio")
}
