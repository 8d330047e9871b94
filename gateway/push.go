package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/acktor/acktor/actors"
	"github.com/acktor/acktor/messages"
)

// Push limits: how often a stream may be polled, how long one write to a
// client may take before it is dropped, and how often an idle SSE stream
// sends a comment to keep proxies from closing it.
const (
	defaultEvery = time.Second
	minEvery     = 100 * time.Millisecond
	maxEvery     = time.Minute
	// everyStep is what ?every= is rounded to: the interval is part of a
	// stream's topic, and at nanosecond precision a client could start as
	// many pollers as it likes by asking for intervals a nanosecond apart.
	// Rounded, there are at most 600 intervals per query.
	everyStep    = 100 * time.Millisecond
	writeTimeout = 5 * time.Second
	keepAlive    = 15 * time.Second
	// subBuffer is how many updates a subscriber may leave unread before
	// it is dropped as a slow consumer.
	subBuffer = 16
	// DefaultMaxSubscribers bounds the streams a gateway serves at once.
	DefaultMaxSubscribers = 10_000
	// DefaultMaxTopics bounds the distinct streams (query and interval)
	// polled at once: each is a poller that asks every acker or counter
	// task once per interval, however many clients watch it.
	DefaultMaxTopics = 100
)

// Live is one update of GET /api/stream/status: the run's progress with its
// rates over the last interval and each acker's load. It is sent when any
// of it changed.
type Live struct {
	Run      *RunStatus  `json:"run,omitempty"`
	Rates    Rates       `json:"rates"`
	AckerSet AckerSet    `json:"acker_set"`
	Ackers   []LiveAcker `json:"ackers"`
	Counters []string    `json:"counters"`
	Stages   []LiveStage `json:"stages"`
	Members  []Member    `json:"members"` // the cluster's members this node sees
	Error    string      `json:"error,omitempty"`
}

// LiveStage is a stage's load, rounded so that noise alone sends no update.
type LiveStage struct {
	Name        string  `json:"name"`
	Servers     int     `json:"servers"`
	Arrivals    float64 `json:"arrivals_per_second"`
	Service     float64 `json:"service_per_second"`
	Utilisation float64 `json:"utilisation"`
	Stable      bool    `json:"stable"`               // the model has a steady state (ρ < 1); false too before anything was timed
	ModelL      float64 `json:"model_in_stage"`       // M/M/c; -1 when ρ >= 1: no steady state
	SplitL      float64 `json:"model_split_in_stage"` // c×M/M/1; -1 likewise
	MeasuredL   float64 `json:"measured_in_stage"`
	Warning     string  `json:"warning,omitempty"`
}

// Rates are per-second rates over the last polling interval.
type Rates struct {
	Completed float64 `json:"completed_per_second"`
	Tuples    float64 `json:"tuples_per_second"`
	Replayed  float64 `json:"replayed_per_second"`
}

// LiveAcker is one acker's load.
type LiveAcker struct {
	ID        string `json:"id"`
	InFlight  uint64 `json:"in_flight"`
	Completed uint64 `json:"completed"`
}

// streamCounters pushes a counter query's answer (the shape of GET
// /api/counters/{component}) whenever it changes, at most once per
// ?every= (default 1s, 100ms..1m, rounded to 100ms). Limits and HEAD are
// stream's.
func (s *Server) streamCounters(w http.ResponseWriter, r *http.Request) {
	q, code, err := counterQuery(r)
	if err != nil {
		writeError(w, code, err.Error())
		return
	}
	every, err := everyParam(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	name := r.PathValue("component")
	if !slices.Contains(s.rt.Topology().Counters(), name) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("stream %s: no counter component of that name", name))
		return
	}
	s.stream(w, r, counterTopic(name, q, every), every, func(ctx context.Context) ([]byte, error) {
		a, err := s.query(ctx, name, q)
		if err != nil {
			return nil, err
		}
		return json.Marshal(a)
	})
}

// streamStatus pushes Live updates at most once per ?every= (as for
// streamCounters). Limits and HEAD are stream's.
func (s *Server) streamStatus(w http.ResponseWriter, r *http.Request) {
	every, err := everyParam(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	var rates rateWindow
	s.stream(w, r, fmt.Sprintf("status/%v", every), every, func(context.Context) ([]byte, error) {
		l := Live{Counters: s.rt.Topology().Counters(), Members: s.members()}
		l.AckerSet.Version, l.AckerSet.Ackers = s.rt.AckerSet()
		if p, ok := s.rt.RunProgress(); ok {
			l.Run = runStatus(p)
			l.Rates = rates.add(p)
			l.Run.ElapsedSeconds = 0 // time alone is no change
		}
		ackers, err := s.rt.Ackers(s.c)
		if err != nil {
			l.Error = err.Error()
		}
		for _, a := range ackers {
			l.Ackers = append(l.Ackers, LiveAcker{ID: a.ID, InFlight: a.InFlight, Completed: a.Completed})
		}
		for _, st := range s.rt.Stages() {
			l.Stages = append(l.Stages, LiveStage{Name: st.Name, Servers: st.Servers, Arrivals: round(st.Arrivals),
				Service: round(st.Service), Utilisation: round(st.Model.Rho*100) / 100, Stable: st.Model.Stable, ModelL: round(st.Model.L), SplitL: round(st.Split.L),
				MeasuredL: round(st.L), Warning: st.Warning})
		}
		return json.Marshal(l)
	})
}

// rateSpan is the span rates are taken over: several polls, so that a
// report that lands just before or just after a poll does not make a steady
// rate jump (one 500 ms poll read 1 600 and 2 400 at a steady 2 000/s).
const rateSpan = 2 * time.Second

// rateWindow keeps a run's recent progress, by its elapsed time, for rates.
type rateWindow struct{ samples []actors.Progress }

// add takes p and returns the rates over the last rateSpan or more; before
// the run has that much behind it, its average so far (no zeros on a first
// update).
func (w *rateWindow) add(p actors.Progress) Rates {
	if n := len(w.samples); n > 0 && p.Elapsed < w.samples[n-1].Elapsed { // another run
		w.samples = w.samples[:0]
	}
	w.samples = append(w.samples, p)
	base := actors.Progress{} // the run's start
	for len(w.samples) > 1 && p.Elapsed-w.samples[1].Elapsed >= rateSpan {
		w.samples = w.samples[1:]
	}
	if p.Elapsed-w.samples[0].Elapsed >= rateSpan {
		base = w.samples[0]
	}
	dt := (p.Elapsed - base.Elapsed).Seconds()
	if dt <= 0 {
		return Rates{}
	}
	return Rates{Completed: round(float64(p.Completed-base.Completed) / dt),
		Tuples: round(float64(p.Tuples-base.Tuples) / dt), Replayed: round(float64(p.Replayed-base.Replayed) / dt)}
}

// round rounds x to one decimal, half away from zero, so that -1 (an
// unstable model) stays -1; and 0 is 0, never -0, which JSON would show.
func round(x float64) float64 {
	r := math.Round(x*10) / 10
	if r == 0 {
		return 0
	}
	return r
}

// everyParam reads ?every=, a duration from minEvery to maxEvery, rounded
// to everyStep.
func everyParam(r *http.Request) (time.Duration, error) {
	v := r.URL.Query().Get("every")
	if v == "" {
		return defaultEvery, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < minEvery || d > maxEvery {
		return 0, fmt.Errorf("every %q: want a duration from %v to %v", v, minEvery, maxEvery)
	}
	return d.Round(everyStep), nil
}

// stream subscribes to a topic and serves it over WebSocket when the
// request is an upgrade, else as server-sent events. It answers 503 when
// the gateway serves DefaultMaxSubscribers streams (WithMaxSubscribers)
// already, and when the stream is not polled already and DefaultMaxTopics
// distinct ones are (WithMaxTopics): the limits are the gateway's, shared
// by every client, so 503 (the server is at capacity) rather than 429 (this
// client asks too often); the error says which limit. A HEAD (which the GET
// patterns also route here) gets the event stream's headers and no
// subscription: an event stream never ends, so a HEAD served like a GET
// would hold a subscriber, a poller and the client's connection for good
// while sending nothing.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, key string, every time.Duration, fetch fetchFunc) {
	if r.Method == http.MethodHead {
		sseHeaders(w.Header())
		w.WriteHeader(http.StatusOK)
		return
	}
	sub, err := s.hub.subscribe(key, every, fetch)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	defer s.hub.unsubscribe(sub)
	if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		s.serveWebSocket(w, r, sub)
		return
	}
	s.serveSSE(w, r, sub)
}

// serveWebSocket writes each update as a text message. The client only
// listens; a dropped client gets a close frame with the reason.
func (s *Server) serveWebSocket(w http.ResponseWriter, r *http.Request, sub *subscriber) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept answered the client
	}
	defer c.CloseNow()
	ctx := c.CloseRead(r.Context())
	for {
		select {
		case <-ctx.Done():
			return
		case <-sub.gone:
			status := websocket.StatusPolicyViolation
			if sub.closing {
				status = websocket.StatusGoingAway // the stream ends, as it should
			}
			s.log.Infof("gateway: closing the stream of WebSocket client %s: %s", r.RemoteAddr, sub.reason)
			_ = c.Close(status, sub.reason)
			return
		case v := <-sub.updates:
			wctx, cancel := context.WithTimeout(ctx, writeTimeout)
			err := c.Write(wctx, websocket.MessageText, v)
			cancel()
			if err != nil {
				s.log.Infof("gateway: dropping WebSocket client %s: %v", r.RemoteAddr, err)
				return
			}
		}
	}
}

// serveSSE writes each update as a server-sent event; a dropped client gets
// an event "dropped" with the reason.
func (s *Server) serveSSE(w http.ResponseWriter, r *http.Request, sub *subscriber) {
	rc := http.NewResponseController(w)
	sseHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	idle := time.NewTicker(keepAlive)
	defer idle.Stop()
	send := func(format string, v []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := fmt.Fprintf(w, format, v); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send(": %s\n\n", []byte("acktor")) {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-sub.gone:
			event := "dropped"
			if sub.closing {
				event = "end" // the stream ends, as it should
			}
			s.log.Infof("gateway: closing the stream of SSE client %s: %s", r.RemoteAddr, sub.reason)
			send("event: "+event+"\ndata: %s\n\n", errorJSON(sub.reason))
			return
		case v := <-sub.updates:
			if !send("data: %s\n\n", v) {
				s.log.Infof("gateway: dropping SSE client %s: write failed", r.RemoteAddr)
				return
			}
		case <-idle.C:
			if !send(": %s\n\n", []byte("keep-alive")) {
				return
			}
		}
	}
}

// sseHeaders are the headers of an event stream: no caching, and no
// buffering by a proxy (nginx's X-Accel-Buffering), so that each event
// goes out when it is written.
func sseHeaders(h http.Header) {
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
}

// errorJSON is {"error": msg}, on one line.
func errorJSON(msg string) []byte {
	b, _ := json.Marshal(map[string]string{"error": msg})
	return b
}

// counterTopic names a counter stream's topic: clients asking the same
// query at the same interval share one poller, so every field of the query
// is in it.
func counterTopic(name string, q *messages.CounterQuery, every time.Duration) string {
	return fmt.Sprintf("counters/%s?%q/%d/%v/%v/%q/%v", name, q.Keys, q.Top, q.All, q.BySum, q.Seen, every)
}

// counterQuery reads a counter query from the URL: ?key=K (repeated),
// ?top=N or ?all=true (every key in the window), ?by=count|sum, ?seen=V.
// It answers the status code of a bad request.
func counterQuery(r *http.Request) (*messages.CounterQuery, int, error) {
	q := &messages.CounterQuery{Keys: r.URL.Query()["key"]}
	if len(q.Keys) > maxKeys {
		return nil, http.StatusBadRequest, fmt.Errorf("key: %d keys, at most %d", len(q.Keys), maxKeys)
	}
	if v := r.URL.Query().Get("all"); v != "" {
		all, err := strconv.ParseBool(v)
		if err != nil {
			return nil, http.StatusBadRequest, fmt.Errorf("all %q: want true or false", v)
		}
		q.All = all
	}
	if q.All && r.URL.Query().Get("top") != "" {
		return nil, http.StatusBadRequest, fmt.Errorf("all=true and top=N: give one")
	}
	if v := r.URL.Query().Get("top"); v != "" {
		n, err := parseTop(v)
		if err != nil {
			return nil, http.StatusBadRequest, err
		}
		q.Top = uint32(n)
	}
	switch by := r.URL.Query().Get("by"); by {
	case "", "count":
	case "sum":
		q.BySum = true
	default:
		return nil, http.StatusBadRequest, fmt.Errorf("by %q: want count or sum", by)
	}
	if len(q.Keys) == 0 && q.Top == 0 && !q.All {
		return nil, http.StatusBadRequest, fmt.Errorf("ask for key=K (repeatable), top=N or all=true")
	}
	q.Seen = r.URL.Query().Get("seen")
	switch {
	case len(q.Seen) > maxSeen:
		return nil, http.StatusBadRequest, fmt.Errorf("seen: %d bytes, at most %d", len(q.Seen), maxSeen)
	case q.Seen != "" && len(q.Keys) == 0:
		return nil, http.StatusBadRequest, fmt.Errorf("seen=V asks the keys given with key=K; give one")
	}
	return q, 0, nil
}
