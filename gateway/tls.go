package gateway

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// certFiles serves a certificate and key from their files, loaded again
// when either file changes: a certificate is rotated by replacing its
// files, without a restart. A pair that does not load keeps the last good
// one serving.
type certFiles struct {
	cert, key string

	mu      sync.Mutex
	pair    *tls.Certificate
	stamp   [2]time.Time // the files' modification times the pair was loaded at
	checked time.Time
}

// certCheckEvery bounds how often the files are looked at again.
const certCheckEvery = time.Second

func newCertFiles(cert, key string) (*certFiles, error) {
	c := &certFiles{cert: cert, key: key}
	if err := c.load(); err != nil {
		return nil, err
	}
	return c, nil
}

// load reads the pair if its files changed since the last load.
func (c *certFiles) load() error {
	var stamp [2]time.Time
	for i, path := range []string{c.cert, c.key} {
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		stamp[i] = st.ModTime()
	}
	if c.pair != nil && stamp == c.stamp {
		return nil
	}
	pair, err := tls.LoadX509KeyPair(c.cert, c.key)
	if err != nil {
		return err
	}
	c.pair, c.stamp = &pair, stamp
	return nil
}

// get is tls.Config.GetCertificate: the current pair.
func (c *certFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.checked) >= certCheckEvery {
		c.checked = time.Now()
		_ = c.load() // a broken rotation: the last good pair goes on
	}
	if c.pair == nil {
		return nil, errors.New("gateway: no certificate")
	}
	return c.pair, nil
}

// TLSListener wraps l in TLS with the certificate and key in their files
// (PEM), reloaded when they change.
func TLSListener(l net.Listener, cert, key string) (net.Listener, error) {
	c, err := newCertFiles(cert, key)
	if err != nil {
		return nil, fmt.Errorf("gateway: certificate: %w", err)
	}
	return httpsListener{tls.NewListener(l, &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.get})}, nil
}

// httpsListener marks a listener that speaks TLS, for the log.
type httpsListener struct{ net.Listener }
