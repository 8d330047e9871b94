package gateway

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/acktor/acktor/internal/testserver"
)

// subject dials addr trusting ca and returns the serving
// certificate's subject.
func subject(t *testing.T, addr, ca string) (string, error) {
	t.Helper()
	pem, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	if err != nil {
		return "", err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
}

// TestTLSListenerReloads: the gateway serves its certificate over TLS and,
// once the files are replaced, the new one, without a restart; a broken
// replacement leaves the last good one serving.
func TestTLSListenerReloads(t *testing.T) {
	dir := t.TempDir()
	a := testserver.Certs(t, dir, "first")
	b := testserver.Certs(t, dir, "second")
	cert, key := filepath.Join(dir, "gw.pem"), filepath.Join(dir, "gw-key.pem")
	cp := func(from, to string, at time.Time) {
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(to, at, at); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	cp(a.Cert, cert, now.Add(-time.Hour))
	cp(a.Key, key, now.Add(-time.Hour))
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := TLSListener(raw, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	if got, err := subject(t, l.Addr().String(), a.CA); err != nil || got != "first" {
		t.Fatalf("first certificate: %q, %v", got, err)
	}
	cp(b.Cert, cert, now)
	cp(b.Key, key, now)
	time.Sleep(1100 * time.Millisecond)
	if got, err := subject(t, l.Addr().String(), b.CA); err != nil || got != "second" {
		t.Fatalf("after rotation: %q, %v", got, err)
	}
	if err := os.WriteFile(cert, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	if got, err := subject(t, l.Addr().String(), b.CA); err != nil || got != "second" {
		t.Fatalf("after a broken rotation: %q, %v", got, err)
	}
	if _, err := TLSListener(raw, filepath.Join(dir, "missing.pem"), key); err == nil {
		t.Fatal("a missing certificate file: no error")
	}
}
