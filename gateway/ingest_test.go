package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"go.uber.org/goleak"

	"github.com/acktor/acktor/wal"
)

// ingestOpts is the log of the ingest tests: small records and segments,
// so that the limits are quick to reach.
var ingestOpts = wal.Options{Sync: wal.EveryAppend, SegmentBytes: 64 << 10, MaxRecordBytes: 1000}

// ingestServer serves a gateway over l (through withIngest, so that tests
// can put a fault in front of it) with no runtime.
func ingestServer(t *testing.T, l ingestLog) *httptest.Server {
	t.Helper()
	s := New(nil, nil, "", quiet(), withIngest(l))
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() { srv.Close(); s.Close() })
	return srv
}

func openLog(t *testing.T, opts wal.Options) *wal.Log {
	t.Helper()
	l, err := wal.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// post sends body and returns the status and the decoded JSON answer.
func post(t *testing.T, url, contentType, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/api/ingest", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var ans map[string]any
	if err := json.NewDecoder(res.Body).Decode(&ans); err != nil {
		t.Fatalf("POST %s: answer is not JSON: %v", contentType, err)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("answer's Content-Type %q", ct)
	}
	return res.StatusCode, ans
}

// readAll reads the log's records from offset from to its end.
func readAll(t *testing.T, l *wal.Log, from uint64) []string {
	t.Helper()
	var out []string
	for from < l.End() {
		recs, err := l.Read(from, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			out = append(out, string(r.Payload))
			from = r.Offset + 1
		}
	}
	return out
}

func TestIngestPost(t *testing.T) {
	l := openLog(t, ingestOpts)
	srv := ingestServer(t, l)
	big := strings.Repeat("x", 1001)
	for _, tc := range []struct {
		name, ct, body string
		code           int
		want           []string // records appended, for a 200
		err            string   // in the error, otherwise
	}{
		{"text", "text/plain", "a b\n\nc\r\nd", 200, []string{"a b", "c", "d"}, ""},
		{"text charset", "text/plain; charset=UTF-8", "é ü\n", 200, []string{"é ü"}, ""},
		{"ndjson", "application/x-ndjson", "\"a\"\n\n  \"b \\\"c\\\"\"  \r\n\"\\u00e9\"", 200, []string{"a", `b "c"`, "é"}, ""},
		{"json string", "application/json", ` "one line" `, 200, []string{"one line"}, ""},
		{"json array", "application/json", `["x y", "z"]`, 200, []string{"x y", "z"}, ""},
		{"record at the limit", "text/plain", big[:1000], 200, []string{big[:1000]}, ""},

		{"no content type", "", "a\n", 415, nil, "no Content-Type"},
		{"xml", "application/xml", "<a/>", 415, nil, `"application/xml"`},
		{"form", "application/x-www-form-urlencoded", "a=b", 415, nil, "want text/plain"},
		{"latin1", "text/plain; charset=latin1", "a\n", 415, nil, `charset "latin1"`},
		{"bad media type", "text/", "a\n", 415, nil, "Content-Type"},
		{"body too large", "text/plain", strings.Repeat("abcdefg\n", MaxIngestBody/8+1), 413, nil, "body over"},
		{"record too large", "text/plain", "ok\n" + big + "\n", 413, nil, "record 1 has 1001 bytes, more than MaxRecordBytes 1000"},
		{"too many records", "text/plain", strings.Repeat("a\n", MaxIngestRecords+1), 413, nil, "more than 100000 records"},
		{"too many in json", "application/json", "[" + strings.Repeat(`"a",`, MaxIngestRecords) + `"a"]`, 413, nil, "more than 100000 records"},
		{"more than a segment", "text/plain", strings.Repeat(big[:900]+"\n", 80), 413, nil, "more than a segment"},
		{"invalid utf-8", "text/plain", "good\nbad \xff\n", 400, nil, "byte 9 (line 2) is not valid UTF-8"},
		{"invalid utf-8 in json", "application/json", "[\"\xc3\"]", 400, nil, "not valid UTF-8"},
		{"empty body", "text/plain", "\n\r\n\n", 400, nil, "no records"},
		{"empty array", "application/json", "[]", 400, nil, "no records"},
		{"malformed array", "application/json", `["a", "b"`, 400, nil, "malformed JSON array: unexpected EOF"},
		{"missing comma", "application/json", `["a" "b"]`, 400, nil, "malformed JSON array"},
		{"trailing comma", "application/json", `["a",]`, 400, nil, "malformed JSON array"},
		{"after the array", "application/json", `["a"] ["b"]`, 400, nil, "data after the array"},
		{"numbers up to the body limit", "application/json", "[" + strings.Repeat("1,", MaxIngestBody/2-2) + "1]", 400, nil, "element 0: want a JSON string, got 1"},
		{"object", "application/json", `{"a": 1}`, 400, nil, "want a JSON string or an array of strings"},
		{"number in array", "application/json", `["a", 1]`, 400, nil, "element 1: want a JSON string"},
		{"null in array", "application/json", `["a", null]`, 400, nil, "element 1: want a JSON string"},
		{"object in array", "application/json", `["a", {"b": "c"}]`, 400, nil, `element 1: want a JSON string, got {"b":`},
		{"empty string", "application/json", `["a", ""]`, 400, nil, "element 1: empty record"},
		{"trailing data", "application/json", `"a" "b"`, 400, nil, "malformed JSON string"},
		{"ndjson not a string", "application/x-ndjson", "\"a\"\n{\"b\":1}\n", 400, nil, "line 2: want a JSON string"},
		{"ndjson broken string", "application/x-ndjson", "\"a\"\n\"b\n", 400, nil, "line 2: malformed JSON string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			end := l.End()
			code, ans := post(t, srv.URL, tc.ct, tc.body)
			if code != tc.code {
				t.Fatalf("status %d, want %d: %v", code, tc.code, ans)
			}
			if tc.code != 200 {
				msg, _ := ans["error"].(string)
				if !strings.Contains(msg, tc.err) || !strings.Contains(msg, "nothing written") {
					t.Fatalf("error %q, want it to say %q and that nothing was written", msg, tc.err)
				}
				if l.End() != end || l.Stats().Written != end {
					t.Fatalf("the log went from %d to %d (written %d) on an error", end, l.End(), l.Stats().Written)
				}
				return
			}
			if ans["first"] != float64(end) || ans["count"] != float64(len(tc.want)) {
				t.Fatalf("answer %v, want first %d, count %d", ans, end, len(tc.want))
			}
			if got := readAll(t, l, end); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("appended %q, want %q", got, tc.want)
			}
		})
	}
	// Not a POST: 405, with the methods the endpoint takes.
	req, _ := http.NewRequest(http.MethodPut, srv.URL+"/api/ingest", strings.NewReader("a"))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD, POST" {
		t.Fatalf("PUT: %d, Allow %q", res.StatusCode, res.Header.Get("Allow"))
	}
}

// TestIngestConcurrentPosts: concurrent requests get disjoint offset
// ranges, and each range holds exactly that request's records.
func TestIngestConcurrentPosts(t *testing.T) {
	l := openLog(t, wal.Options{Sync: wal.Grouped(time.Millisecond)})
	srv := ingestServer(t, l)
	const clients, requests = 4, 25
	type sent struct {
		first uint64
		recs  []string
	}
	var mu sync.Mutex
	var all []sent
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := range requests {
				recs := []string{fmt.Sprintf("c%d r%d a", c, i), fmt.Sprintf("c%d r%d b", c, i)}
				code, ans := post(t, srv.URL, "text/plain", strings.Join(recs, "\n"))
				if code != 200 {
					t.Errorf("status %d: %v", code, ans)
					return
				}
				mu.Lock()
				all = append(all, sent{uint64(ans["first"].(float64)), recs})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	got := readAll(t, l, 0)
	if len(got) != clients*requests*2 {
		t.Fatalf("%d records in the log, want %d", len(got), clients*requests*2)
	}
	for _, s := range all {
		if fmt.Sprint(got[s.first:s.first+2]) != fmt.Sprint(s.recs) {
			t.Fatalf("offsets %d..: %q, want %q", s.first, got[s.first:s.first+2], s.recs)
		}
	}
}

func TestIngestStats(t *testing.T) {
	dir := t.TempDir()
	l, err := wal.Open(dir, ingestOpts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(context.Background(), [][]byte{[]byte("a"), []byte("b"), []byte("c")}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// A torn tail: half of a fourth record's frame.
	seg := filepath.Join(dir, "00000000000000000000.log")
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	frame := wal.AppendFrame(nil, 1, []byte("a record cut short by a crash"))
	if _, err := f.Write(frame[:len(frame)/2]); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	l, err = wal.Open(dir, ingestOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	if err := l.Commit("wordcount", 2); err != nil {
		t.Fatal(err)
	}
	srv := ingestServer(t, l)
	if code, ans := post(t, srv.URL, "text/plain", "d\ne\n"); code != 200 || ans["first"] != float64(3) {
		t.Fatalf("POST after the recovery: %d %v", code, ans)
	}
	res, err := http.Get(srv.URL + "/api/ingest")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var st IngestStats
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil || res.StatusCode != 200 {
		t.Fatalf("GET /api/ingest: %d %v", res.StatusCode, err)
	}
	rec := st.Recovered
	if st.Dir != dir || st.Start != 0 || st.End != 5 || st.Written != 5 || st.Segments != 1 || st.Appends != 1 || st.Records != 2 ||
		st.Readers["wordcount"] != 2 || len(st.Readers) != 1 || st.Bytes != 5*wal.HeaderSize+5 {
		t.Fatalf("stats %+v", st)
	}
	if rec == nil || rec.Segment != seg || rec.Offset != 3 || rec.Pos != 3*wal.HeaderSize+3 ||
		rec.TruncatedBytes != int64(len(frame)/2) || rec.Reason == "" {
		t.Fatalf("recovered %+v, want the %d bytes at offset 3 (byte %d)", rec, len(frame)/2, 3*wal.HeaderSize+3)
	}
}

// dial opens an ingest WebSocket.
func dial(t *testing.T, srv *httptest.Server, query string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/api/ingest/ws"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	c.SetReadLimit(1 << 20)
	return c
}

// wsAnswer is an answer to a message: an IngestAnswer or an IngestError.
type wsAnswer struct {
	First  *uint64 `json:"first"`
	Count  int     `json:"count"`
	Error  string  `json:"error"`
	Status int     `json:"status"`
}

func exchange(t *testing.T, c *websocket.Conn, typ websocket.MessageType, msg string) wsAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Write(ctx, typ, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	var a wsAnswer
	if err := wsjson.Read(ctx, c, &a); err != nil {
		t.Fatalf("answer to %.40q: %v", msg, err)
	}
	return a
}

// closedWith reads until the server closes c and returns the close status.
func closedWith(t *testing.T, c *websocket.Conn) (websocket.StatusCode, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _, err := c.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) {
		t.Fatalf("read after a protocol error: %v, want a close frame", err)
	}
	return ce.Code, ce.Reason
}

func TestIngestWebSocket(t *testing.T) {
	l := openLog(t, ingestOpts)
	srv := ingestServer(t, l)
	big := strings.Repeat("x", 1001)
	for _, tc := range []struct {
		name, query, msg string
		typ              websocket.MessageType
		want             []string // records appended
		status           int      // of an error answer
		err              string
		close            websocket.StatusCode // the server closes the connection
	}{
		{name: "one record", msg: "hello world", want: []string{"hello world"}},
		{name: "verbatim", msg: `["not", "a batch"]` + "\nand a second line", want: []string{`["not", "a batch"]` + "\nand a second line"}},
		{name: "empty", msg: "", status: 400, err: "empty record"},
		{name: "invalid utf-8", msg: "a\xffb", status: 400, err: "byte 1 (line 1) is not valid UTF-8"},
		{name: "record too large", msg: big, status: 413, err: "more than MaxRecordBytes 1000"},
		{name: "batch", query: "?batch=json", msg: `["a", "b c"]`, want: []string{"a", "b c"}},
		{name: "batch of one string", query: "?batch=json", msg: `"a"`, want: []string{"a"}},
		{name: "malformed batch", query: "?batch=json", msg: `["a", 1]`, status: 400, err: "element 1: want a JSON string"},
		{name: "batch too long", query: "?batch=json", msg: "[" + strings.Repeat(`"a",`, MaxIngestRecords) + `"a"]`, status: 413, err: "more than 100000 records"},
		{name: "not json", query: "?batch=json", msg: `a`, status: 400, err: "want a JSON string or an array"},
		{name: "binary", msg: "a", typ: websocket.MessageBinary, close: websocket.StatusUnsupportedData, err: "binary message"},
		{name: "message too big", msg: strings.Repeat("a", MaxIngestMessage+1), close: websocket.StatusMessageTooBig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, srv, tc.query)
			typ := tc.typ
			if typ == 0 {
				typ = websocket.MessageText
			}
			end := l.End()
			if tc.close != 0 {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := c.Write(ctx, typ, []byte(tc.msg)); err != nil {
					t.Fatal(err)
				}
				code, reason := closedWith(t, c)
				if code != tc.close || !strings.Contains(reason, tc.err) {
					t.Fatalf("closed with %v %q, want %v %q", code, reason, tc.close, tc.err)
				}
				if l.End() != end {
					t.Fatal("a protocol error wrote records")
				}
				return
			}
			a := exchange(t, c, typ, tc.msg)
			if tc.status != 0 {
				if a.Status != tc.status || !strings.Contains(a.Error, tc.err) || a.First != nil || l.End() != end {
					t.Fatalf("answer %+v, want status %d and %q; end %d, was %d", a, tc.status, tc.err, l.End(), end)
				}
				// The connection stays: the next message goes through.
				next := "after an error"
				if tc.query != "" {
					next = `"after an error"`
				}
				tc.want = []string{"after an error"}
				a = exchange(t, c, typ, next)
			}
			if a.Error != "" || a.First == nil || *a.First != end || a.Count != len(tc.want) {
				t.Fatalf("answer %+v, want first %d, count %d", a, end, len(tc.want))
			}
			if got := readAll(t, l, end); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("appended %q, want %q", got, tc.want)
			}
		})
	}
	// A bad query is refused before the upgrade.
	res, err := http.Get(srv.URL + "/api/ingest/ws?batch=xml")
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("?batch=xml: %d", res.StatusCode)
	}
}

// faultyLog is a log whose Append fails with err, after waiting for
// release if it is set.
type faultyLog struct {
	*wal.Log
	err     error
	started chan struct{}
	release chan struct{}
}

func (f *faultyLog) Append(ctx context.Context, p [][]byte) (uint64, error) {
	if f.release != nil {
		f.started <- struct{}{}
		<-f.release
	}
	if f.err != nil {
		return 0, f.err
	}
	return f.Log.Append(ctx, p)
}

// errNoSpace is the error of an append to a full device.
var errNoSpace = fmt.Errorf("wal: appending to /x/00000000000000000000.log: %w", fmt.Errorf("%w: %w", wal.ErrNoSpace, syscall.ENOSPC))

// TestIngestFullDisk: an append that fails for want of space is 507 (and
// an error answer on a WebSocket that stays open); reads go on.
func TestIngestFullDisk(t *testing.T) {
	l := openLog(t, ingestOpts)
	if _, err := l.Append(context.Background(), [][]byte{[]byte("before")}); err != nil {
		t.Fatal(err)
	}
	srv := ingestServer(t, &faultyLog{Log: l, err: errNoSpace})
	code, ans := post(t, srv.URL, "text/plain", "a\nb\n")
	if msg, _ := ans["error"].(string); code != http.StatusInsufficientStorage || !strings.Contains(msg, "full") {
		t.Fatalf("POST to a full disk: %d %v", code, ans)
	}
	c := dial(t, srv, "")
	for range 2 {
		if a := exchange(t, c, websocket.MessageText, "a"); a.Status != http.StatusInsufficientStorage || a.First != nil {
			t.Fatalf("WebSocket message to a full disk: %+v", a)
		}
	}
	res, err := http.Get(srv.URL + "/api/ingest")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var st IngestStats
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil || res.StatusCode != 200 || st.End != 1 {
		t.Fatalf("GET /api/ingest on a full disk: %d %v %+v", res.StatusCode, err, st)
	}
}

// TestIngestClosedLog: a closed log (the node is stopping) is 503, and
// closes a WebSocket with 1001 (going away).
func TestIngestClosedLog(t *testing.T) {
	l := openLog(t, ingestOpts)
	srv := ingestServer(t, l)
	c := dial(t, srv, "")
	if a := exchange(t, c, websocket.MessageText, "a"); a.Error != "" {
		t.Fatal(a.Error)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	code, ans := post(t, srv.URL, "application/json", `["a"]`)
	if msg, _ := ans["error"].(string); code != http.StatusServiceUnavailable || !strings.Contains(msg, "closed") {
		t.Fatalf("POST to a closed log: %d %v", code, ans)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, []byte("b")); err != nil {
		t.Fatal(err)
	}
	if code, reason := closedWith(t, c); code != websocket.StatusGoingAway || !strings.Contains(reason, "closed") {
		t.Fatalf("closed with %v %q", code, reason)
	}
}

// TestIngestBusy: with MaxIngestRequests requests appending, one more
// waits IngestSlotWait and gets 503 with Retry-After; once they finish,
// requests go through again.
func TestIngestBusy(t *testing.T) {
	l := openLog(t, ingestOpts)
	f := &faultyLog{Log: l, started: make(chan struct{}), release: make(chan struct{})}
	srv := ingestServer(t, f)
	var wg sync.WaitGroup
	for range MaxIngestRequests {
		wg.Go(func() {
			if code, ans := post(t, srv.URL, "text/plain", "a"); code != 200 {
				t.Errorf("a held request: %d %v", code, ans)
			}
		})
	}
	for range MaxIngestRequests {
		<-f.started // every slot is taken
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/ingest", strings.NewReader("b"))
	req.Header.Set("Content-Type", "text/plain")
	begin := time.Now()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != "1" || time.Since(begin) < IngestSlotWait {
		t.Fatalf("one request too many: %d after %v, Retry-After %q: %s", res.StatusCode, time.Since(begin), res.Header.Get("Retry-After"), b)
	}
	close(f.release)
	wg.Wait()
	f.release = nil
	if code, ans := post(t, srv.URL, "text/plain", "c"); code != 200 || ans["first"] != float64(MaxIngestRequests) {
		t.Fatalf("after the burst: %d %v", code, ans)
	}
}

func TestIngestAppendStatus(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		err  error
		code int
	}{
		{&wal.TooLargeError{Index: 3, Size: 10, Max: 5}, http.StatusRequestEntityTooLarge},
		{fmt.Errorf("x: %w", &wal.TooLargeError{Index: -1, Size: 10, Max: 5}), http.StatusRequestEntityTooLarge},
		{errNoSpace, http.StatusInsufficientStorage},
		{fmt.Errorf("wal: log failed, reopen it to append again: %w", errNoSpace), http.StatusInsufficientStorage},
		{wal.ErrClosed, http.StatusServiceUnavailable},
		{fmt.Errorf("wal: waiting for fsync: %w", ctx.Err()), http.StatusServiceUnavailable},
		{errors.New("wal: fsync: input/output error"), http.StatusInternalServerError},
	} {
		if got := appendStatus(tc.err); got != tc.code {
			t.Errorf("appendStatus(%v) = %d, want %d", tc.err, got, tc.code)
		}
	}
}

// TestIngestGatewayClose: closing the gateway ends ingest WebSockets (which
// http.Server.Shutdown does not) and refuses POSTs; nothing more is written.
func TestIngestGatewayClose(t *testing.T) {
	l := openLog(t, ingestOpts)
	s := New(nil, nil, "", quiet(), withIngest(l))
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	c := dial(t, srv, "")
	s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _, err := c.Read(ctx)
	if websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("the WebSocket after Close: %v, want a close with status 1001", err)
	}
	if code, ans := post(t, srv.URL, "text/plain", "late"); code != http.StatusServiceUnavailable || !strings.Contains(fmt.Sprint(ans["error"]), "shutting down") {
		t.Fatalf("a POST after Close: %d %v", code, ans)
	}
	if l.End() != 0 {
		t.Fatalf("%d records written after Close", l.End())
	}
}

// TestParseJSONMemory: a JSON array costs memory in proportion to the
// records it holds, never to the elements it sends, and past
// MaxIngestRecords elements it is still 413. The array was decoded whole
// before the count was checked: 8 MiB of "[1,1,…]" allocated 618 MiB.
func TestParseJSONMemory(t *testing.T) {
	// perRecord is what a record held costs beside its bytes: its slice
	// header and the append growth, and the decoder's garbage per value
	// (~225 bytes measured, ~250 with -race).
	const perRecord = 320
	array := func(elem string, n int) []byte {
		return []byte("[" + strings.Repeat(elem+",", n-1) + elem + "]")
	}
	for _, tc := range []struct {
		name string
		body []byte
		held int // records parsed before the answer
		code int // 0: parsed
		err  string
	}{
		{"numbers up to the body limit", array("1", MaxIngestBody/2-1), 0, 400, "element 0: want a JSON string"},
		{"strings up to the body limit", array(`"a"`, MaxIngestBody/4-1), MaxIngestRecords, 413, "more than 100000 records"},
		{"a WebSocket message of strings", array(`"a"`, MaxIngestMessage/4-1), MaxIngestRecords, 413, "more than 100000 records"},
		{"records at the limit", array(`"a"`, MaxIngestRecords), MaxIngestRecords, 0, ""},
		{"one large record", array(`"`+strings.Repeat("x", MaxIngestBody-8)+`"`, 1), 1, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.body) > MaxIngestBody {
				t.Fatalf("the body has %d bytes, more than a request may", len(tc.body))
			}
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			recs, err := validRecords(tc.body, parseJSON)
			runtime.ReadMemStats(&after)
			// Eight times the body covers the decoder's buffer, which grows
			// by doubling to hold the largest element.
			alloc, budget := after.TotalAlloc-before.TotalAlloc, uint64(8*len(tc.body)+perRecord*tc.held)
			if alloc > budget {
				t.Fatalf("allocated %d bytes for a body of %d, more than the budget %d", alloc, len(tc.body), budget)
			}
			switch {
			case tc.code == 0 && (err != nil || len(recs) != tc.held):
				t.Fatalf("%d records, %v; want %d", len(recs), err, tc.held)
			case tc.code != 0 && (err == nil || err.code != tc.code || !strings.Contains(err.msg, tc.err)):
				t.Fatalf("error %v, want %d mentioning %q", err, tc.code, tc.err)
			}
			t.Logf("allocated %d bytes (%.1f× the body)", alloc, float64(alloc)/float64(len(tc.body)))
		})
	}
}

// TestIngestWebSocketIdle: a WebSocket that sends no message for the idle
// timeout, from the start or after some, is closed with 1008 and a reason,
// and its slot is free again. Idle sockets held the MaxIngestConns slots
// for good.
func TestIngestWebSocketIdle(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t, goleak.IgnoreCurrent()) }) // after the server's cleanups
	const idle = 100 * time.Millisecond
	l := openLog(t, ingestOpts)
	s := New(nil, nil, "", quiet(), WithIngestIdleTimeout(idle), withIngest(l)) // options in any order
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() { srv.Close(); s.Close() })
	idleClosed := func(t *testing.T, c *websocket.Conn) {
		t.Helper()
		code, reason := closedWith(t, c)
		if code != websocket.StatusPolicyViolation || !strings.Contains(reason, "no message for 100ms") {
			t.Fatalf("closed with %v %q, want 1008 saying it was idle", code, reason)
		}
	}
	for _, tc := range []struct {
		name  string
		conns int
		send  []string // before going idle
	}{
		{"silent from the start", 1, nil},
		{"silent after messages", 1, []string{"a", "b"}},
		{"every slot", MaxIngestConns, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := make([]*websocket.Conn, tc.conns)
			for i := range cs {
				cs[i] = dial(t, srv, "")
			}
			for _, msg := range tc.send {
				if a := exchange(t, cs[0], websocket.MessageText, msg); a.Error != "" {
					t.Fatal(a.Error)
				}
			}
			for _, c := range cs {
				idleClosed(t, c)
			}
			for deadline := time.Now().Add(5 * time.Second); s.ingest.conns.Load() != 0; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%d connections still counted after every client was closed", s.ingest.conns.Load())
				}
			}
			// The slots are free: a new client gets one and is served.
			c := dial(t, srv, "")
			if a := exchange(t, c, websocket.MessageText, "after"); a.Error != "" {
				t.Fatal(a.Error)
			}
			idleClosed(t, c)
		})
	}
}
