// Package certs loads TLS certificates from PEM files for the gateway's
// HTTPS and for mutual TLS between members: a certificate and key are
// loaded again when their files change, so that a certificate is rotated by
// replacing its files, without a restart.
package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"
)

// Pair serves a certificate and key from their files, loaded again when
// either file changes. A pair that does not load keeps the last good one
// serving.
type Pair struct {
	cert, key string

	mu      sync.Mutex
	pair    *tls.Certificate
	stamp   [2]time.Time // the files' modification times the pair was loaded at
	checked time.Time
}

// checkEvery bounds how often the files are looked at again.
const checkEvery = time.Second

// NewPair loads the certificate and key in their files (PEM).
func NewPair(cert, key string) (*Pair, error) {
	p := &Pair{cert: cert, key: key}
	if err := p.load(); err != nil {
		return nil, err
	}
	return p, nil
}

// load reads the pair if its files changed since the last load.
func (p *Pair) load() error {
	var stamp [2]time.Time
	for i, path := range []string{p.cert, p.key} {
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		stamp[i] = st.ModTime()
	}
	if p.pair != nil && stamp == p.stamp {
		return nil
	}
	pair, err := tls.LoadX509KeyPair(p.cert, p.key)
	if err != nil {
		return err
	}
	p.pair, p.stamp = &pair, stamp
	return nil
}

// current is the pair, read again from its files if they changed.
func (p *Pair) current() (*tls.Certificate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.checked) >= checkEvery {
		p.checked = time.Now()
		_ = p.load() // a broken rotation: the last good pair goes on
	}
	if p.pair == nil {
		return nil, errors.New("certs: no certificate")
	}
	return p.pair, nil
}

// GetCertificate is tls.Config.GetCertificate: the current pair.
func (p *Pair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return p.current()
}

// GetClientCertificate is tls.Config.GetClientCertificate: the current
// pair.
func (p *Pair) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return p.current()
}

// Files name the PEM files of mutual TLS: the authority whose certificates
// are trusted, and this process's certificate and key.
type Files struct {
	CA, Cert, Key string
}

// Mutual returns the TLS configs of a server that accepts only clients
// with a certificate the authority signed, and of a client that presents
// its certificate and trusts only servers the authority signed. If names is
// not empty, the peer's certificate must also carry one of them as a DNS
// name.
func Mutual(f Files, names []string) (server, client *tls.Config, err error) {
	pem, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, nil, fmt.Errorf("ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, nil, fmt.Errorf("ca: %s holds no PEM certificate", f.CA)
	}
	pair, err := NewPair(f.Cert, f.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("cert and key: %w", err)
	}
	named := func(cs tls.ConnectionState) error {
		if len(names) == 0 || len(cs.PeerCertificates) == 0 {
			return nil
		}
		leaf := cs.PeerCertificates[0]
		for _, n := range leaf.DNSNames {
			if slices.Contains(names, n) {
				return nil
			}
		}
		return fmt.Errorf("certs: the peer's certificate (%q) carries none of the names %v", leaf.Subject.CommonName, names)
	}
	server = &tls.Config{MinVersion: tls.VersionTLS13, GetCertificate: pair.GetCertificate,
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, VerifyConnection: named}
	client = &tls.Config{MinVersion: tls.VersionTLS13, GetClientCertificate: pair.GetClientCertificate,
		RootCAs: pool, VerifyConnection: named}
	return server, client, nil
}
