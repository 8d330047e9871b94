package actors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/acktor/acktor/actors/source"
)

// kafkaBenchTopic is the topic of BenchmarkKafkaTracked, with its partitions.
const (
	kafkaBenchTopic = "words"
	kafkaBenchParts = 4
)

// kafkaBenchCluster starts a one-broker fake Kafka holding n records, words
// "w0" to "w999" round-robin over the partitions; it is closed when the
// benchmark ends, after anything registered later (the member).
func kafkaBenchCluster(b *testing.B, n int) *kfake.Cluster {
	b.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(kafkaBenchParts, kafkaBenchTopic))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: kafkaBenchTopic, Partition: int32(i % kafkaBenchParts), Value: fmt.Appendf(nil, "w%d", i%1000)}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	return c
}

// kafkaBenchConfig reads the benchmark's topic to its end as group.
func kafkaBenchConfig(c *kfake.Cluster, group string) source.KafkaConfig {
	return source.KafkaConfig{Brokers: c.ListenAddrs(), Topics: []string{kafkaBenchTopic}, Group: group, StopAtEnd: true,
		Opts: []kgo.Opt{kgo.FetchMaxWait(50 * time.Millisecond)}}
}

// drainKafka reads a Kafka source alone to its end, Next and Done on every
// record, and closes it; it returns the records read.
func drainKafka(cfg source.KafkaConfig) (int, error) {
	src, err := source.Kafka(cfg)(0, 1)
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

// BenchmarkKafkaTracked runs b.N Kafka records through the tracking runtime
// (one spout task, two ackers) into a counter by word, and reads the same
// records with the source alone (Next and Done) in the same run; "ratio" is
// tracked records/s over the source's.
func BenchmarkKafkaTracked(b *testing.B) {
	c := kafkaBenchCluster(b, b.N)
	var bb Builder
	bb.Spout("kafka", 1, source.Kafka(kafkaBenchConfig(c, "tracked")))
	bb.Counter("count", 2, CounterOptions{Value: -1}, nil).Fields("kafka", 0)
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
	n, err := drainKafka(kafkaBenchConfig(c, "alone"))
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
		b.Fatalf("the source alone read %d records, want %d", n, b.N)
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
