package cluster

import (
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/sirupsen/logrus"
)

// TestEmbeddedServesAtOnce: an embedded member activates a grain and
// answers through it as soon as StartEmbedded returns, without the second
// Proto.Actor's StartMember waits for gossip.
func TestEmbeddedServesAtOnce(t *testing.T) {
	lg := logrus.New()
	lg.SetOutput(io.Discard)
	n, err := StartEmbedded("t", []*pcluster.Kind{pcluster.NewKind("echo", actor.PropsFromProducer(func() actor.Actor { return echoGrain{} }))}, lg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	res, err := n.Cluster.Request("e/1", "echo", &pcluster.ClusterIdentity{}, pcluster.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := res.(*pcluster.ClusterIdentity); !ok || r.Identity != n.System.Address() {
		t.Fatalf("answered %v", res)
	}
}

// BenchmarkStartEmbedded starts and stops an embedded member ("acktor"),
// and, in the same run, a member of the same configuration through
// Proto.Actor's StartMember and graceful Shutdown ("protoactor"), which
// sleep a fixed second and two.
func BenchmarkStartEmbedded(b *testing.B) {
	quiet := logrus.New()
	quiet.SetOutput(io.Discard)
	b.Run("acktor", func(b *testing.B) {
		for b.Loop() {
			n, err := StartEmbedded("b", nil, quiet)
			if err != nil {
				b.Fatal(err)
			}
			n.Stop()
		}
	})
	b.Run("protoactor", func(b *testing.B) {
		for b.Loop() {
			sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
				return slog.New(slog.NewTextHandler(io.Discard, nil))
			}))
			c := pcluster.New(sys, pcluster.Configure("b", test.NewTestProvider(test.NewInMemAgent()), Placement(),
				remote.Configure("127.0.0.1", 0)))
			c.StartMember()
			c.Shutdown(true)
		}
	})
}

// TestInsecureOnlyWhenSaid: a member listens on an address other than
// loopback only when its config says it knows members talk without TLS.
func TestInsecureOnlyWhenSaid(t *testing.T) {
	for _, tc := range []struct {
		host     string
		insecure bool
		ok       bool
	}{
		{"127.0.0.1", false, true}, {"localhost", false, true}, {"::1", false, true},
		{"10.1.2.3", false, false}, {"0.0.0.0", false, false}, {"10.1.2.3", true, true}, {"0.0.0.0", true, true},
	} {
		c := DefaultConfig()
		c.Host, c.Insecure = tc.host, tc.insecure
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("host %s, insecure %v: %v", tc.host, tc.insecure, err)
		}
	}
}

// fakeRemote is a remote whose graceful stop may panic, as Proto.Actor's
// does when an endpoint reader closed its channel a moment before.
type fakeRemote struct {
	panics bool
	stops  []bool // the graceful flag of each Shutdown
}

func (r *fakeRemote) Shutdown(graceful bool) {
	r.stops = append(r.stops, graceful)
	if graceful && r.panics {
		panic("send on closed channel")
	}
}

func (r *fakeRemote) Logger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestStopRemote: a remote that panics in its graceful stop is stopped at
// once instead, and the panic does not reach the member's stop.
func TestStopRemote(t *testing.T) {
	for _, tc := range []struct {
		name   string
		panics bool
		want   []bool
	}{
		{"graceful", false, []bool{true}},
		{"panics, then stopped at once", true, []bool{true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &fakeRemote{panics: tc.panics}
			stopRemote(r)
			if !slices.Equal(r.stops, tc.want) {
				t.Fatalf("stops %v, want %v", r.stops, tc.want)
			}
		})
	}
}
