package actors

import (
	"io"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/acktor/acktor/messages"
	"github.com/acktor/acktor/source"
	"github.com/acktor/acktor/tracker"
	"github.com/acktor/acktor/tracker/ledger"
)

// idleSource never yields a root: the benchmark's spout only hears back.
type idleSource struct{}

func (idleSource) Next() (source.Root, error)    { return source.Root{}, io.EOF }
func (idleSource) Replay(uint64) (string, error) { return "", io.EOF }
func (idleSource) Done(uint64)                   {}
func (idleSource) Total() int64                  { return 0 }
func (idleSource) Close() error                  { return nil }

// startAckers runs a topology of one idle spout with the given ackers on
// an embedded member: the ackers hear only what the caller sends them.
func startAckers(tb testing.TB, ackers int) (*Runtime, *cluster.Cluster) {
	tb.Helper()
	var bb Builder
	bb.Spout("s", 1, func(int, int) (source.Source, error) { return idleSource{}, nil })
	topo, err := bb.Build()
	if err != nil {
		tb.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Ackers, cfg.Log = ackers, quietLog()
	rt, err := New(topo, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return rt, startMember(tb, rt)
}

// BenchmarkAckerActor pushes XOR folds (one init and one ack per root, in
// batches of 512, roots completing as they go) through one acker actor and
// through a bare Ledger in the same run; "ratio" is actor/ledger.
func BenchmarkAckerActor(b *testing.B) {
	const batch = 512
	rt, c := startAckers(b, 1)
	acker := c.Get(tracker.AckerIdentity(0), KindAcker)
	root := c.ActorSystem.Root
	routing := rt.env.dir.Load().Routing // as the tasks stamp their messages
	rounds := max(1, b.N/(2*batch))

	b.ResetTimer()
	start := time.Now()
	l := ledger.New(ledger.Config{Generations: 3, ExpectedInFlight: batch})
	for r := range rounds {
		for i := range batch {
			id := uint64(r*batch + i)
			l.Init(id, 0, id|1)
		}
		for i := range batch {
			id := uint64(r*batch + i)
			l.Ack(id, id|1)
		}
	}
	bare := time.Since(start)

	start = time.Now()
	for r := range rounds {
		tr := &messages.Track{Task: 0, SpringIds: make([]uint64, batch), InitXors: make([]uint64, batch), Routing: routing}
		ack := &messages.AckBatch{SpringIds: make([]uint64, batch), XorDeltas: make([]uint64, batch), Routing: routing}
		for i := range batch {
			id := uint64(r*batch + i)
			tr.SpringIds[i], tr.InitXors[i] = id, id|1
			ack.SpringIds[i], ack.XorDeltas[i] = id, id|1
		}
		root.Send(acker, tr)
		root.Send(acker, ack)
	}
	res, err := c.Request(tracker.AckerIdentity(0), KindAcker, &messages.AckerStatsRequest{})
	actor := time.Since(start)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if st := res.(*messages.AckerStats); st.Completed != uint64(rounds*batch) {
		b.Fatalf("acker completed %d of %d roots", st.Completed, rounds*batch)
	}
	folds := float64(2 * rounds * batch)
	b.ReportMetric(folds/actor.Seconds(), "folds/s")
	b.ReportMetric(folds/bare.Seconds(), "ledger-folds/s")
	b.ReportMetric(bare.Seconds()/actor.Seconds(), "ratio")
}
