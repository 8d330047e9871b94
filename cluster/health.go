package cluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/sirupsen/logrus"
)

// healthProvider is the automanaged provider, in place of Proto.Actor's: a
// static list of peers, each serving its member on a health endpoint, that
// every member (and client) polls each refresh; a peer that does not answer
// is out of the cluster until it answers again. Unlike the library's, it
// serves on the member's host rather than on every interface, speaks HTTPS
// with client certificates when the cluster has TLS, keeps no state in
// globals and stops its goroutines on Shutdown.
type healthProvider struct {
	name    string
	cfg     AutomanagedConfig
	log     *logrus.Logger
	scheme  string // http or https
	client  *http.Client
	server  *http.Server // nil for a client
	listen  net.Listener
	self    *pcluster.Member
	publish func(pcluster.Members)

	stop context.CancelFunc
	ctx  context.Context
	wg   sync.WaitGroup
	once sync.Once
}

// healthNode is what a health endpoint answers: the member and the cluster
// it belongs to.
type healthNode struct {
	ID          string   `json:"id"`
	ClusterName string   `json:"cluster_name"`
	Address     string   `json:"address"`
	Port        int      `json:"port"`
	Kinds       []string `json:"kinds"`
}

// newHealthProvider listens on host:cfg.Port unless client; with mtls the
// endpoint and the polls speak HTTPS with client certificates.
func newHealthProvider(cfg AutomanagedConfig, name, host string, client bool, mtls *memberTLS, log *logrus.Logger) (*healthProvider, error) {
	var dial *tls.Config
	if mtls != nil {
		dial = mtls.client
	}
	// A dead peer refuses the connection at once; one that is merely busy
	// (a collection, a starved CPU) gets as long as the library's provider
	// gave it before it counts as gone.
	const timeout = 2 * time.Second
	p := &healthProvider{name: name, cfg: cfg, log: log, scheme: "http",
		client: &http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: dial,
			DialContext: (&net.Dialer{Timeout: timeout}).DialContext, MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute}}}
	if dial != nil {
		p.scheme = "https"
	}
	p.ctx, p.stop = context.WithCancel(context.Background())
	if client {
		return p, nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, fmt.Sprint(cfg.Port)))
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("cluster.automanaged.port: %w", err)
	}
	if mtls != nil {
		l = mtls.listen(l)
	}
	p.listen = l
	p.server = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: timeout,
		ErrorLog: stdlog.New(debugWriter{log}, "automanaged provider: ", 0), BaseContext: func(net.Listener) context.Context { return p.ctx }}
	return p, nil
}

// debugWriter writes the health server's own log at debug level (a peer
// that failed the TLS handshake is logged once, as a warning, by the
// listener).
type debugWriter struct{ log *logrus.Logger }

func (d debugWriter) Write(p []byte) (int, error) {
	d.log.Debug(strings.TrimSpace(string(p)))
	return len(p), nil
}

// serve answers GET /_health with this member.
func (p *healthProvider) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/_health" || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	if p.self == nil {
		http.Error(w, "not started", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(healthNode{ID: p.self.Id, ClusterName: p.name, Address: p.self.Host,
		Port: int(p.self.Port), Kinds: p.self.Kinds})
}

// StartMember serves this member's health and starts polling the peers.
func (p *healthProvider) StartMember(c *pcluster.Cluster) error {
	host, port, err := c.ActorSystem.GetHostPort()
	if err != nil {
		_ = p.listen.Close()
		return fmt.Errorf("automanaged provider: %w", err)
	}
	p.self = &pcluster.Member{Id: c.ActorSystem.ID, Host: host, Port: int32(port), Kinds: c.GetClusterKinds()}
	p.publish = c.MemberList.UpdateClusterTopology
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		if err := p.server.Serve(p.listen); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.log.WithError(err).Error("automanaged provider: the health endpoint stopped")
		}
	}()
	go p.follow()
	return nil
}

// StartClient polls the peers without serving.
func (p *healthProvider) StartClient(c *pcluster.Cluster) error {
	p.publish = c.MemberList.UpdateClusterTopology
	p.wg.Add(1)
	go p.follow()
	return nil
}

// Shutdown stops serving (the others drop this member at their next poll)
// and polling. It may be called more than once.
func (p *healthProvider) Shutdown(bool) error {
	p.once.Do(func() {
		p.stop()
		if p.server != nil {
			_ = p.server.Close()
			if p.self == nil { // never started serving
				_ = p.listen.Close()
			}
		}
		p.wg.Wait()
		p.client.CloseIdleConnections()
	})
	return nil
}

// follow publishes the members that answer, every refresh.
func (p *healthProvider) follow() {
	defer p.wg.Done()
	t := time.NewTicker(p.cfg.Refresh)
	defer t.Stop()
	for {
		p.publishMembers(p.poll())
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// poll asks every peer for its member, at once; those that do not answer,
// or answer for another cluster, are left out.
func (p *healthProvider) poll() []*pcluster.Member {
	found := make([]*pcluster.Member, len(p.cfg.Peers))
	var wg sync.WaitGroup
	for i, peer := range p.cfg.Peers {
		wg.Go(func() {
			m, err := p.ask(peer)
			if err != nil {
				p.log.WithError(err).Debugf("automanaged provider: peer %s", peer)
				return
			}
			found[i] = m
		})
	}
	wg.Wait()
	return slices.DeleteFunc(found, func(m *pcluster.Member) bool { return m == nil })
}

// ask gets one peer's member.
func (p *healthProvider) ask(peer string) (*pcluster.Member, error) {
	req, err := http.NewRequestWithContext(p.ctx, http.MethodGet, p.scheme+"://"+peer+"/_health", nil)
	if err != nil {
		return nil, err
	}
	res, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %s", res.Status)
	}
	var n healthNode
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&n); err != nil {
		return nil, fmt.Errorf("its answer: %w", err)
	}
	switch {
	case n.ClusterName != p.name:
		return nil, fmt.Errorf("a member of cluster %q, not %q", n.ClusterName, p.name)
	case n.ID == "" || n.Address == "" || n.Port <= 0 || n.Port > 65535:
		return nil, fmt.Errorf("no member in its answer: %+v", n)
	}
	return &pcluster.Member{Id: n.ID, Host: n.Address, Port: int32(n.Port), Kinds: n.Kinds}, nil
}

// publishMembers hands Proto.Actor the members, this one always among
// them (its own endpoint may be slow to answer, but it is itself).
func (p *healthProvider) publishMembers(ms []*pcluster.Member) {
	if p.ctx.Err() != nil {
		return
	}
	if p.self != nil && !slices.ContainsFunc(ms, func(m *pcluster.Member) bool { return m.Id == p.self.Id }) {
		ms = append(ms, p.self)
	}
	p.publish(ms)
}
