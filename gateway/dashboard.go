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

// The charting library the dashboard draws with: uPlot 1.6.31 (MIT,
// dashboard/LICENSE-uPlot), from npm, embedded so that nothing is fetched
// at run time.
var (
	//go:embed dashboard/uPlot-1.6.31.iife.min.js
	uPlotJS []byte
	//go:embed dashboard/uPlot-1.6.31.min.css
	uPlotCSS []byte
)

// dashboardCSP lets the page run its own inline script and the embedded
// library, and connect to this gateway only.
const dashboardCSP = "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; connect-src 'self'"

// dashboardAsset serves an embedded file of the dashboard's.
func dashboardAsset(body []byte, contentType string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("Content-Type", contentType)
		h.Set("Cache-Control", "public, max-age=86400") // the file name carries its version
		h.Set("Content-Security-Policy", dashboardCSP)
		_, _ = w.Write(body)
	}
}

// dashboard serves the page at / and a JSON 404 elsewhere.
func (s *Server) dashboard(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" { // "GET /" is every GET no other endpoint takes
		s.noEndpoint(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Security-Policy", dashboardCSP)
	_, _ = w.Write(dashboardHTML)
}
