package actors

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/acktor/acktor/source/kafka"
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
func kafkaBenchConfig(c *kfake.Cluster, group string) kafka.Config {
	return kafka.Config{Brokers: c.ListenAddrs(), Topics: []string{kafkaBenchTopic}, Group: group, StopAtEnd: true,
		Opts: []kgo.Opt{kgo.FetchMaxWait(50 * time.Millisecond)}}
}

// BenchmarkKafkaTracked runs b.N Kafka records through the tracking runtime
// (one spout task, two ackers) into a counter by word, and reads the same
// records with the source alone (Next and Done) in the same run; "ratio" is
// tracked records/s over the source's.
func BenchmarkKafkaTracked(b *testing.B) {
	c := kafkaBenchCluster(b, b.N)
	benchTracked(b, kafka.New(kafkaBenchConfig(c, "tracked")), kafka.New(kafkaBenchConfig(c, "alone")))
}
