package cluster

import (
	"bytes"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
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
// does when an endpoint reader closed its channel a moment before, or wait,
// as it does for an endpoint writer that retries a member that left.
type fakeRemote struct {
	// panics: "race", as Proto.Actor's; "other", another panic; "stuck",
	// no panic, it waits until released; "stuck, then other", both
	panics  string
	mu      sync.Mutex
	stops   []bool // the graceful flag of each Shutdown
	log     bytes.Buffer
	release chan struct{}
}

func (r *fakeRemote) Shutdown(graceful bool) {
	r.mu.Lock()
	r.stops = append(r.stops, graceful)
	r.mu.Unlock()
	if !graceful {
		return
	}
	if strings.HasPrefix(r.panics, "stuck") {
		<-r.release
	}
	switch r.panics {
	case "race":
		ch := make(chan bool, 1)
		close(ch)
		ch <- true
	case "other", "stuck, then other":
		panic("another bug")
	}
}

func (r *fakeRemote) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.log.Write(b)
}

func (r *fakeRemote) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(r, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// TestStopRemote: a remote whose graceful stop panics on a closed channel,
// or is still waiting after its grace, has its server stopped at once, and
// the member's stop goes on; any other panic reaches the member's stop, or
// the log if the graceful stop went on behind.
func TestStopRemote(t *testing.T) {
	for _, tc := range []struct {
		name, panics string
		grace        time.Duration
		want         []bool
		passed       bool   // the panic reached the caller
		logged       string // what the log says once the stop behind ends
	}{
		{"graceful", "", time.Minute, []bool{true}, false, ""},
		{"the race, then stopped at once", "race", time.Minute, []bool{true, false}, false, ""},
		{"another panic", "other", time.Minute, []bool{true}, true, ""},
		{"still waiting after its grace, then its server stopped at once", "stuck", 10 * time.Millisecond, []bool{true, false}, false, ""},
		{"another panic behind, logged", "stuck, then other", 10 * time.Millisecond, []bool{true, false}, false, "another bug"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &fakeRemote{panics: tc.panics, release: make(chan struct{})}
			var once sync.Once
			release := func() { once.Do(func() { close(r.release) }) } // the stop behind ends, as Proto.Actor's bounds end it
			defer release()
			ret := make(chan bool, 1)
			go func() {
				defer func() { ret <- recover() != nil }()
				stopRemote(r, tc.grace)
			}()
			var passed bool
			select {
			case passed = <-ret:
			case <-time.After(5 * time.Second):
				t.Fatal("stopRemote still waits for the graceful stop")
			}
			r.mu.Lock()
			stops := slices.Clone(r.stops)
			r.mu.Unlock()
			if !slices.Equal(stops, tc.want) || passed != tc.passed {
				t.Fatalf("stops %v, panic passed %v; want %v, %v", stops, passed, tc.want, tc.passed)
			}
			if tc.logged == "" {
				return
			}
			release()
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				r.mu.Lock()
				log := r.log.String()
				r.mu.Unlock()
				if strings.Contains(log, tc.logged) && strings.Contains(log, "level=ERROR") {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("the log does not say %q at level ERROR:\n%s", tc.logged, log)
				}
			}
		})
	}
}
