// Package gateway is acktor's data access over HTTP: the tracker's status,
// counter queries, streams of both over WebSocket and server-sent events,
// Prometheus metrics, a dashboard, ingest into a write-ahead log, and the
// admin endpoint that changes the acker count. Answers are JSON (but the
// dashboard's HTML and /metrics' text); errors are {"error": "..."} with a
// 4xx or 5xx status. It binds to 127.0.0.1 unless configured otherwise.
package gateway

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/sirupsen/logrus"

	"github.com/acktor/acktor/actors"
	"github.com/acktor/acktor/messages"
	"github.com/acktor/acktor/window"
)

// maxBody bounds request bodies; maxKeys and maxTop bound a query;
// setAckersWait bounds the announcement of a new acker set.
const (
	maxBody       = 4 << 10
	maxKeys       = 1000
	maxTop        = 10_000
	maxSeen       = 1 << 10
	setAckersWait = 10 * time.Second
)

// Config is the gateway's part of a node's config.
type Config struct {
	// Address is host:port to listen on; empty turns the gateway off.
	Address string `yaml:"address"`
	// Token authenticates admin requests (Authorization: Bearer <token>);
	// with neither it nor TokenEnv set the admin endpoints are off. Never
	// logged.
	Token string `yaml:"token"`
	// TokenEnv names an environment variable to read the token from
	// instead, so that it need not be in the file.
	TokenEnv string `yaml:"token_env"`
	// Cert and Key are PEM files of the gateway's certificate and key: with
	// them it serves HTTPS only, and reloads them when they change.
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
	// Insecure lets an admin token be used over plain HTTP on an address
	// other than loopback, where it crosses the network in clear. Without
	// it (or a certificate) such a config is refused.
	Insecure bool `yaml:"insecure"`
}

// Secret is the admin token the config names: Token, or the value of the
// variable TokenEnv (empty when it is unset: the admin endpoints are off).
func (c Config) Secret(getenv func(string) string) (string, error) {
	if c.TokenEnv == "" {
		return c.Token, nil
	}
	if c.Token != "" {
		return "", errors.New("gateway: token and token_env both set; give one")
	}
	return getenv(c.TokenEnv), nil
}

// ackerSetter is what POST /api/admin/ackers uses of an *actors.Runtime
// (tests put a fake in its place).
type ackerSetter interface {
	SetAckers(ctx context.Context, c *pcluster.Cluster, n int) error
	AckerSet() (version uint64, ackers int)
}

// Server serves one runtime's member of the cluster.
type Server struct {
	rt      *actors.Runtime
	ackers  ackerSetter // rt, when there is one
	c       *pcluster.Cluster
	token   string
	log     logrus.FieldLogger
	mux     *http.ServeMux
	handler http.Handler // mux, behind sameOrigin
	hub     *hub
	metrics *Metrics
	// closing is closed by Close: handlers of long connections (ingest's
	// WebSocket) end then, as http.Server.Shutdown leaves hijacked ones be.
	closing   chan struct{}
	closeOnce sync.Once
	// ingestLog, set by WithIngest, turns the ingest endpoints on; ingest
	// serves them.
	ingestLog  ingestLog
	ingestIdle time.Duration
	ingest     *ingest
}

// Option configures a Server.
type Option func(*Server)

// WithMetrics serves m's registry at /metrics, the gateway's series added
// to it. Without it the gateway makes a registry of its own (the Go
// runtime's series and its own, but not Proto.Actor's).
func WithMetrics(m *Metrics) Option { return func(s *Server) { s.metrics = m } }

// WithMaxSubscribers bounds the streams served at once (default
// DefaultMaxSubscribers); more are refused with 503.
func WithMaxSubscribers(n int) Option { return func(s *Server) { s.hub.max = n } }

// WithMaxTopics bounds the distinct streams (query and interval) polled at
// once (default DefaultMaxTopics); a stream that would start one more is
// refused with 503, one that is polled already is served.
func WithMaxTopics(n int) Option { return func(s *Server) { s.hub.maxTopics = n } }

// New makes a gateway over rt running on c. token may be empty (no admin).
func New(rt *actors.Runtime, c *pcluster.Cluster, token string, log logrus.FieldLogger, opts ...Option) *Server {
	s := &Server{rt: rt, c: c, token: token, log: log, mux: http.NewServeMux(), hub: newHub(DefaultMaxSubscribers, DefaultMaxTopics, subBuffer),
		closing: make(chan struct{}), ingestIdle: IngestIdleTimeout}
	if rt != nil {
		s.ackers = rt
	}
	for _, o := range opts {
		o(s)
	}
	if s.ingestLog != nil {
		s.serveIngest()
	}
	s.mux.Handle("GET /metrics", s.metricsHandler())
	s.mux.HandleFunc("GET /api/status", s.status)
	s.mux.HandleFunc("GET /api/counters/{component}", s.counters)
	s.mux.HandleFunc("GET /api/stream/status", s.streamStatus)
	s.mux.HandleFunc("GET /api/stream/counters/{component}", s.streamCounters)
	s.mux.HandleFunc("POST /api/admin/ackers", s.setAckers)
	s.mux.HandleFunc("GET /", s.dashboard)
	s.mux.HandleFunc("GET /dashboard/uPlot-1.6.31.iife.min.js", dashboardAsset(uPlotJS, "text/javascript; charset=utf-8"))
	s.mux.HandleFunc("GET /dashboard/uPlot-1.6.31.min.css", dashboardAsset(uPlotCSS, "text/css; charset=utf-8"))
	s.mux.HandleFunc("/", s.noEndpoint)
	s.handler = sameOrigin(s.mux)
	return s
}

// noEndpoint answers a request no endpoint takes: 405 with the methods the
// path takes (Allow), or 404 for a path none takes.
func (s *Server) noEndpoint(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "/" && (pattern != "GET /" || r.URL.Path == "/") {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path))
		return
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s: the endpoint takes %s", r.Method, r.URL.Path, strings.Join(allow, ", ")))
}

// Handler is the gateway's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// sameOrigin refuses with 403 a request that changes something (any method
// but GET, HEAD and OPTIONS) sent by a browser from another origin. A POST
// of text/plain is a CORS "simple request", sent without a preflight, so
// without this any page the user opens could write records to a node on
// loopback, whatever the gateway answers. net/http's CrossOriginProtection
// decides: Sec-Fetch-Site other than same-origin or none (same-site too:
// localhost:3000 is the same site as localhost:7070), or else an Origin
// whose host is not the request's Host. Clients other than browsers send
// neither header and pass. WebSockets are GETs: websocket.Accept makes the
// same Origin check.
func sameOrigin(h http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := cop.Check(r); err != nil {
			writeError(w, http.StatusForbidden, fmt.Sprintf("%v (Origin %q, Sec-Fetch-Site %q, Host %q): "+
				"a page of another origin may not send %s here; nothing was done", err, r.Header.Get("Origin"),
				r.Header.Get("Sec-Fetch-Site"), r.Host, r.Method))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Close ends every stream (WebSocket and SSE) and stops their pollers, and
// ends ingest WebSockets; ingest POSTs get 503 from then on. Serve calls it
// on the way out; a caller of Handler calls it itself.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.closing) })
	s.hub.close()
}

// Serve listens on addr until ctx ends, then shuts down (in-flight requests
// get a second to finish).
func (s *Server) Serve(ctx context.Context, addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	return s.ServeListener(ctx, l)
}

// ServeListener is Serve on a listener of the caller's.
func (s *Server) ServeListener(ctx context.Context, l net.Listener) error {
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	scheme := "http"
	if _, ok := l.(httpsListener); ok {
		scheme = "https"
	}
	s.log.Infof("gateway: listening on %s://%s", scheme, l.Addr())
	select {
	case err := <-done:
		return fmt.Errorf("gateway: %w", err)
	case <-ctx.Done():
		s.Close() // streams end first: Shutdown waits for their requests
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-done
		return nil
	}
}

// Status is what GET /api/status answers.
type Status struct {
	Members  []Member      `json:"members"`
	AckerSet AckerSet      `json:"acker_set"`
	Ackers   []AckerStatus `json:"ackers"`
	Run      *RunStatus    `json:"run,omitempty"` // on the member that drives the run
	Counters []string      `json:"counters"`      // counter components, for /api/counters
	// CounterTasks are where the counter tasks and their standbys live.
	CounterTasks []actors.CounterTask `json:"counter_tasks"`
	// Stages is this member's load per stage with the M/M/c model beside
	// it (actors.Runtime.Stages).
	Stages    []actors.Stage `json:"stages"`
	AckerErrs string         `json:"acker_error,omitempty"`
}

// AckerStatus is one acker's counters and the member that hosts it.
type AckerStatus struct {
	actors.AckerStats // with the member that hosts it
}

// Member is one cluster member.
type Member struct {
	ID      string   `json:"id"`
	Address string   `json:"address"`
	Kinds   []string `json:"kinds"`
}

// AckerSet is the current acker set.
type AckerSet struct {
	Version uint64 `json:"version"`
	Ackers  int    `json:"ackers"`
}

// RunStatus is a run's progress.
type RunStatus struct {
	Roots        uint64  `json:"roots"`
	Total        *int64  `json:"total,omitempty"` // roots the sources will yield; left out when they cannot tell
	Completed    uint64  `json:"completed"`
	Failed       uint64  `json:"failed"`
	TimedOut     uint64  `json:"timed_out"`
	Replayed     uint64  `json:"replayed"`
	DeadLettered uint64  `json:"dead_lettered"`
	InFlight     uint64  `json:"in_flight"`
	Tuples       uint64  `json:"tuples"`
	LatencyP50   float64 `json:"complete_latency_p50_seconds"` // emission to completion
	LatencyP99   float64 `json:"complete_latency_p99_seconds"`
	// ElapsedSeconds is left out of streams, which send an update when
	// something changed: time alone is no change.
	ElapsedSeconds float64 `json:"elapsed_seconds,omitempty"`
}

// members are the cluster's members as this node sees them.
func (s *Server) members() []Member {
	var out []Member
	for _, m := range s.c.MemberList.Members().Members() {
		out = append(out, Member{ID: m.Id, Address: m.Address(), Kinds: m.Kinds})
	}
	return out
}

func (s *Server) status(w http.ResponseWriter, _ *http.Request) {
	st := Status{Members: s.members()}
	st.AckerSet.Version, st.AckerSet.Ackers = s.rt.AckerSet()
	ackers, err := s.rt.Ackers(s.c)
	if err != nil {
		st.AckerErrs = err.Error() // a member may be down: say so, show the rest
	}
	for _, a := range ackers {
		st.Ackers = append(st.Ackers, AckerStatus{AckerStats: a})
	}
	if p, ok := s.rt.RunProgress(); ok { // a service's, from its lead
		st.Run = runStatus(p)
	}
	st.Counters = s.rt.Topology().Counters()
	st.CounterTasks = s.rt.CounterTasks(s.c)
	st.Stages = s.rt.Stages()
	writeJSON(w, http.StatusOK, st)
}

func runStatus(p actors.Progress) *RunStatus {
	var total *int64
	if p.Total >= 0 {
		total = &p.Total
	}
	return &RunStatus{Roots: p.Roots, Total: total, Completed: p.Completed, Failed: p.Failed,
		TimedOut: p.TimedOut, Replayed: p.Replayed, DeadLettered: p.DeadLettered, InFlight: p.InFlight,
		Tuples: p.Tuples, LatencyP50: p.LatencyP50.Seconds(), LatencyP99: p.LatencyP99.Seconds(), ElapsedSeconds: p.Elapsed.Seconds()}
}

// CounterAnswer is what GET /api/counters/{component} answers. Start and
// End, the window's bounds, are left out before the first update and for a
// counter over all time.
type CounterAnswer struct {
	Keys       []window.Entry `json:"keys,omitempty"`
	Top        []window.Entry `json:"top,omitempty"`
	Start      *time.Time     `json:"start,omitempty"`
	End        *time.Time     `json:"end,omitempty"`
	Applied    uint64         `json:"applied"`
	Duplicates uint64         `json:"duplicates"`
	Late       uint64         `json:"late"`
	Refused    uint64         `json:"refused"`
	// Distinct and Repeats are, per entry, the distinct values and the
	// repeats of the counter's sketched field (when it has them); Seen says
	// per asked key whether ?seen= is in its window (Bloom: true means
	// probably).
	Distinct map[string]uint64 `json:"distinct,omitempty"`
	Repeats  map[string]uint64 `json:"repeats,omitempty"`
	Seen     map[string]bool   `json:"seen,omitempty"`
	// Missing names the counter tasks that did not answer in time (their
	// member is down, say): the values are the other tasks'.
	Missing []string `json:"missing,omitempty"`
	// Error is set, alone, in a stream's update when the query failed.
	Error string `json:"error,omitempty"`
}

// counters answers ?key=K (repeated) with the keys' window values and
// ?top=N[&by=sum] with the top N; ?seen=V asks the keys whether they saw V.
func (s *Server) counters(w http.ResponseWriter, r *http.Request) {
	q, code, err := counterQuery(r)
	if err != nil {
		writeError(w, code, err.Error())
		return
	}
	name := r.PathValue("component")
	if !slices.Contains(s.rt.Topology().Counters(), name) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("query %s: no counter component of that name", name))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), queryWithin)
	defer cancel()
	a, err := s.query(ctx, name, q)
	switch {
	case err != nil:
		code := http.StatusBadGateway // a task that did not answer: a member down, say
		if errors.Is(err, context.DeadlineExceeded) {
			code = http.StatusGatewayTimeout
		}
		writeJSON(w, code, errorAnswer{Error: err.Error(), Missing: a.Missing})
	default:
		writeJSON(w, http.StatusOK, a)
	}
}

// queryWithin bounds a counter query: while a member dies, the answer
// comes on time with the other tasks' values and names the tasks that did
// not answer (CounterAnswer.Missing).
const queryWithin = 3 * time.Second

// query asks a counter component and shapes the answer; one that some
// tasks did not give in time is still an answer, saying which. On an error
// the answer (never nil) names the tasks that did not answer, if any.
func (s *Server) query(ctx context.Context, component string, q *messages.CounterQuery) (*CounterAnswer, error) {
	res, err := s.rt.Query(ctx, s.c, component, q)
	if err != nil && !(res != nil && errors.Is(err, actors.ErrPartial)) {
		a := &CounterAnswer{}
		if res != nil {
			a.Missing = res.Missing
		}
		return a, err
	}
	return AnswerOf(res), nil
}

// errorAnswer is a failed counter query's body: why, and which counter
// tasks did not answer (all of them, when their members are down).
type errorAnswer struct {
	Error   string   `json:"error"`
	Missing []string `json:"missing,omitempty"`
}

// AnswerOf is a counter component's result as the gateway answers it: a
// window's bounds as times, none for all time.
func AnswerOf(res *actors.CounterResult) *CounterAnswer {
	a := &CounterAnswer{Keys: res.Keys, Top: res.Top, Applied: res.Applied, Duplicates: res.Duplicates,
		Late: res.Late, Refused: res.Refused, Distinct: res.Distinct, Repeats: res.Repeats, Seen: res.Seen, Missing: res.Missing}
	if res.HasWindow && time.Duration(res.End-res.Start) != actors.AllTime { // all time has no bounds to show
		start, end := time.Unix(0, res.Start).UTC(), time.Unix(0, res.End).UTC()
		a.Start, a.End = &start, &end
	}
	return a
}

func parseTop(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxTop {
		return 0, fmt.Errorf("top %q: want 1..%d", v, maxTop)
	}
	return n, nil
}

// SetAckersRequest is the body of POST /api/admin/ackers.
type SetAckersRequest struct {
	Ackers int `json:"ackers"`
}

// setAckers changes the acker count: 200 with the new AckerSet; 400 for a
// count SetAckers refuses (nothing changed); 502 when the set changed but
// announcing it failed, with the set as it is now in the message.
func (s *Server) setAckers(w http.ResponseWriter, r *http.Request) {
	if !s.admin(w, r) {
		return
	}
	var req SetAckersRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", maxBody))
			return
		}
		writeError(w, http.StatusBadRequest, fmt.Sprintf("body: %v; want {\"ackers\": N}", err))
		return
	}
	before, _ := s.ackers.AckerSet()
	// Once SetAckers has stored the new set it announces it to the ackers;
	// a client that goes away must not stop that half way, so the request's
	// cancellation does not reach it (its own bound does).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), setAckersWait)
	defer cancel()
	if err := s.ackers.SetAckers(ctx, s.c, req.Ackers); err != nil {
		// SetAckers checks the count before it changes anything, and
		// changing it bumps the version: an error with the version as it
		// was is the request's fault. Otherwise the set changed and only
		// the announcement failed (or another change came in meanwhile):
		// the client must not read it as "nothing happened".
		version, n := s.ackers.AckerSet()
		if version == before {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		s.log.WithError(err).Warnf("gateway: acker count set to %d (version %d) by %s, but not announced to every acker", n, version, r.RemoteAddr)
		writeError(w, http.StatusBadGateway, fmt.Sprintf("%v; the acker set may have changed all the same: it is version %d with %d ackers now "+
			"(GET /api/status shows them)", err, version, n))
		return
	}
	version, n := s.ackers.AckerSet()
	s.log.Infof("gateway: acker count set to %d (version %d) by %s", n, version, r.RemoteAddr)
	writeJSON(w, http.StatusOK, AckerSet{Version: version, Ackers: n})
}

// admin checks the bearer token in constant time.
func (s *Server) admin(w http.ResponseWriter, r *http.Request) bool {
	if s.token == "" {
		writeError(w, http.StatusForbidden, "admin endpoints are off: no token configured")
		return false
	}
	const prefix = "Bearer "
	h := r.Header.Get("Authorization")
	if len(h) < len(prefix) || h[:len(prefix)] != prefix ||
		subtle.ConstantTimeCompare([]byte(h[len(prefix):]), []byte(s.token)) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="acktor"`)
		writeError(w, http.StatusUnauthorized, "missing or wrong bearer token")
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}
