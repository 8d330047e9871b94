// Package speedlayer is the speed-layer paper's example as a topology: a stream of taxi
// orders ("zone rider fare") feeds windowed counters per zone — orders,
// the sum of fares, distinct riders (HyperLogLog) and repeat riders
// (Bloom) — that clients read over HTTP and watch over WebSocket.
//
// The orders come from a seeded generator (Orders) or from any source
// (a Kafka topic, a JetStream stream) of lines in the same format. The
// acktor binary ships it: `acktor node` runs it as job.topology speedlayer
// (Topology), and examples/speedlayer embeds it with a watcher (Watch).
package speedlayer

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acktor/acktor/actors"
	"github.com/acktor/acktor/member"
	"github.com/acktor/acktor/source"
	"github.com/acktor/acktor/window"
)

// ZonesComponent is the name of the counter of orders per zone.
const ZonesComponent = "zones"

// Options shape the topology.
type Options struct {
	Spouts, Parsers, Counters int
	// Window is the sliding window of the counts; the zero value counts
	// all time.
	Window window.Config
	// ExactlyOnce makes the counters drop what replays bring again.
	ExactlyOnce bool
}

// Build makes the topology over src: orders → parse → zones (a counter
// keyed by zone, summing fares in cents, with distinct and repeat riders).
func Build(src source.Factory, o Options) (*actors.Topology, error) {
	switch {
	case o.Spouts < 1 || o.Parsers < 1 || o.Counters < 1:
		return nil, fmt.Errorf("speedlayer: spouts %d, parsers %d, counters %d: want >= 1 each", o.Spouts, o.Parsers, o.Counters)
	case o.Window != (window.Config{}):
		if err := o.Window.Validate(); err != nil {
			return nil, fmt.Errorf("speedlayer: window: %w", err)
		}
	}
	var b actors.Builder
	b.Spout("orders", o.Spouts, src)
	b.Processor("parse", o.Parsers, func(actors.TaskInfo) (actors.Processor, error) { return Parse{}, nil }).LocalOrShuffle("orders")
	b.Counter(ZonesComponent, o.Counters, actors.CounterOptions{Window: o.Window, Key: 0, Value: 2, ExactlyOnce: o.ExactlyOnce,
		Distinct: &actors.DistinctOptions{Field: 1}, Repeats: &actors.RepeatOptions{Field: 1, Expected: 5000}}, nil).
		Fields("parse", 0)
	topo, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("speedlayer: %w", err)
	}
	return topo, nil
}

// Parse splits an order line, "zone rider fare", into its fields; the fare
// is in whole cents (2350 for 23.50). A line that is not an order is
// rejected: it goes to the dead-letter sink at once, with the reason.
type Parse struct{}

// Process implements actors.Processor.
func (Parse) Process(t *actors.Tuple, c *actors.Collector) {
	f := strings.Fields(t.Values()[0])
	if len(f) != 3 {
		c.Reject(t, fmt.Sprintf("%d fields, want 3: zone rider fare", len(f)))
		return
	}
	if _, err := strconv.ParseUint(f[2], 10, 32); err != nil {
		c.Reject(t, fmt.Sprintf("fare %q: want whole cents, such as 2350 for 23.50", f[2]))
		return
	}
	if err := c.Emit([]*actors.Tuple{t}, f[0], f[1], f[2]); err != nil {
		c.Fail(t)
		return
	}
	c.Ack(t)
}

// ReusesTuples implements actors.Reuser: Parse keeps no tuple.
func (Parse) ReusesTuples() {}

// OrdersConfig describes a stream of orders.
type OrdersConfig struct {
	// Orders is the number of orders over all spout tasks; 0 is endless.
	Orders int64
	// Zones and Riders are how many there are; both are Zipf distributed
	// (s = 1.2 and 1.05), so a few zones are busy and riders come back.
	Zones, Riders int
	// Rate paces each task to this many orders per second; 0 is as fast as
	// the pipeline takes them. Paced orders have their ingestion time;
	// unpaced ones event times 1 ms apart from the epoch, reproducibly.
	Rate float64
	Seed uint64
}

// Order is one generated order.
type Order struct {
	Zone, Rider string
	Fare        uint64 // cents
}

func (o Order) String() string { return fmt.Sprintf("%s %s %d", o.Zone, o.Rider, o.Fare) }

// Gen generates order i of the stream: the same i always gives the same
// order, so a replay re-creates it without keeping it.
func (c OrdersConfig) Gen(i uint64) Order {
	rng := rand.New(rand.NewPCG(c.Seed, i))
	zone := rand.NewZipf(rng, 1.2, 1, uint64(c.Zones-1)).Uint64()
	rider := rand.NewZipf(rng, 1.05, 1, uint64(c.Riders-1)).Uint64()
	return Order{Zone: fmt.Sprintf("zone-%02d", zone), Rider: fmt.Sprintf("r%d", rider), Fare: 500 + rng.Uint64N(4500)}
}

// Orders returns the source of the stream: task i of n takes the orders
// i, i+n, i+2n, ...
func Orders(c OrdersConfig) source.Factory {
	return func(task, tasks int) (source.Source, error) {
		if c.Zones < 2 || c.Riders < 2 || c.Orders < 0 || c.Rate < 0 {
			return nil, fmt.Errorf("speedlayer: orders: zones %d, riders %d (want >= 2), orders %d, rate %v (want >= 0)",
				c.Zones, c.Riders, c.Orders, c.Rate)
		}
		return &orders{c: c, task: uint64(task), next: uint64(task), step: uint64(tasks)}, nil
	}
}

type orders struct {
	c                OrdersConfig
	task, next, step uint64
	due              time.Time // paced: when the next order may go
}

func (o *orders) Next() (source.Root, error) {
	if o.c.Orders > 0 && o.next >= uint64(o.c.Orders) {
		return source.Root{}, io.EOF
	}
	r := source.Root{ID: o.next, Payload: o.c.Gen(o.next).String()}
	if o.c.Rate > 0 {
		now := time.Now()
		if now.Before(o.due) {
			return source.Root{}, source.ErrNotReady
		}
		if lag := now.Add(-time.Second); o.due.Before(lag) {
			o.due = lag // after a stall, catch up one second's worth at most
		}
		o.due = o.due.Add(time.Duration(float64(time.Second) / o.c.Rate))
	} else {
		r.Time = int64(o.next+1) * int64(time.Millisecond)
	}
	o.next += o.step
	return r, nil
}

func (o *orders) Replay(id uint64) (string, error) { return o.c.Gen(id).String(), nil }
func (o *orders) Done(uint64)                      {}
func (o *orders) Close() error                     { return nil }

func (o *orders) Total() int64 {
	if o.c.Orders == 0 {
		return -1
	}
	n, task, step := uint64(o.c.Orders), o.task, o.step
	if task >= n {
		return 0
	}
	return int64((n - task + step - 1) / step)
}

// ZoneTruth is what the counters should say of a zone.
type ZoneTruth struct {
	Orders, Fares, Distinct, Repeats uint64
}

// Truth computes the counts of the first n orders (all time), zone by zone.
func Truth(c OrdersConfig, n int64) map[string]ZoneTruth {
	out := map[string]ZoneTruth{}
	seen := map[Order]bool{} // zone and rider, fare zero
	for i := range uint64(n) {
		o := c.Gen(i)
		t := out[o.Zone]
		t.Orders++
		t.Fares += o.Fare
		k := Order{Zone: o.Zone, Rider: o.Rider}
		if seen[k] {
			t.Repeats++
		} else {
			t.Distinct++
			seen[k] = true
		}
		out[o.Zone] = t
	}
	return out
}

// settings are the topology's own keys of a member's job section.
type settings struct {
	Parsers  int     `yaml:"parsers"`
	Counters int     `yaml:"counters"`
	Zones    int     `yaml:"zones"`
	Riders   int     `yaml:"riders"`
	Rate     float64 `yaml:"rate"`
}

func settingsOf(j *member.Job) (settings, error) {
	s := settings{Parsers: 2, Counters: 2, Zones: 20, Riders: 50_000}
	return s, j.Decode(&s)
}

// Topology is the speed layer as a member registers it: over job.source
// (a Kafka topic or a JetStream stream of "zone rider fare" lines, or
// generated orders: job.lines of them, job.zones zones, job.riders riders,
// job.rate orders per second per spout task, 0 as fast as they go), with
// job.parsers and job.counters tasks (2 each). A batch job writes
// zone<TAB>orders<TAB>fares in cents<TAB>distinct riders<TAB>repeat riders
// lines, by zone.
func Topology() member.Topology {
	return member.Topology{Name: "speedlayer",
		Build: func(j *member.Job) (*actors.Topology, error) {
			s, err := settingsOf(j)
			if err != nil {
				return nil, err
			}
			return Build(j.Source, Options{Spouts: j.Spouts, Parsers: s.Parsers, Counters: s.Counters, Window: j.Window, ExactlyOnce: j.ExactlyOnce})
		},
		Generate: func(j *member.Job, lines int64) (source.Factory, error) {
			s, err := settingsOf(j)
			if err != nil {
				return nil, err
			}
			if s.Zones < 2 || s.Riders < 2 || s.Rate < 0 {
				return nil, &actors.FieldError{Field: "Zones", Value: fmt.Sprintf("%d zones, %d riders, rate %v", s.Zones, s.Riders, s.Rate),
					Want: "zones and riders >= 2, rate >= 0"}
			}
			return Orders(OrdersConfig{Orders: lines, Zones: s.Zones, Riders: s.Riders, Rate: s.Rate, Seed: j.Seed}), nil
		},
		Results: Results}
}

// Results writes a finished run's zones: zone, orders, fares in cents,
// distinct riders and repeat riders, tab-separated, by zone.
func Results(w io.Writer, st *actors.RunStats) error {
	r := st.Counters[ZonesComponent]
	if r == nil {
		return errors.New("speedlayer: no zones counter in the run")
	}
	top := slices.Clone(r.Top)
	slices.SortFunc(top, func(a, b window.Entry) int { return strings.Compare(a.Key, b.Key) })
	bw := bufio.NewWriter(w)
	for _, e := range top {
		fmt.Fprintf(bw, "%s\t%d\t%d\t%d\t%d\n", e.Key, e.Count, e.Sum, r.Distinct[e.Key], r.Repeats[e.Key])
	}
	return bw.Flush()
}
