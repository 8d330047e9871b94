package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/status"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/sirupsen/logrus"

	_ "github.com/acktor/acktor/cluster/wire" // a member's serializer
)

// Config is one member's place in a multi-machine cluster.
type Config struct {
	// Name is the cluster's name: members with the same name and provider
	// form one cluster.
	Name string `yaml:"name"`
	// Host and Port are where the member's remote endpoint listens (Port 0:
	// any free port); AdvertisedHost, if set, is the address other members
	// dial instead of Host.
	Host           string `yaml:"host"`
	Port           int    `yaml:"port"`
	AdvertisedHost string `yaml:"advertised_host"`
	// Provider finds the other members: "automanaged" (a static list of
	// peers that check each other's health over HTTP; for development),
	// "etcd" (members register under a lease in etcd; for production) or
	// "embedded" (a cluster of this one member, in memory: no ports, no
	// peers; Host, Port and the providers' sections are not used).
	Provider    string            `yaml:"provider"`
	Automanaged AutomanagedConfig `yaml:"automanaged"`
	Etcd        EtcdConfig        `yaml:"etcd"`
	// Metrics, if set, turns on Proto.Actor's metrics; they are recorded
	// into the global otel meter, so set it as the global provider too.
	Metrics metric.MeterProvider `yaml:"-"`
	// Job, if set, names the job this member carries (a fingerprint of its
	// config, JobKind): members share grains only with members that carry
	// the same, so a member started with another job gets none of theirs
	// and they none of its.
	Job string `yaml:"-"`
	// Deal names the kinds whose grains the placement deals out over the
	// members, a component's tasks evenly (Placement); the others are
	// placed by rendezvous scores alone. A dealt grain can move between
	// two members that both stay when members come and go, so a kind
	// whose grains claim their state from the member that held them
	// before a join (counter tasks) must not be dealt.
	Deal []string `yaml:"-"`
	// TLS, if set, makes members and clients talk mutual TLS: only a
	// process with a certificate the cluster's authority signed takes part.
	TLS TLSConfig `yaml:"tls"`
	// Insecure says that the member may listen on an address other than
	// loopback without TLS: members then talk plaintext gRPC with no
	// authentication, and anyone who reaches the port takes part. Without
	// TLS or it such a member refuses to start.
	Insecure bool `yaml:"insecure"`
}

// Loopback says whether host (an IP address or localhost) is this machine
// only.
func Loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// EtcdConfig configures the etcd provider. A member holds its key under a
// lease of a few seconds: one that dies leaves the cluster when the lease
// runs out.
type EtcdConfig struct {
	Endpoints   []string      `yaml:"endpoints"`    // host:port of etcd's client URLs
	Prefix      string        `yaml:"prefix"`       // the key prefix of this cluster's members
	DialTimeout time.Duration `yaml:"dial_timeout"` // how long a call to etcd may wait (at least the 3 s lease)
	// TLS, if set, dials etcd over TLS with a client certificate: CA is
	// the authority of etcd's server certificate, Cert and Key the
	// member's, which etcd's client-cert-auth checks (Names: of etcd's).
	TLS TLSConfig `yaml:"tls"`
}

// AutomanagedConfig configures the automanaged provider.
type AutomanagedConfig struct {
	// Port is this member's health endpoint, on Config.Host.
	Port int `yaml:"port"`
	// Peers are every member's health endpoint, host:port, this one's too.
	Peers []string `yaml:"peers"`
	// Refresh is how often peers are checked; a member that does not answer
	// leaves the cluster.
	Refresh time.Duration `yaml:"refresh"`
}

// DefaultConfig binds everything to 127.0.0.1.
func DefaultConfig() Config {
	return Config{Name: "acktor", Host: "127.0.0.1", Provider: "automanaged",
		Automanaged: AutomanagedConfig{Port: 6330, Peers: []string{"127.0.0.1:6330"}, Refresh: time.Second},
		Etcd:        EtcdConfig{Endpoints: []string{"127.0.0.1:2379"}, Prefix: "/acktor", DialTimeout: 5 * time.Second}}
}

// MembershipLag is how long after one member learns that another died the
// others may still not know: the automanaged provider's refresh (each
// member polls on its own), about half a second with etcd (its watch tells
// every member at once), none for a cluster of one process.
func (c Config) MembershipLag() time.Duration {
	switch c.Provider {
	case "automanaged":
		return c.Automanaged.Refresh
	case "etcd":
		return 500 * time.Millisecond
	}
	return 0
}

// Validate names the first field in error, as the config file spells it.
func (c Config) Validate() error {
	switch {
	case c.Name == "":
		return errors.New("cluster.name: empty")
	case strings.Contains(c.Name, "/"):
		return fmt.Errorf("cluster.name %q: no / allowed (it is a key path element in etcd)", c.Name)
	case net.ParseIP(c.Host) == nil && c.Host != "localhost":
		return fmt.Errorf("cluster.host %q: want an IP address or localhost", c.Host)
	case c.Port < 0 || c.Port > 65535:
		return fmt.Errorf("cluster.port %d: want 0..65535 (0: any free port)", c.Port)
	case !Loopback(c.Host) && !c.Insecure && !c.TLS.On():
		return fmt.Errorf("cluster.host %q: not loopback, and members talk without TLS or authentication "+
			"(anyone who reaches the port takes part); give cluster.tls (ca, cert, key), "+
			"or set cluster.insecure: true to run so on a network you trust", c.Host)
	}
	if err := c.TLS.validate("cluster.tls"); err != nil {
		return err
	}
	switch c.Provider {
	case "automanaged":
		return c.Automanaged.validate()
	case "etcd":
		return c.Etcd.validate()
	case "embedded":
		return nil
	}
	return fmt.Errorf("cluster.provider %q: want automanaged, etcd or embedded", c.Provider)
}

func (a AutomanagedConfig) validate() error {
	switch {
	case a.Port < 1 || a.Port > 65535:
		return fmt.Errorf("cluster.automanaged.port %d: want 1..65535", a.Port)
	case len(a.Peers) == 0:
		return errors.New("cluster.automanaged.peers: empty; list every member's host:port, this one's too")
	case a.Refresh < 100*time.Millisecond:
		return fmt.Errorf("cluster.automanaged.refresh %v: want >= 100ms", a.Refresh)
	}
	for _, p := range a.Peers {
		if _, port, err := net.SplitHostPort(p); err != nil || port == "" {
			return fmt.Errorf("cluster.automanaged.peers: %q: want host:port", p)
		}
	}
	return nil
}

func (e EtcdConfig) validate() error {
	switch {
	case len(e.Endpoints) == 0:
		return errors.New("cluster.etcd.endpoints: empty; list etcd's client addresses, host:port")
	case !strings.HasPrefix(e.Prefix, "/"):
		return fmt.Errorf("cluster.etcd.prefix %q: want a key prefix starting with /", e.Prefix)
	case e.DialTimeout <= 0:
		return fmt.Errorf("cluster.etcd.dial_timeout %v: want > 0", e.DialTimeout)
	}
	if err := e.TLS.validate("cluster.etcd.tls"); err != nil {
		return err
	}
	for _, p := range e.Endpoints {
		if _, port, err := net.SplitHostPort(strings.TrimPrefix(strings.TrimPrefix(p, "http://"), "https://")); err != nil || port == "" {
			return fmt.Errorf("cluster.etcd.endpoints: %q: want host:port", p)
		}
	}
	return nil
}

// MaxRemoteMessage is the largest gRPC message a member takes from
// another (one batch of the remote's endpoint writer).
const MaxRemoteMessage = 64 << 20

// streamBuffer and streamWindow size gRPC's buffers and flow-control
// windows on the streams between members: reads and writes of 256 KiB
// rather than 32, and fixed windows of 16 MiB, the most gRPC's own
// estimate (which fixed windows turn off) grows them to, so that a burst
// of tuple batches does not wait for the estimate to catch up. A member
// may thus hold up to 16 MiB of received, unread data from each other
// member while it is stalled. Over 4M lines three members on one machine
// counted 1.10× the tuples/s (median of 16 alternating pairs).
const (
	streamBuffer = 256 << 10
	streamWindow = 16 << 20
)

// streamServerOptions and streamDialOptions are gRPC's options on the
// streams between members, but for credentials: a received message of up
// to MaxRemoteMessage (a batch of the endpoint writer, up to 1000 messages,
// may carry a moving counter's state part beside many tuple batches: more
// than gRPC's default 4 MiB), buffers and windows as streamBuffer and
// streamWindow say, and a received batch read into a
// buffer from a pool, not a new one: the codec copies what it keeps out of
// it (a fifth of the bytes a member that takes many batches made; the
// larger messages into cluster/wire's buffers, cluster/wire/receive.go). The
// pool keeps buffers by size class, a class's largest (docs/cluster.md);
// experimental in gRPC 1.60. A writer's connect handshake is bounded by
// connectWithin (handshakeWithin).
//
// No stats handler, request tracing, binary log, codec option or other
// stream interceptor goes on these streams: cluster/wire gives an encoded
// batch's bytes back to its pools once gRPC's proto codec has marshalled
// the message that holds them, and the marshalled bytes once gRPC's writer
// has copied them, and each of those would see the message or its bytes
// after that, or marshal it with another codec (handshakeWithin never
// reads one).
func streamServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(MaxRemoteMessage), grpc.ReadBufferSize(streamBuffer), grpc.WriteBufferSize(streamBuffer),
		grpc.InitialWindowSize(streamWindow), grpc.InitialConnWindowSize(streamWindow),
		experimental.RecvBufferPool(grpc.NewSharedBufferPool())}
}

func streamDialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithReadBufferSize(streamBuffer), grpc.WithWriteBufferSize(streamBuffer),
		grpc.WithInitialWindowSize(streamWindow), grpc.WithInitialConnWindowSize(streamWindow),
		grpc.WithStreamInterceptor(handshakeWithin(connectWithin))}
}

// endpointQueue is the first size of the queue of messages to each other
// member (it grows as needed).
const endpointQueue = 4096

// StartNode joins (or founds) the cluster cfg describes as a member hosting
// kinds. Proto.Actor logs through log.
func StartNode(cfg Config, kinds []*pcluster.Kind, log *logrus.Logger) (*Node, error) {
	if cfg.Provider == "embedded" {
		if err := cfg.Validate(); err != nil {
			return nil, err
		}
		return StartEmbedded(cfg.Name, kinds, log)
	}
	return start(cfg, kinds, false, log)
}

// StartClient joins the cluster cfg describes as a client: it hosts no
// grains and serves no health check, but calls them and receives messages
// at its own actors (cluster/client). cfg.Automanaged.Port is not used.
func StartClient(cfg Config, log *logrus.Logger) (*Node, error) {
	return start(cfg, nil, true, log)
}

func start(cfg Config, kinds []*pcluster.Kind, client bool, log *logrus.Logger) (n *Node, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Provider == "embedded" {
		return nil, errors.New("cluster.provider embedded: a cluster of one process, which no client can join")
	}
	aopts := []actor.ConfigOption{actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return NewSlogLogger(log)
	})}
	if cfg.Metrics != nil {
		aopts = append(aopts, actor.WithMetricProviders(cfg.Metrics))
	}
	var mtls *memberTLS
	if cfg.TLS.On() {
		if mtls, err = cfg.TLS.load("cluster.tls", log); err != nil {
			return nil, err
		}
	}
	var provider pcluster.ClusterProvider
	var ep *etcdProvider
	switch cfg.Provider {
	case "etcd":
		if ep, err = newEtcdProvider(cfg.Etcd, cfg.Name, log); err != nil {
			return nil, err
		}
		provider = ep
	case "automanaged":
		if provider, err = newHealthProvider(cfg.Automanaged, cfg.Name, cfg.Host, client, mtls, log); err != nil {
			return nil, err
		}
	}
	sys := actor.NewActorSystem(aopts...)
	ropts := []remote.ConfigOption{}
	if cfg.AdvertisedHost != "" {
		ropts = append(ropts, remote.WithAdvertisedHost(cfg.AdvertisedHost))
	}
	sopts := []grpc.ServerOption{grpc.UnaryInterceptor(noUnary)}
	creds := insecure.NewCredentials()
	if mtls != nil {
		sopts = append(sopts, grpc.Creds(mtls.grpcServer()))
		creds = credentials.NewTLS(mtls.client)
	}
	sopts = append(sopts, streamServerOptions()...)
	ropts = append(ropts, remote.WithDialOptions(append(streamDialOptions(), grpc.WithTransportCredentials(creds))...))
	// The endpoint writer's queue to each member starts as an array of this
	// many messages and doubles when full. The library's 1e6 made 16 MB of
	// pointers per member talked to, which every collection scanned: two
	// thirds of a member's live heap, and a quarter of its CPU went to the
	// collector.
	ropts = append(ropts, remote.WithServerOptions(sopts...), remote.WithEndpointWriterQueueSize(endpointQueue))
	rcfg := remote.Configure(cfg.Host, cfg.Port, ropts...)
	// Each retry to reach a dead member waits 2 s; the default 5 held a
	// leaving member up to 10 s after its run had ended.
	rcfg.MaxRetryCount = 2
	if cfg.Job != "" && !client {
		kinds = append(kinds, pcluster.NewKind(JobKind(cfg.Job), actor.PropsFromFunc(func(actor.Context) {})))
	}
	pcfg := pcluster.Configure(cfg.Name, provider, &placement{job: cfg.Job, deal: cfg.Deal}, rcfg,
		pcluster.WithKinds(kinds...), pcluster.WithRequestTimeout(10*time.Second))
	c := pcluster.New(sys, pcfg)
	defer func() { // StartMember panics on a busy port or a provider error
		if r := recover(); r != nil {
			_ = provider.Shutdown(false)
			stopStarted(c)
			err = fmt.Errorf("cluster: starting member: %v", r)
		}
	}()
	if client {
		c.StartClient()
	} else {
		c.StartMember()
	}
	n = &Node{System: sys, Cluster: c}
	if ep != nil {
		n.Lost = ep.lost
	}
	return n, nil
}

// noUnary answers every unary call to the remote's gRPC service with
// Unimplemented: its two (ListProcesses, GetProcessDiagnostics) panic in
// this Proto.Actor version, so one call from anyone who reaches the port
// would bring the member down. Members talk over the Receive stream only.
func noUnary(_ context.Context, _ any, info *grpc.UnaryServerInfo, _ grpc.UnaryHandler) (any, error) {
	return nil, status.Errorf(codes.Unimplemented, "%s: not served", info.FullMethod)
}

// stopStarted stops what a failed StartMember or StartClient had started,
// so that the process can try again: the remote's server, which holds the
// member's port, and the actor system with the gossip and placement actors.
// The remote's server exists only if Remote.Start got past listening, which
// is when it gives the process registry its address.
func stopStarted(c *pcluster.Cluster) {
	if c.Remote != nil && c.ActorSystem.ProcessRegistry.Address != unstartedAddress {
		c.Remote.Shutdown(false)
	}
	c.ActorSystem.Shutdown()
}

// unstartedAddress is a Proto.Actor actor system's address until its remote
// listens.
const unstartedAddress = "nonhost"

// CloseClient leaves the cluster StartClient joined. (Cluster.Shutdown
// fails on a client in this Proto.Actor version: it has no gossip.)
func (n *Node) CloseClient() {
	c := n.Cluster
	_ = c.Config.ClusterProvider.Shutdown(false)
	c.IdentityLookup.Shutdown()
	c.Remote.Shutdown(false)
	c.ActorSystem.Shutdown()
}

// Leave leaves the cluster gracefully: its grains move to the members that
// own them once it is gone (handing their state over, see Placement), then
// the other members learn of it at once rather than after a failed health
// check, while it passes on what still reaches it for a moment.
func (n *Node) Leave() {
	Leave(n.Cluster, leaveGrace)
}

// leaveGrace is how long a leaving member keeps passing messages on after
// it told the provider it leaves: long enough for the automanaged
// provider's health checks (1 s by default) to notice.
const leaveGrace = 2 * time.Second

// Leave takes a member out of the cluster without losing what its grains
// hold: they move to the members that own them without it (Evacuate); for
// grace it still passes on what reaches it, while the others look grains
// up again; then the provider learns that it leaves, and for grace more it
// answers members that have not heard yet. Its remote's endpoint writers
// may still be stopping, for up to about 20 s, after Leave returns
// (stopRemote).
func Leave(c *pcluster.Cluster, grace time.Duration) {
	Evacuate(c)
	time.Sleep(grace) // stragglers pass through while the others still take our messages
	if p, ok := c.IdentityLookup.(*placement); ok {
		p.tellEvacuated(evacuateWait) // the members that joined meanwhile
	}
	if err := c.Config.ClusterProvider.Shutdown(true); err != nil {
		c.Logger().Warn("leaving: the provider", slog.Any("error", err))
	}
	time.Sleep(grace)
	stopMember(c, ownershipMoves)
}
