// Command speedlayer runs the speed-layer paper's example embedded: taxi orders from the
// generator (or a Kafka topic, or a JetStream stream) into windowed counters per zone, served by
// the gateway (dashboard at /, JSON, WebSocket, SSE, /metrics), with a
// WebSocket client printing the top zones as they change.
//
//	go run ./examples/speedlayer/cmd/speedlayer
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/acktor/acktor/actors"
	"github.com/acktor/acktor/cluster"
	"github.com/acktor/acktor/gateway"
	"github.com/acktor/acktor/source/jetstream"
	"github.com/acktor/acktor/source/kafka"
	"github.com/acktor/acktor/topologies/speedlayer"
	"github.com/acktor/acktor/window"
)

type flags struct {
	orders          int64
	rate            float64
	zones, riders   int
	seed            uint64
	window, pane    time.Duration
	exactlyOnce     bool
	gateway         string
	watch           bool
	top             int
	every           time.Duration
	kafka, topic    string
	group           string
	nats, stream    string
	consumer        string
	parsers, counts int
}

func main() {
	var f flags
	flag.Int64Var(&f.orders, "orders", 0, "orders to generate; 0 runs until interrupted")
	flag.Float64Var(&f.rate, "rate", 2000, "generated orders per second; 0 as fast as they go")
	flag.IntVar(&f.zones, "zones", 20, "zones")
	flag.IntVar(&f.riders, "riders", 50_000, "riders")
	flag.Uint64Var(&f.seed, "seed", 1, "seed of the generator")
	flag.DurationVar(&f.window, "window", time.Minute, "sliding window of the counts; 0 counts all time")
	flag.DurationVar(&f.pane, "pane", time.Second, "pane (slide) of the window")
	flag.BoolVar(&f.exactlyOnce, "exactly-once", false, "drop what replays bring again")
	flag.StringVar(&f.gateway, "gateway", "127.0.0.1:7070", "the gateway's address")
	flag.BoolVar(&f.watch, "watch", true, "print the top zones from the gateway's WebSocket stream")
	flag.IntVar(&f.top, "top", 5, "zones to print")
	flag.DurationVar(&f.every, "every", 2*time.Second, "how often the printed stream may update")
	flag.StringVar(&f.kafka, "kafka", "", "read orders from Kafka at these brokers (host:port,...) instead of generating them")
	flag.StringVar(&f.topic, "topic", "orders", "the Kafka topic, one \"zone rider fare\" line per record")
	flag.StringVar(&f.group, "group", "acktor-speedlayer", "the Kafka consumer group")
	flag.StringVar(&f.nats, "nats", "", "read orders from NATS JetStream at this URL (nats://host:port) instead of generating them")
	flag.StringVar(&f.stream, "stream", "ORDERS", "the JetStream stream, one \"zone rider fare\" line per message")
	flag.StringVar(&f.consumer, "consumer", "acktor-speedlayer", "the durable JetStream consumer")
	flag.IntVar(&f.parsers, "parsers", 2, "parse tasks")
	flag.IntVar(&f.counts, "counters", 2, "counter tasks")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "speedlayer: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, f); err != nil {
		fmt.Fprintln(os.Stderr, "speedlayer:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, f flags) error {
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	src := speedlayer.Orders(speedlayer.OrdersConfig{Orders: f.orders, Zones: f.zones, Riders: f.riders, Rate: f.rate, Seed: f.seed})
	var commitFailures atomic.Int64
	switch {
	case f.kafka != "" && f.nats != "":
		return errors.New("--kafka and --nats: give one")
	case f.kafka != "":
		src = kafka.New(kafka.Config{Brokers: strings.Split(f.kafka, ","), Topics: []string{f.topic}, Group: f.group,
			OnError: kafkaOnError(log, &commitFailures)})
	case f.nats != "":
		src = jetstream.New(jetstream.Config{URL: f.nats, Stream: f.stream, Consumer: f.consumer})
	}
	var w window.Config
	if f.window != 0 {
		w = window.Config{Size: f.window, Pane: f.pane}
	}
	topo, err := speedlayer.Build(src, speedlayer.Options{Spouts: 1, Parsers: f.parsers, Counters: f.counts, Window: w, ExactlyOnce: f.exactlyOnce})
	if err != nil {
		return err
	}
	cfg := actors.DefaultConfig()
	cfg.Log = log
	rt, err := actors.New(topo, cfg)
	if err != nil {
		return err
	}
	node, err := cluster.StartEmbedded("speedlayer", rt.Kinds(), log)
	if err != nil {
		return err
	}
	defer node.Stop()
	gctx, stopGateway := context.WithCancel(ctx)
	defer stopGateway()
	gw := gateway.New(rt, node.Cluster, "", log)
	served := make(chan error, 1)
	go func() { served <- gw.Serve(gctx, f.gateway) }()
	fmt.Fprintf(os.Stderr, "speedlayer: dashboard at http://%s/, stream at ws://%s/api/stream/counters/%s?top=%d&by=sum\n",
		f.gateway, f.gateway, speedlayer.ZonesComponent, f.top)
	if f.watch {
		go func() {
			time.Sleep(200 * time.Millisecond) // let the gateway listen
			if err := speedlayer.Watch(gctx, "http://"+f.gateway, f.top, f.every, os.Stdout); err != nil {
				log.WithError(err).Error("speedlayer: watch")
			}
		}()
	}
	st, err := rt.Run(ctx, node.Cluster, nil)
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	stopGateway()
	if err := <-served; err != nil {
		return err
	}
	if st == nil {
		return nil
	}
	fmt.Printf("final: %d orders completed, %d replayed, %d dead-lettered, latency p50 %v p99 %v\n",
		st.Completed, st.Replayed, st.DeadLettered, st.LatencyP50, st.LatencyP99)
	if n := commitFailures.Load(); n > 0 {
		fmt.Printf("final: %d Kafka offset commits failed (logged above); the group resumes from its last commit that landed\n", n)
	}
	if r := st.Counters[speedlayer.ZonesComponent]; r != nil {
		a := gateway.AnswerOf(r) // the window's bounds, when it has them
		a.Top = a.Top[:min(f.top, len(a.Top))]
		return speedlayer.Print(os.Stdout, a)
	}
	return nil
}

// kafkaOnError logs what the Kafka source recovers from, so that a commit
// that fails every time (an ACL, a group error) is seen rather than the
// group's offsets silently staying put; commit failures are also counted
// for the final summary. The source calls it from its own goroutines, and
// logrus's logger is safe for that.
func kafkaOnError(log logrus.FieldLogger, commitFailures *atomic.Int64) func(error) {
	return func(err error) {
		if errors.Is(err, kafka.ErrCommit) {
			commitFailures.Add(1)
			log.WithError(err).Error("speedlayer: kafka offset commit failed; the group's offsets do not advance until a commit succeeds")
			return
		}
		log.WithError(err).Warn("speedlayer: kafka source")
	}
}
