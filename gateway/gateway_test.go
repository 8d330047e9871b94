package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/sirupsen/logrus"

	"github.com/acktor/acktor/actors"
	"github.com/acktor/acktor/cluster"
	"github.com/acktor/acktor/internal/testserver"
	"github.com/acktor/acktor/source"
)

func quiet() *logrus.Logger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

// holdSource yields its lines, then holds the run open until released.
type holdSource struct {
	lines    []string
	next     int
	released <-chan struct{}
}

func (s *holdSource) Next() (source.Root, error) {
	if s.next < len(s.lines) {
		s.next++
		return source.Root{ID: uint64(s.next), Payload: s.lines[s.next-1]}, nil
	}
	select {
	case <-s.released:
		return source.Root{}, io.EOF
	default:
		return source.Root{}, source.ErrNotReady
	}
}
func (s *holdSource) Replay(id uint64) (string, error) { return s.lines[id-1], nil }
func (s *holdSource) Done(uint64)                      {}
func (s *holdSource) Total() int64                     { return int64(len(s.lines)) }
func (s *holdSource) Close() error                     { return nil }

type split struct{}

func (split) Process(t *actors.Tuple, c *actors.Collector) {
	for _, w := range strings.Fields(t.Values()[0]) {
		_ = c.Emit([]*actors.Tuple{t}, w)
	}
	c.Ack(t)
}

// wordsOver serves a gateway (with opts) over a word count (lines, split,
// a counter "words") whose spout reads src; the run ends when the test
// does, then onEnd runs (before the run is cancelled).
func wordsOver(t testing.TB, src source.Source, token string, onEnd func(), opts ...Option) (*httptest.Server, *actors.Runtime) {
	t.Helper()
	var b actors.Builder
	b.Spout("lines", 1, func(int, int) (source.Source, error) { return src, nil })
	b.Processor("split", 2, func(actors.TaskInfo) (actors.Processor, error) { return split{}, nil }).Shuffle("lines")
	b.Counter("words", 2, actors.CounterOptions{Value: -1}, nil).Fields("split", 0)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	cfg := actors.DefaultConfig()
	cfg.Log, cfg.ReportEvery = quiet(), 5*time.Millisecond
	rt, err := actors.New(topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	node, err := cluster.StartEmbedded("gw", rt.Kinds(), quiet())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = rt.Run(ctx, node.Cluster, nil)
	}()
	gw := New(rt, node.Cluster, token, quiet(), opts...)
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(func() {
		gw.Close()
		srv.Close()
		if onEnd != nil {
			onEnd()
		}
		cancel()
		wg.Wait()
		node.Stop()
	})
	return srv, rt
}

// running starts a word count that holds open after its lines, and a
// gateway (with opts) over it; the run ends when the test does.
func running(t testing.TB, token string, opts ...Option) *httptest.Server {
	t.Helper()
	lines := []string{"a b a", "c a", "b"}
	release := make(chan struct{})
	srv, rt := wordsOver(t, &holdSource{lines: lines, released: release}, token, func() { close(release) }, opts...)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if p, ok := rt.Progress(); ok && p.Completed == uint64(len(lines)) {
			return srv
		}
		if time.Now().After(deadline) {
			t.Fatal("the lines did not complete")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func call(t testing.TB, method, url, token, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: content type %q", method, url, ct)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, url, err, b)
		}
	}
	return res.StatusCode
}

func TestStatusAndCounters(t *testing.T) {
	srv := running(t, "")
	var st Status
	if code := call(t, "GET", srv.URL+"/api/status", "", "", &st); code != 200 {
		t.Fatalf("status: %d", code)
	}
	if len(st.Members) != 1 || st.AckerSet.Ackers != 2 || len(st.Ackers) != 2 || st.Run == nil || st.Run.Completed != 3 {
		t.Fatalf("status %+v", st)
	}
	if len(st.Stages) != 4 || st.Stages[2].Name != "acker" || st.Stages[2].Servers != 2 {
		t.Fatalf("stages %+v", st.Stages)
	}
	var a CounterAnswer
	if code := call(t, "GET", srv.URL+"/api/counters/words?key=a&key=zz&top=2", "", "", &a); code != 200 {
		t.Fatalf("counters: %d", code)
	}
	if len(a.Keys) != 2 || a.Keys[0].Count != 3 || a.Keys[1].Count != 0 || len(a.Top) != 2 || a.Top[1].Key != "b" || a.Applied != 6 {
		t.Fatalf("counters %+v", a)
	}
	var all CounterAnswer // every key in the window
	if code := call(t, "GET", srv.URL+"/api/counters/words?all=true", "", "", &all); code != 200 {
		t.Fatalf("counters ?all=true: %d", code)
	}
	var sum uint64
	for _, e := range all.Top {
		sum += e.Count
	}
	if len(all.Top) < 3 || sum != all.Applied {
		t.Fatalf("counters ?all=true: %d keys counting %d of %d updates: %+v", len(all.Top), sum, all.Applied, all)
	}
	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{"/api/counters/words", 400, "key=K"},
		{"/api/counters/words?all=maybe", 400, "all"},
		{"/api/counters/words?all=true&top=3", 400, "give one"},
		{"/api/counters/words?all=false", 400, "all=true"},
		{"/api/counters/words?top=0", 400, "top"},
		{"/api/counters/words?top=x", 400, "top"},
		{"/api/counters/words?top=3&by=avg", 400, "by"},
		{"/api/counters/split?top=3", 404, "no counter component"},
		{"/api/nothing", 404, "no endpoint"},
	} {
		var e map[string]string
		if code := call(t, "GET", srv.URL+tc.path, "", "", &e); code != tc.code || !strings.Contains(e["error"], tc.want) {
			t.Errorf("%s: %d %q, want %d mentioning %q", tc.path, code, e["error"], tc.code, tc.want)
		}
	}
}

func TestAdminSetAckers(t *testing.T) {
	srv := running(t, "s3cret")
	url := srv.URL + "/api/admin/ackers"
	for _, tc := range []struct {
		name, token, body string
		code              int
		want              string
	}{
		{"no token", "", `{"ackers": 3}`, 401, "bearer token"},
		{"wrong token", "guess", `{"ackers": 3}`, 401, "bearer token"},
		{"bad json", "s3cret", `{"ackers": "three"}`, 400, "body"},
		{"unknown field", "s3cret", `{"ackers": 3, "force": true}`, 400, "unknown field"},
		{"out of range", "s3cret", `{"ackers": 0}`, 400, "want 1..4096"},
		{"too big", "s3cret", `{"ackers": 3, "x": "` + strings.Repeat("x", 5000) + `"}`, 413, "body over"},
	} {
		var e map[string]string
		if code := call(t, "POST", url, tc.token, tc.body, &e); code != tc.code || !strings.Contains(e["error"], tc.want) {
			t.Errorf("%s: %d %q, want %d mentioning %q", tc.name, code, e["error"], tc.code, tc.want)
		}
	}
	var set AckerSet
	if code := call(t, "POST", url, "s3cret", `{"ackers": 3}`, &set); code != 200 || set.Ackers != 3 || set.Version != 2 {
		t.Fatalf("set ackers: %d %+v", code, set)
	}
	var st Status
	call(t, "GET", srv.URL+"/api/status", "", "", &st)
	if st.AckerSet.Ackers != 3 || len(st.Ackers) != 3 {
		t.Fatalf("status after the change: %+v", st)
	}
}

// fakeAckers is an ackerSetter whose SetAckers bumps the version (when
// change is set) and then fails with err, after waiting for release if it
// is set; it reports the context it was given.
type fakeAckers struct {
	mu      sync.Mutex
	version uint64
	n       int
	change  bool
	err     error
	started chan struct{}
	release chan struct{}
	ctxErr  chan error
}

func (f *fakeAckers) SetAckers(ctx context.Context, _ *pcluster.Cluster, n int) error {
	if f.change {
		f.mu.Lock()
		f.version, f.n = f.version+1, n
		f.mu.Unlock()
	}
	if f.release != nil {
		close(f.started)
		<-f.release
		f.ctxErr <- ctx.Err()
	}
	return f.err
}

func (f *fakeAckers) AckerSet() (uint64, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.version, f.n
}

// TestAdminSetAckersErrors: only a count SetAckers refuses (the set as it
// was) is 400; a failure after the set changed is 502 and says that it
// changed. Every error was 400, as if nothing had happened.
func TestAdminSetAckersErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change bool
		err    error
		code   int
		want   string
	}{
		{"refused", false, errors.New("set ackers: 5000, want 1..4096"), 400, "want 1..4096"},
		{"tracking off", false, errors.New("set ackers: tracking is off"), 400, "tracking is off"},
		{"not announced", true, errors.New("set ackers: no member hosts acker/3"), 502,
			"no member hosts acker/3; the acker set may have changed all the same: it is version 2 with 4 ackers now"},
		{"announcement timed out", true, fmt.Errorf("set ackers: %w", context.DeadlineExceeded), 502, "may have changed"},
		{"done", true, nil, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(nil, nil, "s3cret", quiet())
			s.ackers = &fakeAckers{version: 1, n: 2, change: tc.change, err: tc.err}
			srv := httptest.NewServer(s.Handler())
			defer srv.Close()
			var e map[string]any
			code := call(t, "POST", srv.URL+"/api/admin/ackers", "s3cret", `{"ackers": 4}`, &e)
			if msg, _ := e["error"].(string); code != tc.code || !strings.Contains(msg, tc.want) {
				t.Fatalf("%d %v, want %d mentioning %q", code, e, tc.code, tc.want)
			}
			if tc.code == 200 && (e["version"] != float64(2) || e["ackers"] != float64(4)) {
				t.Fatalf("answer %v, want version 2 with 4 ackers", e)
			}
		})
	}
}

// TestAdminSetAckersClientGone: a client that goes away while the new set
// is announced does not cut the announcement short: SetAckers ran on the
// request's context and stopped half way.
func TestAdminSetAckersClientGone(t *testing.T) {
	f := &fakeAckers{version: 1, n: 2, change: true, started: make(chan struct{}), release: make(chan struct{}), ctxErr: make(chan error, 1)}
	s := New(nil, nil, "s3cret", quiet())
	s.ackers = f
	gone := make(chan struct{}) // the request's context ended
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		context.AfterFunc(r.Context(), func() { close(gone) })
		s.Handler().ServeHTTP(w, r)
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/api/admin/ackers", strings.NewReader(`{"ackers": 4}`))
	req.Header.Set("Authorization", "Bearer s3cret")
	done := make(chan error, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = res.Body.Close()
		}
		done <- err
	}()
	<-f.started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the client's request: %v, want it cancelled", err)
	}
	<-gone
	close(f.release)
	if err := <-f.ctxErr; err != nil {
		t.Fatalf("SetAckers's context ended with the client: %v", err)
	}
}

// TestCrossOrigin: a browser's write from another origin is 403 and
// writes nothing; the gateway's own pages, clients that are not browsers
// and reads are served. A text/plain POST needs no preflight, so any page
// could write records to a node on loopback.
func TestCrossOrigin(t *testing.T) {
	l := openLog(t, ingestOpts)
	s := New(nil, nil, "s3cret", quiet(), withIngest(l))
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() { srv.Close(); s.Close() })
	self := srv.URL // http://127.0.0.1:port
	for _, tc := range []struct {
		name, method, path string
		header             map[string]string
		code               int
	}{
		{"no browser", "POST", "/api/ingest", nil, 200},
		{"own page", "POST", "/api/ingest", map[string]string{"Origin": self}, 200},
		{"own page, fetch metadata", "POST", "/api/ingest", map[string]string{"Origin": self, "Sec-Fetch-Site": "same-origin"}, 200},
		{"typed by the user", "POST", "/api/ingest", map[string]string{"Sec-Fetch-Site": "none"}, 200},
		{"another site", "POST", "/api/ingest", map[string]string{"Origin": "https://evil.example"}, 403},
		{"another port", "POST", "/api/ingest", map[string]string{"Origin": "http://127.0.0.1:1"}, 403},
		{"opaque origin", "POST", "/api/ingest", map[string]string{"Origin": "null"}, 403},
		{"cross-site", "POST", "/api/ingest", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"same site, another origin", "POST", "/api/ingest", map[string]string{"Origin": "http://localhost:3000", "Sec-Fetch-Site": "same-site"}, 403},
		{"admin", "POST", "/api/admin/ackers", map[string]string{"Origin": "https://evil.example", "Authorization": "Bearer s3cret"}, 403},
		{"a read", "GET", "/api/ingest", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			end := l.End()
			req, _ := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader("a record\n"))
			req.Header.Set("Content-Type", "text/plain")
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var e map[string]any
			if err := json.NewDecoder(res.Body).Decode(&e); err != nil || res.StatusCode != tc.code {
				t.Fatalf("%d %v (%v), want %d", res.StatusCode, e, err, tc.code)
			}
			if tc.code == 403 {
				if msg, _ := e["error"].(string); !strings.Contains(msg, "cross-origin request detected") || !strings.Contains(msg, "nothing was done") {
					t.Fatalf("error %q, want it to say why and that nothing was done", msg)
				}
				if l.End() != end {
					t.Fatal("a refused request wrote records")
				}
			}
		})
	}
}

func TestAdminOffWithoutToken(t *testing.T) {
	srv := running(t, "")
	var e map[string]string
	if code := call(t, "POST", srv.URL+"/api/admin/ackers", "anything", `{"ackers": 3}`, &e); code != 403 {
		t.Fatalf("admin without a token configured: %d %v", code, e)
	}
}

// TestStreams subscribes to a counter stream and the status stream over
// WebSocket and SSE: the first update is the current answer.
func TestStreams(t *testing.T) {
	srv := running(t, "")
	ws := "ws" + strings.TrimPrefix(srv.URL, "http")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	c, _, err := websocket.Dial(ctx, ws+"/api/stream/counters/words?top=2&every=100ms", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	var a CounterAnswer
	if err := wsjson.Read(ctx, c, &a); err != nil {
		t.Fatal(err)
	}
	if len(a.Top) != 2 || a.Top[0].Key != "a" || a.Top[0].Count != 3 || a.Applied != 6 {
		t.Fatalf("counter stream: %+v", a)
	}
	_ = c.Close(websocket.StatusNormalClosure, "")

	c, _, err = websocket.Dial(ctx, ws+"/api/stream/status?every=100ms", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	var l Live
	if err := wsjson.Read(ctx, c, &l); err != nil {
		t.Fatal(err)
	}
	if l.Run == nil || l.Run.Completed != 3 || len(l.Ackers) != 2 || len(l.Counters) != 1 || l.Counters[0] != "words" {
		t.Fatalf("status stream: %+v", l)
	}

	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/stream/counters/words?key=b", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("SSE content type %q", ct)
	}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			if err := json.Unmarshal([]byte(data), &a); err != nil || len(a.Keys) != 1 || a.Keys[0].Count != 2 {
				t.Fatalf("SSE event %s: %v", data, err)
			}
			return
		}
	}
	t.Fatalf("SSE stream ended: %v", sc.Err())
}

// TestStreamHead: a HEAD of a stream answers the headers a GET would have
// and returns at once, subscribing to nothing, so that the connection is
// free for the next request. It was served like a GET: an event stream that
// never ended, holding a subscriber and the connection.
func TestStreamHead(t *testing.T) {
	srv := running(t, "")
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	// do sends a request and reads the answer; reused says whether it went
	// on a connection that an earlier request had used.
	do := func(t *testing.T, method, path string) (code int, ct, body string, reused bool) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(c httptrace.GotConnInfo) { reused = c.Reused }})
		req, _ := http.NewRequestWithContext(ctx, method, srv.URL+path, nil)
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return res.StatusCode, res.Header.Get("Content-Type"), string(b), reused
	}
	for _, tc := range []struct {
		path string
		code int
		ct   string
	}{
		{"/api/stream/status", 200, "text/event-stream"},
		{"/api/stream/status?every=250ms", 200, "text/event-stream"},
		{"/api/stream/counters/words?top=2", 200, "text/event-stream"},
		{"/api/stream/counters/words", 400, "application/json"},
		{"/api/stream/status?every=1ms", 400, "application/json"},
		{"/api/stream/counters/split?top=3", 404, "application/json"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			code, ct, body, _ := do(t, http.MethodHead, tc.path)
			if code != tc.code || ct != tc.ct || body != "" {
				t.Fatalf("HEAD: %d %q with %d bytes, want %d %q and no body", code, ct, len(body), tc.code, tc.ct)
			}
			// The next request goes on the same connection, at once, and
			// finds no subscriber.
			_, _, metrics, reused := do(t, http.MethodGet, "/metrics")
			if !reused || !strings.Contains(metrics, "\nacktor_gateway_subscribers 0\n") {
				t.Fatalf("after the HEAD: connection reused %v, /metrics:\n%s", reused, metrics)
			}
		})
	}
}

func TestStreamBadRequests(t *testing.T) {
	srv := running(t, "")
	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{"/api/stream/counters/words", 400, "key=K"},
		{"/api/stream/counters/words?top=3&every=1ms", 400, "every"},
		{"/api/stream/counters/words?top=3&every=soon", 400, "every"},
		{"/api/stream/status?every=2h", 400, "every"},
		{"/api/stream/counters/split?top=3", 404, "no counter component"},
	} {
		var e map[string]string
		if code := call(t, "GET", srv.URL+tc.path, "", "", &e); code != tc.code || !strings.Contains(e["error"], tc.want) {
			t.Errorf("%s: %d %q, want %d mentioning %q", tc.path, code, e["error"], tc.code, tc.want)
		}
	}
}

// TestStreamTopics: intervals that round to the same 100ms share a topic,
// and past the bound of topics a stream that would start one more is 503
// while one that joins a topic is served. ?every= was taken to the
// nanosecond, so that a client could start a poller per request.
func TestStreamTopics(t *testing.T) {
	srv := running(t, "", WithMaxTopics(1))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		path string
		code int
		want string // in the error
	}{
		{"/api/stream/status?every=100ms", 200, ""}, // the one topic
		{"/api/stream/status?every=149ms", 200, ""}, // rounds to it
		{"/api/stream/status?every=100000001ns", 200, ""},
		{"/api/stream/status?every=150ms", 503, "too many distinct streams: 1 polled, at most 1"},
		{"/api/stream/status", 503, "too many distinct streams"},
		{"/api/stream/counters/words?top=2&every=100ms", 503, "too many distinct streams"},
	} {
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+tc.path, nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close() // a stream stays open until the test ends
		if tc.code == 200 {
			if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("%s: %d %q, want an event stream", tc.path, res.StatusCode, res.Header.Get("Content-Type"))
			}
			continue
		}
		var e map[string]string
		if err := json.NewDecoder(res.Body).Decode(&e); err != nil || res.StatusCode != tc.code || !strings.Contains(e["error"], tc.want) {
			t.Errorf("%s: %d %q (%v), want %d mentioning %q", tc.path, res.StatusCode, e["error"], err, tc.code, tc.want)
		}
	}
}

// TestEveryParam: ?every= is rounded to 100ms, so that distinct values
// make at most 600 topics per query, and checked before it is rounded.
func TestEveryParam(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want time.Duration // 0: an error
	}{
		{"", time.Second},
		{"100ms", 100 * time.Millisecond},
		{"100000001ns", 100 * time.Millisecond},
		{"149.999ms", 100 * time.Millisecond},
		{"150ms", 200 * time.Millisecond},
		{"1.234s", 1200 * time.Millisecond},
		{"59.99s", time.Minute},
		{"1m", time.Minute},
		{"99ms", 0},
		{"1m0.001s", 0},
		{"-1s", 0},
		{"soon", 0},
	} {
		got, err := everyParam(httptest.NewRequest("GET", "/api/stream/status?every="+url.QueryEscape(tc.v), nil))
		switch {
		case tc.want == 0 && (err == nil || !strings.Contains(err.Error(), "want a duration from 100ms to 1m0s")):
			t.Errorf("every=%s: %v, %v; want an error", tc.v, got, err)
		case tc.want != 0 && (err != nil || got != tc.want):
			t.Errorf("every=%s: %v, %v; want %v", tc.v, got, err, tc.want)
		}
	}
	// A poller per nanosecond was the finding: 10 000 requests, one topic.
	seen := map[time.Duration]bool{}
	for i := range 10_000 {
		d, err := everyParam(httptest.NewRequest("GET", fmt.Sprintf("/?every=%dns", int64(minEvery)+int64(i)), nil))
		if err != nil {
			t.Fatal(err)
		}
		seen[d] = true
	}
	if len(seen) != 1 {
		t.Fatalf("10 000 intervals a nanosecond apart make %d topics, want 1", len(seen))
	}
}

// TestRound: the stages' figures are rounded to a decimal, and -1 (an
// unstable model) stays -1; it was -0.9.
func TestRound(t *testing.T) {
	for _, tc := range []struct{ x, want float64 }{
		{-1, -1}, {0, 0}, {-0.04, 0}, {0.04, 0}, {0.05, 0.1}, {-0.05, -0.1}, {1.26, 1.3}, {12345.67, 12345.7},
	} {
		if got := round(tc.x); got != tc.want || math.Signbit(got) != math.Signbit(tc.want) {
			t.Errorf("round(%v) = %v, want %v", tc.x, got, tc.want)
		}
	}
}

func TestMetrics(t *testing.T) {
	srv := running(t, "")
	res, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for _, want := range []string{"acktor_completed_total 3\n", "acktor_roots_total 3\n", "acktor_in_flight 0\n",
		`acktor_acker_completed_total{acker="acker/0"} `, `acktor_acker_refused_total{acker="acker/0",reason="bad_message"} 0` + "\n",
		`acktor_window_applied_total{component="words"} 6` + "\n",
		`acktor_window_keys{component="words"} 3` + "\n", "acktor_ackers 2\n", `acktor_scrape_errors{what="ackers"} 0` + "\n",
		"acktor_gateway_subscribers 0\n", `acktor_complete_latency_seconds_bucket{le="+Inf"} 3` + "\n", "acktor_complete_latency_seconds_count 3\n",
		`acktor_stage_handled_total{stage="acker"} `, `acktor_stage_servers{stage="acker"} 2` + "\n",
		`acktor_stage_utilisation{stage="counter"} `, "go_goroutines "} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics has no %q", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", b)
	}
	testserver.Promtool(t, b)
}

// TestWrongMethod: a path that exists answers another method with 405 and
// the methods it takes; a path that does not, 404.
func TestWrongMethod(t *testing.T) {
	srv := running(t, "")
	for _, tc := range []struct {
		method, path string
		code         int
		allow        string
	}{
		{"POST", "/api/status", 405, "GET, HEAD"},
		{"DELETE", "/api/counters/words", 405, "GET, HEAD"},
		{"GET", "/api/admin/ackers", 405, "POST"},
		{"PUT", "/", 405, "GET, HEAD"},
		{"GET", "/api/nothing", 404, ""},
		{"POST", "/api/nothing", 404, ""},
	} {
		req, err := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tc.code || res.Header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d, Allow %q; want %d, %q", tc.method, tc.path, res.StatusCode, res.Header.Get("Allow"), tc.code, tc.allow)
		}
	}
}

// TestStreamEndsWhenGatewayCloses: a WebSocket stream of a gateway that
// shuts down ends with a close frame saying so (going away), which a
// client can tell from being dropped.
func TestStreamEndsWhenGatewayCloses(t *testing.T) {
	var gw *Server
	srv := running(t, "", func(s *Server) { gw = s })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/api/stream/status?every=100ms", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	var st Status
	if err := wsjson.Read(ctx, c, &st); err != nil {
		t.Fatal(err)
	}
	go gw.Close()
	for {
		err := wsjson.Read(ctx, c, &st)
		if err == nil {
			continue // an update sent before the close
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.StatusGoingAway || ce.Reason != "gateway is shutting down" {
			t.Fatalf("the stream ended with %v, want going away", err)
		}
		return
	}
}

// TestRateWindow: the status stream's rates are taken over two seconds or
// more, so that a steady rate reads steady whatever lands between polls;
// before that, the run's average (no zeros on the first update); a new run
// starts afresh.
func TestRateWindow(t *testing.T) {
	var w rateWindow
	at := func(sec float64, tuples uint64) actors.Progress {
		return actors.Progress{Elapsed: time.Duration(sec * float64(time.Second)), Tuples: tuples, Completed: tuples / 10}
	}
	for _, tc := range []struct {
		p    actors.Progress
		want float64
	}{
		{at(0.5, 1000), 2000},   // the average so far
		{at(1.0, 2400), 2400},   // a report landed early: still the average
		{at(1.5, 2600), 1733.3}, // and one late
		{at(2.5, 5000), 2000},   // over the two seconds since 0.5
		{at(3.0, 6000), 1800},   // since 1.0
		{at(3.5, 7000), 2200},   // since 1.5
		{at(0.5, 300), 600},     // a new run
	} {
		if got := w.add(tc.p); got.Tuples != tc.want {
			t.Errorf("at %v: %v tuples/s, want %v", tc.p.Elapsed, got.Tuples, tc.want)
		}
	}
}

// TestCounterTopicsDiffer: streams of queries that differ in any field,
// or in their interval, get topics of their own (a shared topic would
// give one client the other's answers).
func TestCounterTopicsDiffer(t *testing.T) {
	seen := map[string]string{}
	for _, url := range []string{"key=a", "key=a&all=true", "all=true", "top=3", "top=3&by=sum", "key=a&seen=x", "key=a&key=b", "top=4"} {
		q, _, err := counterQuery(httptest.NewRequest("GET", "/api/stream/counters/words?"+url, nil))
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		for _, every := range []time.Duration{time.Second, 2 * time.Second} {
			key := counterTopic("words", q, every)
			if other, ok := seen[key]; ok {
				t.Fatalf("?%s every %v shares topic %q with %s", url, every, key, other)
			}
			seen[key] = fmt.Sprintf("?%s every %v", url, every)
		}
	}
}
