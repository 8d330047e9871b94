package actors

import (
	"context"
	"fmt"
	"testing"
	"time"

	jssource "github.com/acktor/acktor/source/jetstream"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/acktor/acktor/internal/testserver"
)

// jetStreamBenchServer starts an embedded nats-server with JetStream whose
// stream "WORDS" holds n messages, words "w0" to "w999" in turn; it is shut
// down when the benchmark ends, after anything registered later (the member).
func jetStreamBenchServer(b *testing.B, n int) *server.Server {
	b.Helper()
	srv, stop := testserver.JetStream(b)
	b.Cleanup(stop)
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
func jetStreamBenchConfig(srv *server.Server, name string) jssource.Config {
	return jssource.Config{URL: srv.ClientURL(), Stream: "WORDS", Consumer: name, StopAtEnd: true}
}

// BenchmarkJetStreamTracked runs b.N JetStream messages through the
// tracking runtime (one spout task, two ackers) into a counter by word, and
// reads the same messages with the source alone (Next and Done, through
// another durable consumer) in the same run; "ratio" is tracked records/s
// over the source's.
func BenchmarkJetStreamTracked(b *testing.B) {
	srv := jetStreamBenchServer(b, b.N)
	benchTracked(b, jssource.New(jetStreamBenchConfig(srv, "tracked")), jssource.New(jetStreamBenchConfig(srv, "alone")))
}
