package gateway

import (
	"crypto/tls"
	"fmt"
	"net"

	"github.com/acktor/acktor/internal/certs"
)

// TLSListener wraps l in TLS with the certificate and key in their files
// (PEM), reloaded when they change.
func TLSListener(l net.Listener, cert, key string) (net.Listener, error) {
	p, err := certs.NewPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("gateway: certificate: %w", err)
	}
	return httpsListener{tls.NewListener(l, &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: p.GetCertificate})}, nil
}

// httpsListener marks a listener that speaks TLS, for the log.
type httpsListener struct{ net.Listener }
