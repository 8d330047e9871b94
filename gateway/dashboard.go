package gateway

import (
	_ "embed"
	"net/http"
)

// dashboardHTML is the dashboard page: plain HTML and script, embedded so
// that the binary serves it with no build step.
//
//go:embed dashboard/index.html
var dashboardHTML []byte

// dashboard serves the page at / and a JSON 404 elsewhere.
func (s *Server) dashboard(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" { // "GET /" is every GET no other endpoint takes
		s.noEndpoint(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'")
	_, _ = w.Write(dashboardHTML)
}
