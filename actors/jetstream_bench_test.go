package actors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/acktor/acktor/actors/source"
)

// jetStreamBenchServer starts an embedded nats-server with JetStream whose
// stream "WORDS" holds n messages, words "w0" to "w999" in turn; it is shut
// down when the benchmark ends, after anything registered later (the member).
func jetStreamBenchServer(b *testing.B, n int) *server.Server {
	b.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: b.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		b.Fatal(err)
	}
	srv.Start()
	b.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	if !srv.ReadyForConnections(10 * time.Second) {
		b.Fatal("nats-server not ready in 10s")
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "WORDS", Subjects: []string{"words"},
		Storage: jetstream.MemoryStorage}); err != nil {
		b.Fatal(err)
	}
	for i := range n {
		if _, err := js.PublishAsync("words", fmt.Appendf(nil, "w%d", i%1000)); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		b.Fatal("publishing took more than a minute")
	}
	return srv
}

// jetStreamBenchConfig reads the benchmark's stream to its end through the
// durable consumer name.
func jetStreamBenchConfig(srv *server.Server, name string) source.JetStreamConfig {
	return source.JetStreamConfig{URL: srv.ClientURL(), Stream: "WORDS", Consumer: name, StopAtEnd: true}
}

// drainJetStream reads a JetStream source alone to its end, Next and Done on
// every message, and closes it; it returns the messages read.
func drainJetStream(cfg source.JetStreamConfig) (int, error) {
	src, err := source.JetStream(cfg)(0, 1)
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

// BenchmarkJetStreamTracked runs b.N JetStream messages through the
// tracking runtime (one spout task, two ackers) into a counter by word, and
// reads the same messages with the source alone (Next and Done, through
// another durable consumer) in the same run; "ratio" is tracked records/s
// over the source's.
func BenchmarkJetStreamTracked(b *testing.B) {
	srv := jetStreamBenchServer(b, b.N)
	var bb Builder
	bb.Spout("nats", 1, source.JetStream(jetStreamBenchConfig(srv, "tracked")))
	bb.Counter("count", 2, CounterOptions{Value: -1}, nil).Fields("nats", 0)
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
	n, err := drainJetStream(jetStreamBenchConfig(srv, "alone"))
	if err != nil {
		b.Fatal(err)
	}
	alone := time.Since(start)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start = time.Now()
	st, err := rt.Run(ctx, member, nil)
	tracked := time.Since(start)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if n != b.N {
		b.Fatalf("the source alone read %d messages, want %d", n, b.N)
	}
	if st.Roots != uint64(b.N) || st.Completed != st.Roots || st.DeadLettered != 0 {
		b.Fatalf("run stats %+v, want %d roots completed", st.Progress, b.N)
	}
	if k := st.Counters["count"]; k == nil || k.Applied != uint64(b.N) {
		b.Fatalf("counter %+v, want %d applied", k, b.N)
	}
	b.ReportMetric(float64(b.N)/tracked.Seconds(), "records/s")
	b.ReportMetric(float64(b.N)/alone.Seconds(), "source-records/s")
	b.ReportMetric(alone.Seconds()/tracked.Seconds(), "ratio")
}
