// Command trackclient is a plain program that tracks its own work through a
// running acktor cluster with cluster/client: each job is a root whose
// tuples are steps done by goroutines of this program; the ackers say when
// a job's whole tree is done, failed or timed out.
//
//	go run ./examples/trackclient --config examples/cluster/client.yaml
package main

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"go.yaml.in/yaml/v3"

	"github.com/acktor/acktor/cluster"
	"github.com/acktor/acktor/cluster/client"
)

type config struct {
	Cluster cluster.Config `yaml:"cluster"`
	Ackers  int            `yaml:"ackers"`
}

func main() {
	path := flag.String("config", "examples/cluster/client.yaml", "the client's YAML config: cluster section and acker count")
	jobs := flag.Int("jobs", 10000, "jobs (roots) to run")
	failRate := flag.Float64("fail-rate", 0.01, "share of jobs a worker fails on purpose")
	wait := flag.Duration("wait", 60*time.Second, "how long to wait for a job's outcome before giving up")
	concurrency := flag.Int("concurrency", 0, "jobs open at a time: each begins when one ends (closed loop); 0 begins them all at once (open loop)")
	flag.Parse()
	switch {
	case *jobs < 1:
		fmt.Fprintf(os.Stderr, "trackclient: --jobs %d: want >= 1\n", *jobs)
		os.Exit(2)
	case *failRate < 0 || *failRate > 1:
		fmt.Fprintf(os.Stderr, "trackclient: --fail-rate %v: want 0..1\n", *failRate)
		os.Exit(2)
	case *wait <= 0:
		fmt.Fprintf(os.Stderr, "trackclient: --wait %v: want > 0\n", *wait)
		os.Exit(2)
	case *concurrency < 0:
		fmt.Fprintf(os.Stderr, "trackclient: --concurrency %d: want >= 0\n", *concurrency)
		os.Exit(2)
	}
	if err := run(*path, *jobs, *concurrency, *failRate, *wait); err != nil {
		fmt.Fprintln(os.Stderr, "trackclient:", err)
		os.Exit(1)
	}
}

func run(path string, jobs, concurrency int, failRate float64, wait time.Duration) error {
	cfg := config{Cluster: cluster.DefaultConfig()}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	cl, err := client.Dial(cfg.Cluster, client.Options{Ackers: cfg.Ackers}, 10*time.Second, log)
	if err != nil {
		return err
	}
	defer cl.Close()

	type step struct {
		root, id uint64
		fail     bool
	}
	work := make(chan step, 1024)
	var wg sync.WaitGroup
	for range 4 { // workers: a step is done and acked, or its job failed
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range work {
				if s.fail {
					_ = cl.Fail(s.root)
					continue
				}
				_ = cl.Ack(s.root, s.id)
			}
		}()
	}
	started := make(map[uint64]time.Time, jobs)
	rng := rand.New(rand.NewPCG(1, 2))
	begin := func() error {
		ids := make([]uint64, 1+rng.IntN(4)) // the job's steps
		init := uint64(0)
		for i := range ids {
			ids[i] = cl.TupleID()
			init ^= ids[i]
		}
		root, err := cl.Begin(init)
		if err != nil {
			return err
		}
		started[root] = time.Now()
		fail := rng.Float64() < failRate
		for i, id := range ids {
			work <- step{root: root, id: id, fail: fail && i == 0}
		}
		return nil
	}
	defer func() { close(work); wg.Wait() }()

	var begun, completed, failed, timedOut int
	var latency []time.Duration
	idle := time.NewTimer(wait)
	defer idle.Stop()
	for completed+failed+timedOut < jobs {
		for begun < jobs && (concurrency == 0 || len(started) < concurrency) {
			if err := begin(); err != nil {
				return err
			}
			begun++
		}
		select {
		case e := <-cl.Events():
			t0, ok := started[e.SpringID]
			if !ok {
				continue
			}
			delete(started, e.SpringID)
			latency = append(latency, time.Since(t0))
			switch {
			case e.Completed:
				completed++
			case strings.HasPrefix(e.Reason, "timed out"): // at its acker, or at the client
				timedOut++
			default:
				failed++
			}
			idle.Reset(wait)
		case <-idle.C:
			return fmt.Errorf("%d of %d jobs without an outcome, none for %v", len(started), jobs, wait)
		}
	}
	slices.Sort(latency)
	loop := "all at once (open loop)"
	if concurrency > 0 {
		loop = fmt.Sprintf("%d at a time (closed loop)", concurrency)
	}
	fmt.Printf("jobs %d, %s: completed %d, failed %d, timed out %d; latency p50 %v, p99 %v\n", jobs, loop, completed, failed, timedOut,
		latency[len(latency)/2].Round(time.Microsecond), latency[len(latency)*99/100].Round(time.Microsecond))
	return nil
}
