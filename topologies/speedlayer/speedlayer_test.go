package speedlayer

import (
	"context"
	"io"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/acktor/acktor/actors"
	"github.com/acktor/acktor/cluster"
	"github.com/acktor/acktor/gateway"
	"github.com/acktor/acktor/source"
)

func quiet() *logrus.Logger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

// start runs the speed layer over oc on an embedded member.
func start(t *testing.T, oc OrdersConfig, o Options) (*actors.Runtime, *cluster.Node) {
	t.Helper()
	return startOver(t, Orders(oc), o, nil)
}

// startOver runs the speed layer over src on an embedded member, its dead
// letters to sink (nil: the runtime's default).
func startOver(t *testing.T, src source.Factory, o Options, sink actors.DeadLetterSink) (*actors.Runtime, *cluster.Node) {
	t.Helper()
	topo, err := Build(src, o)
	if err != nil {
		t.Fatal(err)
	}
	cfg := actors.DefaultConfig()
	cfg.Log = quiet()
	if sink != nil {
		cfg.DeadLetters = sink
	}
	rt, err := actors.New(topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	node, err := cluster.StartEmbedded("speedlayer", rt.Kinds(), quiet())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Stop)
	return rt, node
}

// TestZonesAgainstTruth: orders, fares and repeat riders per zone are the
// generator's truth (repeats: Bloom false positives only add, a few); the
// distinct riders are within the HyperLogLog's error.
func TestZonesAgainstTruth(t *testing.T) {
	oc := OrdersConfig{Orders: 30_000, Zones: 12, Riders: 20_000, Seed: 7}
	rt, node := start(t, oc, Options{Spouts: 2, Parsers: 2, Counters: 3})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := rt.Run(ctx, node.Cluster, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := st.Counters[ZonesComponent]
	truth := Truth(oc, oc.Orders)
	if st.Completed != uint64(oc.Orders) || len(got.Top) != len(truth) {
		t.Fatalf("%d orders completed, %d zones counted; want %d and %d", st.Completed, len(got.Top), oc.Orders, len(truth))
	}
	for _, e := range got.Top {
		want := truth[e.Key]
		if e.Count != want.Orders || uint64(e.Sum) != want.Fares {
			t.Errorf("%s: %d orders, %d fares; truth %d, %d", e.Key, e.Count, e.Sum, want.Orders, want.Fares)
		}
		if d := got.Distinct[e.Key]; math.Abs(float64(d)-float64(want.Distinct)) > 0.05*float64(want.Distinct)+2 {
			t.Errorf("%s: %d distinct riders, truth %d", e.Key, d, want.Distinct)
		}
		if r := got.Repeats[e.Key]; r < want.Repeats || float64(r) > float64(want.Repeats)*1.03+3 {
			t.Errorf("%s: %d repeat riders, truth %d", e.Key, r, want.Repeats)
		}
	}
}

// TestWatch reads two updates of a live run over WebSocket.
func TestWatch(t *testing.T) {
	rt, node := start(t, OrdersConfig{Zones: 5, Riders: 100, Rate: 2000, Seed: 1}, Options{Spouts: 1, Parsers: 1, Counters: 1})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = rt.Run(ctx, node.Cluster, nil)
	}()
	gw := gateway.New(rt, node.Cluster, "", quiet())
	srv := httptest.NewServer(gw.Handler())
	defer func() {
		gw.Close()
		srv.Close()
		cancel()
		wg.Wait()
	}()
	var out lockedBuffer
	wctx, stop := context.WithTimeout(ctx, 20*time.Second)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- Watch(wctx, srv.URL, 3, 100*time.Millisecond, &out) }()
	for out.count("zone-00") < 2 {
		select {
		case err := <-done:
			t.Fatalf("watch ended: %v\n%s", err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "distinct riders") || !strings.Contains(s, "orders applied") {
		t.Fatalf("output:\n%s", s)
	}
	if err := Watch(context.Background(), "127.0.0.1:1", 3, time.Second, io.Discard); err == nil || !strings.Contains(err.Error(), "want http://host:port") {
		t.Fatalf("watch of a bad address: %v", err)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lockedBuffer) count(s string) int { return strings.Count(l.String(), s) }

func TestConfigErrors(t *testing.T) {
	for _, c := range []OrdersConfig{{Zones: 1, Riders: 5}, {Zones: 5, Riders: 5, Rate: -1}} {
		if _, err := Orders(c)(0, 1); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	if _, err := Build(Orders(OrdersConfig{Zones: 2, Riders: 2}), Options{}); err == nil {
		t.Error("Build with no tasks: no error")
	}
}

type deadLetters struct {
	mu  sync.Mutex
	got []actors.DeadLetter
}

func (d *deadLetters) DeadLetter(l actors.DeadLetter) {
	d.mu.Lock()
	d.got = append(d.got, l)
	d.mu.Unlock()
}

// TestBadOrdersRejected: an order line that is not one (a decimal fare, a
// missing field) goes to the dead-letter sink at once with the reason,
// without a replay; the good orders count.
func TestBadOrdersRejected(t *testing.T) {
	path := filepath.Join(t.TempDir(), "orders.txt")
	if err := os.WriteFile(path, []byte("zone-01 r1 2350\nzone-01 r2 23.50\nzone-02 r3\nzone-02 r3 500\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sink := &deadLetters{}
	rt, node := startOver(t, source.File(path), Options{Spouts: 1, Parsers: 2, Counters: 1}, sink)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := rt.Run(ctx, node.Cluster, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Completed != 2 || st.DeadLettered != 2 || st.Replayed != 0 {
		t.Fatalf("completed %d, dead-lettered %d, replayed %d; want 2, 2, 0", st.Completed, st.DeadLettered, st.Replayed)
	}
	reasons := map[string]bool{}
	for _, d := range sink.got {
		reasons[d.Reason] = d.Attempts == 1
	}
	for _, want := range []string{`rejected by parse: fare "23.50": want whole cents, such as 2350 for 23.50`,
		"rejected by parse: 2 fields, want 3: zone rider fare"} {
		if !reasons[want] {
			t.Errorf("no dead letter %q after one attempt in %+v", want, sink.got)
		}
	}
	if r := st.Counters[ZonesComponent]; r == nil || r.Applied != 2 {
		t.Fatalf("counter result %+v, want 2 orders applied", r)
	}
}
