package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/credentials"

	"github.com/acktor/acktor/internal/certs"
)

// TLSConfig turns on mutual TLS for everything members say to each other
// and to clients: the remote's gRPC and the automanaged provider's health
// endpoint. Every member and client presents a certificate the authority
// signed, valid for the host the others dial (cluster.host, or
// advertised_host), and takes only peers that present one. The certificate
// and key are loaded again when their files change; a new authority needs
// a restart.
type TLSConfig struct {
	CA   string `yaml:"ca"`   // PEM file of the authority whose certificates are trusted
	Cert string `yaml:"cert"` // PEM file of this process's certificate
	Key  string `yaml:"key"`  // PEM file of its key
	// Names, if set, are the DNS names of which a peer's certificate must
	// carry one, beyond being signed by the authority.
	Names []string `yaml:"names"`
}

// On says whether TLS is configured.
func (t TLSConfig) On() bool { return t.CA != "" || t.Cert != "" || t.Key != "" }

func (t TLSConfig) validate(at string) error {
	if !t.On() {
		if len(t.Names) > 0 {
			return fmt.Errorf("%s.names: set without ca, cert and key", at)
		}
		return nil
	}
	files := []struct{ key, path string }{{"ca", t.CA}, {"cert", t.Cert}, {"key", t.Key}}
	for _, f := range files {
		if f.path == "" {
			return fmt.Errorf("%s.%s: empty; TLS needs ca, cert and key", at, f.key)
		}
	}
	for _, f := range files {
		if _, err := os.Stat(f.path); err != nil {
			return fmt.Errorf("%s.%s: %w", at, f.key, err)
		}
	}
	for _, n := range t.Names {
		if strings.TrimSpace(n) == "" {
			return fmt.Errorf("%s.names: an empty name", at)
		}
	}
	return nil
}

// memberTLS is the loaded TLS of a member or client: its servers' and
// dials' configs, and the log of refused peers.
type memberTLS struct {
	server, client *tls.Config
	refusals       *refusals
}

// load reads the files.
func (t TLSConfig) load(at string, log *logrus.Logger) (*memberTLS, error) {
	server, client, err := certs.Mutual(certs.Files{CA: t.CA, Cert: t.Cert, Key: t.Key}, t.Names)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", at, err)
	}
	return &memberTLS{server: server, client: client, refusals: &refusals{log: log, seen: map[string]bool{}}}, nil
}

// grpcServer is the remote's server credentials: TLS, a failed handshake
// logged as a refusal.
func (m *memberTLS) grpcServer() credentials.TransportCredentials {
	return loggedCreds{credentials.NewTLS(m.server), m.refusals}
}

// listen wraps l in TLS, a failed handshake logged as a refusal.
func (m *memberTLS) listen(l net.Listener) net.Listener {
	return tlsListener{l, m.server, m.refusals}
}

// loggedCreds are TLS credentials that log a peer whose handshake failed.
type loggedCreds struct {
	credentials.TransportCredentials
	r *refusals
}

func (c loggedCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	out, info, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		c.r.refused(conn.RemoteAddr(), err)
	}
	return out, info, err
}

func (c loggedCreds) Clone() credentials.TransportCredentials {
	return loggedCreds{c.TransportCredentials.Clone(), c.r}
}

// tlsListener is tls.NewListener, with a failed handshake logged.
type tlsListener struct {
	net.Listener
	cfg *tls.Config
	r   *refusals
}

func (l tlsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &handshakeConn{Conn: tls.Server(c, l.cfg), r: l.r}, nil
}

// handshakeConn shakes hands on its first read (the server reads first)
// and logs a failure. The HTTP server sees no *tls.Conn, so it leaves the
// handshake to it.
type handshakeConn struct {
	*tls.Conn
	r    *refusals
	once sync.Once
}

func (c *handshakeConn) Read(b []byte) (int, error) {
	c.once.Do(func() {
		if err := c.Conn.Handshake(); err != nil {
			c.r.refused(c.RemoteAddr(), err)
		}
	})
	return c.Conn.Read(b)
}

// refusals logs each address that was refused once, so that a peer
// retrying every second does not fill the log.
type refusals struct {
	log  *logrus.Logger
	mu   sync.Mutex
	seen map[string]bool
}

// maxRefusals bounds the addresses remembered: beyond it they are
// forgotten, and logged again.
const maxRefusals = 4096

// refused logs a failed handshake with addr, unless the peer went away
// before saying anything (a port probe) or addr was logged before.
func (r *refusals) refused(addr net.Addr, err error) {
	if errors.Is(err, io.EOF) {
		return
	}
	host := addr.String()
	if h, _, e := net.SplitHostPort(host); e == nil {
		host = h
	}
	r.mu.Lock()
	first := !r.seen[host]
	if first {
		if len(r.seen) >= maxRefusals {
			clear(r.seen)
		}
		r.seen[host] = true
	}
	r.mu.Unlock()
	if first {
		r.log.Warnf("cluster: refused a connection from %s, not a member: %v (logged once per address)", addr, err)
	}
}
