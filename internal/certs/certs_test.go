package certs

import (
	"crypto/tls"
	"strings"
	"testing"

	"github.com/acktor/acktor/internal/testserver"
)

// TestMutual: a server of Mutual takes only clients whose certificate its
// authority signed (and that carry a wanted name).
func TestMutual(t *testing.T) {
	dir := t.TempDir()
	member := testserver.Certs(t, dir, "member")
	stranger := testserver.Certs(t, dir, "stranger")
	for _, tc := range []struct {
		name          string
		names         []string // the server's wanted names
		client        func() *tls.Config
		refusedReason string // what the server's handshake says; "": taken
	}{
		{"a member", nil, func() *tls.Config { return mutualClient(t, member, nil) }, ""},
		{"a member with a wanted name", []string{"member"}, func() *tls.Config { return mutualClient(t, member, nil) }, ""},
		{"a member without a wanted name", []string{"acker-host"}, func() *tls.Config { return mutualClient(t, member, nil) }, "none of the names"},
		{"no certificate", nil, func() *tls.Config {
			c := mutualClient(t, member, nil)
			c.GetClientCertificate = nil
			return c
		}, "didn't provide a certificate"},
		{"another authority's certificate", nil, func() *tls.Config {
			c := mutualClient(t, stranger, nil)
			c.RootCAs = mutualClient(t, member, nil).RootCAs // trusts the server, is not trusted
			return c
		}, "unknown authority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, served := serveOnce(t, member, tc.names)
			conn, err := tls.Dial("tcp", addr, tc.client())
			if err == nil {
				// TLS 1.3: a refused client certificate shows on the first read.
				_, err = conn.Read(make([]byte, 1))
				conn.Close()
			}
			serr := <-served
			if tc.refusedReason == "" {
				if serr != nil {
					t.Fatalf("refused: %v", serr)
				}
				return
			}
			if serr == nil || err == nil || !strings.Contains(serr.Error(), tc.refusedReason) {
				t.Fatalf("server %v, client %v; want the server to say %q", serr, err, tc.refusedReason)
			}
		})
	}
}

// TestMutualClientRefusesAStranger: a client does not talk to a server its
// authority did not sign, nor to one without a wanted name.
func TestMutualClientRefusesAStranger(t *testing.T) {
	dir := t.TempDir()
	member := testserver.Certs(t, dir, "member")
	stranger := testserver.Certs(t, dir, "stranger")
	for _, tc := range []struct {
		name   string
		server TLSFiles
		names  []string
	}{
		{"another authority", stranger, nil},
		{"no wanted name", member, []string{"acker-host"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, _ := serveOnce(t, tc.server, nil)
			if c, err := tls.Dial("tcp", addr, mutualClient(t, member, tc.names)); err == nil {
				c.Close()
				t.Fatal("the client took the server")
			}
		})
	}
}

// serveOnce listens on 127.0.0.1 with Mutual's server config of f and
// names, and shakes hands with one client; served tells how that went.
func serveOnce(t *testing.T, f TLSFiles, names []string) (addr string, served <-chan error) {
	t.Helper()
	server, _, err := Mutual(Files(f), names)
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", server)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	out := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			err = c.(*tls.Conn).Handshake()
			c.Close()
		}
		out <- err
	}()
	return l.Addr().String(), out
}

// TLSFiles is testserver's, for the table.
type TLSFiles = testserver.TLSFiles

func mutualClient(t *testing.T, f TLSFiles, names []string) *tls.Config {
	t.Helper()
	_, client, err := Mutual(Files(f), names)
	if err != nil {
		t.Fatal(err)
	}
	client.ServerName = "127.0.0.1"
	return client
}

func TestMutualBadFiles(t *testing.T) {
	dir := t.TempDir()
	f := testserver.Certs(t, dir, "member")
	for _, tc := range []struct {
		name  string
		files Files
		want  string
	}{
		{"no ca file", Files{CA: dir + "/none.pem", Cert: f.Cert, Key: f.Key}, "ca:"},
		{"ca not pem", Files{CA: f.Key, Cert: f.Cert, Key: f.Key}, "holds no PEM certificate"},
		{"key of nothing", Files{CA: f.CA, Cert: f.Cert, Key: f.CA}, "cert and key:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := Mutual(tc.files, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}
