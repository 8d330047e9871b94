package actors

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/acktor/acktor/internal/mix"
	"github.com/acktor/acktor/messages"
	"github.com/acktor/acktor/source"
)

// counterBenchTopology is an idle spout feeding one counter component.
func counterBenchTopology(b *testing.B, tasks int, o CounterOptions) (*Runtime, *Topology) {
	var bb Builder
	bb.Spout("s", 1, func(int, int) (source.Source, error) { return idleSource{}, nil })
	bb.Counter("words", tasks, o, nil).Fields("s", 0)
	topo, err := bb.Build()
	if err != nil {
		b.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Ackers, cfg.Log = 0, quietLog()
	rt, err := New(topo, cfg)
	if err != nil {
		b.Fatal(err)
	}
	return rt, topo
}

// benchBatches makes n batches of size tuples over keys distinct keys,
// each tuple with a fresh content id.
func benchBatches(n, size, keys int) []*messages.TupleBatch {
	names := make([]string, keys)
	for i := range names {
		names[i] = "w" + strconv.Itoa(i)
	}
	out := make([]*messages.TupleBatch, n)
	cid := uint64(0)
	for i := range out {
		m := &messages.TupleBatch{AnchorCounts: make([]uint32, size), ValueCounts: make([]uint32, size),
			Values: make([]string, size), ContentIds: make([]uint64, size), Times: make([]int64, size)}
		for j := range size {
			cid++
			m.ValueCounts[j], m.Values[j], m.ContentIds[j], m.Times[j] = 1, names[mix.Splitmix64(cid)%uint64(keys)], cid, int64(cid)
		}
		out[i] = m
	}
	return out
}

// BenchmarkCounterActor sends batches of 512 word tuples (10k keys,
// exactly-once) to one counter task actor, and feeds the same batches to a
// bare Counter in the same run; "ratio" is actor/bare.
func BenchmarkCounterActor(b *testing.B) {
	const size, keys = 512, 10_000
	o := CounterOptions{Value: -1, ExactlyOnce: true}
	rt, _ := counterBenchTopology(b, 1, o)
	c := startMember(b, rt)
	task := c.Get("words/0", KindCounter)
	batches := benchBatches(max(1, b.N/size), size, keys)

	b.ResetTimer()
	start := time.Now()
	bare, err := NewCounter(o)
	if err != nil {
		b.Fatal(err)
	}
	w := &wiring{env: rt.env, tuples: map[uint32][]*messages.TupleBatch{}}
	col := w.collector(1)
	for _, m := range batches {
		ts, err := decode(m, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		bare.warm(ts) // as the task does
		for i := range ts {
			bare.Process(&ts[i], col)
		}
	}
	bareTime := time.Since(start)

	start = time.Now()
	for _, m := range batches {
		c.ActorSystem.Root.Send(task, m)
	}
	res, err := c.Request("words/0", KindCounter, &messages.CounterQuery{})
	actorTime := time.Since(start)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	n := uint64(len(batches) * size)
	if r := res.(*messages.CounterResult); r.Applied != n || bare.st.Applied != n {
		b.Fatalf("applied %d by the actor, %d bare; want %d", r.Applied, bare.st.Applied, n)
	}
	b.ReportMetric(float64(n)/actorTime.Seconds(), "updates/s")
	b.ReportMetric(float64(n)/bareTime.Seconds(), "bare-updates/s")
	b.ReportMetric(bareTime.Seconds()/actorTime.Seconds(), "ratio")
}

// BenchmarkCounterQuery measures a top-10 query fanned out to 4 counter
// tasks and merged (40k keys in all), against the same query asked of one
// bare Counter holding all 40k keys; "ratio" is query/bare time.
func BenchmarkCounterQuery(b *testing.B) {
	const size, keys, tasks = 512, 40_000, 4
	o := CounterOptions{Value: -1}
	rt, topo := counterBenchTopology(b, tasks, o)
	c := startMember(b, rt)
	bare, err := NewCounter(o)
	if err != nil {
		b.Fatal(err)
	}
	w := &wiring{env: rt.env, tuples: map[uint32][]*messages.TupleBatch{}}
	col := w.collector(1)
	comp, _ := topo.Component("words")
	batches := benchBatches(400, size, keys)
	shards := make([]*messages.TupleBatch, tasks) // route as the fields grouping would
	for i := range shards {
		shards[i] = &messages.TupleBatch{}
	}
	for _, m := range batches {
		ts, _ := decode(m, nil, nil)
		for i := range ts {
			bare.Process(&ts[i], col)
			v := ts[i].Values()[0]
			s := shards[fnv32(v)%tasks]
			s.AnchorCounts, s.ValueCounts = append(s.AnchorCounts, 0), append(s.ValueCounts, 1)
			s.Values, s.ContentIds, s.Times = append(s.Values, v), append(s.ContentIds, 0), append(s.Times, 0)
		}
	}
	for i, s := range shards {
		c.ActorSystem.Root.Send(c.Get(topo.identity(comp.FirstTask+uint32(i)), KindCounter), s)
	}
	ctx := context.Background()
	q := &messages.CounterQuery{Top: 10}
	if _, err := rt.Query(ctx, c, "words", q); err != nil { // activate and settle
		b.Fatal(err)
	}

	b.ResetTimer()
	start := time.Now()
	for range b.N {
		bare.Query(q)
	}
	bareTime := time.Since(start)
	start = time.Now()
	var r *CounterResult
	for range b.N {
		if r, err = rt.Query(ctx, c, "words", q); err != nil {
			b.Fatal(err)
		}
	}
	queryTime := time.Since(start)
	b.StopTimer()
	if want := bare.Query(q); len(r.Top) != 10 || r.Top[0].Key != want.Keys[0] || r.Top[0].Count != want.Counts[0] {
		b.Fatalf("merged top %v, bare top %v/%v", r.Top, want.Keys, want.Counts)
	}
	b.ReportMetric(float64(queryTime.Microseconds())/float64(b.N), "query-µs")
	b.ReportMetric(float64(bareTime.Microseconds())/float64(b.N), "bare-µs")
	b.ReportMetric(queryTime.Seconds()/bareTime.Seconds(), "ratio")
}
