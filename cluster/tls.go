package cluster

import (
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/sirupsen/logrus"

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
	for _, f := range []struct{ key, path string }{{"ca", t.CA}, {"cert", t.Cert}, {"key", t.Key}} {
		if f.path == "" {
			return fmt.Errorf("%s.%s: empty; TLS needs ca, cert and key", at, f.key)
		}
	}
	for _, n := range t.Names {
		if strings.TrimSpace(n) == "" {
			return fmt.Errorf("%s.names: an empty name", at)
		}
	}
	return nil
}

// configs loads the files: the TLS configs of this process's servers and of
// its dials. A refused peer is logged once per address.
func (t TLSConfig) configs(at string, log *logrus.Logger) (server, client *tls.Config, err error) {
	r := &refusals{log: log, seen: map[string]bool{}}
	server, client, err = certs.Mutual(certs.Files{CA: t.CA, Cert: t.Cert, Key: t.Key}, t.Names, r.refused)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", at, err)
	}
	return server, client, nil
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

func (r *refusals) refused(addr net.Addr, err error) {
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
