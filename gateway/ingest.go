package gateway

// The ingest endpoints: records appended to a node's write-ahead log
// (wal), which a WAL source reads like a Kafka partition.
//
//	POST /api/ingest      one request is one append: all of its records or none
//	GET  /api/ingest/ws   a WebSocket: each message is one append, answered in order
//	GET  /api/ingest      the log's offsets, committed readers, segments and recovery
//
// A 2xx (or a WebSocket answer without "error") means the records are
// durable under the log's fsync policy: Append returned. Every error is
// {"error": "..."} and means nothing of the request (message) was written,
// except 5xx on a request whose client went away while it waited for the
// fsync (the records may still become durable: at least once).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/sirupsen/logrus"

	"github.com/acktor/acktor/wal"
)

// Limits of the ingest endpoints.
const (
	// MaxIngestBody bounds a POST /api/ingest body; a larger one is 413.
	MaxIngestBody = 8 << 20
	// MaxIngestRecords bounds the records of one request or message; more
	// is 413.
	MaxIngestRecords = 100_000
	// MaxIngestRequests bounds the POSTs read and appended at once (their
	// bodies are in memory). One more waits up to IngestSlotWait for a
	// slot, then gets 503 with Retry-After: 1.
	MaxIngestRequests = 32
	// IngestSlotWait is how long a POST waits for one of the
	// MaxIngestRequests slots.
	IngestSlotWait = time.Second
	// IngestBodyWait bounds the time a POST's body may take to arrive
	// (408 after it).
	IngestBodyWait = 30 * time.Second
	// MaxIngestConns bounds the WebSocket ingest connections; one more is
	// refused with 503 before the upgrade.
	MaxIngestConns = 128
	// MaxIngestMessage bounds a WebSocket message (a record, or a batch):
	// a larger one closes the connection with 1009 (message too big).
	// Records larger than this go through POST.
	MaxIngestMessage = 1 << 20
	// IngestIdleTimeout is how long a WebSocket may wait for its client's
	// next message (pings do not count) before the gateway closes it with
	// 1008 (policy violation): without it, MaxIngestConns clients that
	// connect and say nothing hold every slot for good.
	// WithIngestIdleTimeout changes it.
	IngestIdleTimeout = time.Minute
)

// Content types POST /api/ingest accepts.
const (
	ctText   = "text/plain"
	ctNDJSON = "application/x-ndjson"
	ctJSON   = "application/json"
)

// IngestAnswer is what an append answers: the offset of the first record
// and how many there are; they have the offsets First to First+Count-1.
type IngestAnswer struct {
	First uint64 `json:"first"`
	Count int    `json:"count"`
}

// IngestError is a WebSocket message's error answer; Status is the HTTP
// status a POST of the same records would have had.
type IngestError struct {
	Error  string `json:"error"`
	Status int    `json:"status"`
}

// IngestStats is what GET /api/ingest answers.
type IngestStats struct {
	Dir      string `json:"dir"`
	Start    uint64 `json:"start"`   // oldest record kept
	End      uint64 `json:"end"`     // one past the last durable record
	Written  uint64 `json:"written"` // one past the last record written, durable or not
	Segments int    `json:"segments"`
	Bytes    int64  `json:"bytes"`
	// Readers is the committed offset of each named reader: it has
	// finished every record below it.
	Readers map[string]uint64 `json:"readers"`
	// Appends, Records, Syncs and DeletedSegments count since the log was
	// opened.
	Appends         uint64 `json:"appends"`
	Records         uint64 `json:"records"`
	Syncs           uint64 `json:"syncs"`
	DeletedSegments uint64 `json:"deleted_segments"`
	// Recovered is the torn tail the log truncated when it was opened, if
	// any.
	Recovered *IngestRecovery `json:"recovered,omitempty"`
}

// IngestRecovery is a torn tail truncated at open (wal.Recovery).
type IngestRecovery struct {
	Segment        string `json:"segment"`
	Offset         uint64 `json:"offset"` // the offset the first dropped record would have had
	Pos            int64  `json:"pos"`    // byte of the segment where it was cut
	TruncatedBytes int64  `json:"truncated_bytes"`
	Reason         string `json:"reason"`
}

// ingestLog is what the ingest endpoints use of a *wal.Log (tests put a
// fault in front of Append).
type ingestLog interface {
	Append(ctx context.Context, payloads [][]byte) (uint64, error)
	Stats() wal.Stats
	Readers() map[string]uint64
	Recovered() wal.Recovery
	Dir() string
}

// WithIngest serves the ingest endpoints over l: POST /api/ingest, GET
// /api/ingest/ws and GET /api/ingest. The gateway does not close l. A nil
// l serves nothing.
//
// POST /api/ingest takes its records by Content-Type (charset, if given,
// must be utf-8): text/plain is one record per line ("\n" or "\r\n"; empty
// lines are skipped), application/x-ndjson one JSON string per line (empty
// lines skipped), application/json a JSON string or an array of strings;
// anything else is 415. The body must be valid UTF-8 (400), at most
// MaxIngestBody bytes (413) and MaxIngestRecords records (413); a record
// larger than the log's MaxRecordBytes is 413, an empty JSON string or a
// malformed line or array 400, a body with no record 400. The request is
// one Append: 200 {"first": offset, "count": n} once it returned (the
// records are durable), 507 when the log's device is full (reads go on),
// 503 when the log is closed, 500 for another failure of the log.
//
// GET /api/ingest/ws upgrades to a WebSocket. Each text message is one
// record, verbatim; with ?batch=json each message is instead a JSON string
// or an array of strings, as for application/json. Messages are appended
// one at a time, in order, and each is answered, in order, with
// {"first": offset, "count": n} once durable or {"error": "...",
// "status": code} with the status a POST would have had; the connection
// stays open after such errors (nothing of that message was written).
// Protocol errors close it with a reason: a binary message (1003), a
// message over MaxIngestMessage bytes (1009), the log closed (1001, the
// node is going away), no message for IngestIdleTimeout (1008: reconnect
// to send again). At most MaxIngestConns connections (503 beyond).
//
// GET /api/ingest answers IngestStats.
func WithIngest(l *wal.Log) Option {
	if l == nil {
		return func(*Server) {}
	}
	return withIngest(l)
}

func withIngest(l ingestLog) Option {
	return func(s *Server) { s.ingestLog = l }
}

// WithIngestIdleTimeout sets how long an ingest WebSocket may wait for a
// message before it is closed (default IngestIdleTimeout); 0 or less keeps
// the default.
func WithIngestIdleTimeout(d time.Duration) Option {
	return func(s *Server) {
		if d > 0 {
			s.ingestIdle = d
		}
	}
}

// serveIngest serves the ingest endpoints over s.ingestLog. New calls it
// once every option is applied, so that their order does not matter.
func (s *Server) serveIngest() {
	in := &ingest{l: s.ingestLog, log: s.log, slots: make(chan struct{}, MaxIngestRequests), idle: s.ingestIdle,
		closing: s.closing}
	s.ingest = in
	s.mux.HandleFunc("POST /api/ingest", in.post)
	s.mux.HandleFunc("GET /api/ingest", in.stats)
	s.mux.HandleFunc("GET /api/ingest/ws", in.ws)
}

// ingest serves the ingest endpoints.
type ingest struct {
	l       ingestLog
	log     logrus.FieldLogger
	slots   chan struct{} // POSTs under way
	conns   atomic.Int64  // WebSocket connections
	idle    time.Duration // a WebSocket's wait for a message, at most
	closing <-chan struct{}
}

// badInput is a request the gateway refuses before appending.
type badInput struct {
	code int
	msg  string
}

func (e *badInput) Error() string { return e.msg }

func bad(code int, format string, args ...any) *badInput {
	return &badInput{code: code, msg: fmt.Sprintf(format, args...)}
}

func (in *ingest) post(w http.ResponseWriter, r *http.Request) {
	select {
	case <-in.closing:
		writeError(w, http.StatusServiceUnavailable, "the gateway is shutting down; nothing written")
		return
	default:
	}
	parse, err := ingestParser(r.Header.Get("Content-Type"))
	if err != nil {
		writeError(w, err.code, err.msg+"; nothing written")
		return
	}
	if !in.acquire(r.Context()) {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable,
			fmt.Sprintf("ingest: %d requests under way already and none finished in %v; retry", MaxIngestRequests, IngestSlotWait))
		return
	}
	defer func() { <-in.slots }()
	// A body that trickles in must not hold a slot for ever.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(IngestBodyWait))
	body, rerr := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxIngestBody))
	if rerr != nil {
		var tooBig *http.MaxBytesError
		var timeout net.Error
		switch {
		case errors.As(rerr, &tooBig):
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes; nothing written", MaxIngestBody))
			return
		case errors.As(rerr, &timeout) && timeout.Timeout():
			writeError(w, http.StatusRequestTimeout, fmt.Sprintf("the body took over %v; nothing written", IngestBodyWait))
			return
		}
		writeError(w, http.StatusBadRequest, fmt.Sprintf("reading the body: %v; nothing written", rerr))
		return
	}
	recs, berr := validRecords(body, parse)
	if berr != nil {
		writeError(w, berr.code, berr.msg+"; nothing written")
		return
	}
	first, aerr := in.l.Append(r.Context(), recs)
	if aerr != nil {
		code, msg := in.appendError(aerr, r.RemoteAddr)
		writeError(w, code, msg)
		return
	}
	writeJSON(w, http.StatusOK, IngestAnswer{First: first, Count: len(recs)})
}

// acquire takes one of the POST slots, waiting up to IngestSlotWait.
func (in *ingest) acquire(ctx context.Context) bool {
	select {
	case in.slots <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(IngestSlotWait)
	defer t.Stop()
	select {
	case in.slots <- struct{}{}:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// parser turns a body (valid UTF-8) into records.
type parser func(body []byte) ([][]byte, *badInput)

// ingestParser picks the parser of a Content-Type.
func ingestParser(contentType string) (parser, *badInput) {
	want := fmt.Sprintf("want %s, %s or %s", ctText, ctNDJSON, ctJSON)
	if contentType == "" {
		return nil, bad(http.StatusUnsupportedMediaType, "no Content-Type: %s", want)
	}
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil, bad(http.StatusUnsupportedMediaType, "Content-Type %q: %v; %s", contentType, err, want)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "us-ascii") {
		return nil, bad(http.StatusUnsupportedMediaType, "Content-Type %q: charset %q: want utf-8", contentType, cs)
	}
	switch mt {
	case ctText:
		return parseText, nil
	case ctNDJSON:
		return parseNDJSON, nil
	case ctJSON:
		return parseJSON, nil
	}
	return nil, bad(http.StatusUnsupportedMediaType, "Content-Type %q: %s", mt, want)
}

// validRecords checks that body is UTF-8, parses it and checks the count.
func validRecords(body []byte, parse parser) ([][]byte, *badInput) {
	if i := invalidUTF8(body); i >= 0 {
		return nil, bad(http.StatusBadRequest, "byte %d (line %d) is not valid UTF-8; records are text", i, 1+bytes.Count(body[:i], []byte("\n")))
	}
	recs, err := parse(body)
	switch {
	case err != nil:
		return nil, err
	case len(recs) == 0:
		return nil, bad(http.StatusBadRequest, "no records")
	}
	return recs, nil
}

// invalidUTF8 is the position of the first byte of b that is not valid
// UTF-8, or -1.
func invalidUTF8(b []byte) int {
	if utf8.Valid(b) {
		return -1
	}
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return -1
}

// lines calls f with each line of body ("\r\n" or "\n"; the last one may
// lack it) and its number from 1, until f says stop.
func lines(body []byte, f func(n int, line []byte) bool) {
	for n := 1; len(body) > 0; n++ {
		line, rest, _ := bytes.Cut(body, []byte("\n"))
		body = rest
		if !f(n, bytes.TrimSuffix(line, []byte("\r"))) {
			return
		}
	}
}

func tooMany() *badInput {
	return bad(http.StatusRequestEntityTooLarge, "more than %d records in one request", MaxIngestRecords)
}

// parseText: one record per line, empty lines skipped.
func parseText(body []byte) ([][]byte, *badInput) {
	var recs [][]byte
	var err *badInput
	lines(body, func(_ int, line []byte) bool {
		if len(line) == 0 {
			return true
		}
		if len(recs) == MaxIngestRecords {
			err = tooMany()
			return false
		}
		recs = append(recs, line)
		return true
	})
	return recs, err
}

// parseNDJSON: one JSON string per line, empty lines skipped.
func parseNDJSON(body []byte) ([][]byte, *badInput) {
	var recs [][]byte
	var err *badInput
	lines(body, func(n int, line []byte) bool {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			return true
		}
		if len(recs) == MaxIngestRecords {
			err = tooMany()
			return false
		}
		rec, e := jsonRecord(line)
		if e != nil {
			err = bad(http.StatusBadRequest, "line %d: %v", n, e)
			return false
		}
		recs = append(recs, rec)
		return true
	})
	return recs, err
}

// parseJSON: a JSON string, or an array of them. The array is read one
// element at a time with a json.Decoder, so that a request costs memory in
// proportion to the records it holds, never to the elements it sends: an
// array decoded whole (into []json.RawMessage) cost a slice header and a
// copy per element before the count could be checked, ~77 times the body
// for "[1,1,…]". It stops at the first element that is not a string, and
// at element MaxIngestRecords+1.
func parseJSON(body []byte) ([][]byte, *badInput) {
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '"' {
		rec, err := jsonRecord(body)
		if err != nil {
			return nil, bad(http.StatusBadRequest, "%v", err)
		}
		return [][]byte{rec}, nil
	}
	if len(body) == 0 || body[0] != '[' {
		return nil, bad(http.StatusBadRequest, "want a JSON string or an array of strings")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	// The first token is the '[' checked above.
	if _, err := dec.Token(); err != nil {
		return nil, malformedArray(err)
	}
	var recs [][]byte
	var raw json.RawMessage // reused: Decode appends into its capacity, jsonRecord copies out
	for i := 0; dec.More(); i++ {
		if len(recs) == MaxIngestRecords {
			return nil, tooMany()
		}
		if err := dec.Decode(&raw); err != nil {
			return nil, malformedArray(err)
		}
		rec, err := jsonRecord(raw)
		if err != nil {
			return nil, bad(http.StatusBadRequest, "element %d: %v", i, err)
		}
		recs = append(recs, rec)
	}
	// More said the next token is the closing ']', or that there is none.
	if _, err := dec.Token(); err != nil {
		return nil, malformedArray(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, bad(http.StatusBadRequest, "malformed JSON array: data after the array")
	}
	return recs, nil
}

// malformedArray is the error of a JSON array the decoder could not read;
// an array cut short is io.EOF to the decoder, and "unexpected EOF" to the
// client.
func malformedArray(err error) *badInput {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return bad(http.StatusBadRequest, "malformed JSON array: %v", err)
}

// jsonRecord decodes one JSON string, not empty, into a new slice (m may
// be reused). A string with no escape, quote or control character inside
// is its own value: it is copied rather than decoded a second time, which
// spares two allocations per record of a batch.
func jsonRecord(m []byte) ([]byte, error) {
	if len(m) == 0 || m[0] != '"' {
		return nil, fmt.Errorf("want a JSON string, got %.40s", m)
	}
	if len(m) >= 2 && m[len(m)-1] == '"' && plainJSON(m[1:len(m)-1]) {
		if len(m) == 2 {
			return nil, errors.New("empty record")
		}
		return bytes.Clone(m[1 : len(m)-1]), nil
	}
	var s string
	if err := json.Unmarshal(m, &s); err != nil {
		return nil, fmt.Errorf("malformed JSON string: %v", err)
	}
	if s == "" {
		return nil, errors.New("empty record")
	}
	return []byte(s), nil
}

// plainJSON says whether b, the inside of a JSON string, needs no decoding:
// no backslash, no quote and no control character (b is valid UTF-8).
func plainJSON(b []byte) bool {
	for _, c := range b {
		if c == '\\' || c == '"' || c < 0x20 {
			return false
		}
	}
	return true
}

// appendStatus is the HTTP status of a failed append.
func appendStatus(err error) int {
	switch {
	case errors.Is(err, wal.ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, wal.ErrNoSpace):
		return http.StatusInsufficientStorage
	case errors.Is(err, wal.ErrClosed), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// appendError is the status and message of a failed append; failures of
// the log (5xx) are logged.
func (in *ingest) appendError(err error, client string) (int, string) {
	code := appendStatus(err)
	var msg string
	switch {
	case code == http.StatusRequestEntityTooLarge:
		msg = err.Error() + "; nothing written"
	case code == http.StatusInsufficientStorage:
		msg = "the log's device is full; nothing written, reads go on: " + err.Error()
	case errors.Is(err, wal.ErrClosed):
		msg = "the ingest log is closed (the node is stopping); nothing written"
	case code == http.StatusServiceUnavailable:
		msg = "the request ended while its records waited for the fsync; they may be durable or not: " + err.Error()
	default:
		msg = "the log failed; nothing written: " + err.Error()
	}
	if code >= 500 {
		in.log.WithError(err).Warnf("gateway: ingest from %s: %d", client, code)
	}
	return code, msg
}

func (in *ingest) stats(w http.ResponseWriter, _ *http.Request) {
	st := in.l.Stats()
	out := IngestStats{Dir: in.l.Dir(), Start: st.Start, End: st.End, Written: st.Written, Segments: st.Segments,
		Bytes: st.Bytes, Readers: in.l.Readers(), Appends: st.Appends, Records: st.Records, Syncs: st.Syncs,
		DeletedSegments: st.Deleted}
	if out.Readers == nil {
		out.Readers = map[string]uint64{}
	}
	if rec := in.l.Recovered(); rec != (wal.Recovery{}) {
		out.Recovered = &IngestRecovery{Segment: rec.Segment, Offset: rec.Offset, Pos: rec.Pos, TruncatedBytes: rec.TruncatedBytes}
		if rec.Reason != nil {
			out.Recovered.Reason = rec.Reason.Error()
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (in *ingest) ws(w http.ResponseWriter, r *http.Request) {
	var parse parser
	switch b := r.URL.Query().Get("batch"); b {
	case "":
		parse = parseVerbatim
	case "json":
		parse = parseJSON
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("batch %q: want json, or none (a message is one record)", b))
		return
	}
	if in.conns.Add(1) > MaxIngestConns {
		in.conns.Add(-1)
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("ingest: %d WebSocket connections already", MaxIngestConns))
		return
	}
	defer in.conns.Add(-1)
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept answered the client
	}
	defer c.CloseNow()
	c.SetReadLimit(MaxIngestMessage)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() { // the gateway's shutdown ends the connection, which Shutdown does not
		select {
		case <-in.closing:
			_ = c.Close(websocket.StatusGoingAway, "the gateway is shutting down")
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		typ, msg, err := in.read(ctx, c)
		if err != nil {
			return // the client closed, it was idle (closed with 1008), or the message was too big (1009)
		}
		if typ != websocket.MessageText {
			_ = c.Close(websocket.StatusUnsupportedData, "binary message: send records as text messages")
			return
		}
		var answer any
		recs, berr := validRecords(msg, parse)
		switch {
		case berr != nil:
			answer = IngestError{Error: berr.msg + "; nothing written", Status: berr.code}
		default:
			first, aerr := in.l.Append(ctx, recs)
			switch {
			case errors.Is(aerr, wal.ErrClosed):
				_ = c.Close(websocket.StatusGoingAway, "the ingest log is closed: the node is stopping")
				return
			case aerr != nil:
				code, msg := in.appendError(aerr, r.RemoteAddr)
				answer = IngestError{Error: msg, Status: code}
			default:
				answer = IngestAnswer{First: first, Count: len(recs)}
			}
		}
		b, _ := json.Marshal(answer)
		wctx, cancel := context.WithTimeout(ctx, writeTimeout)
		err = c.Write(wctx, websocket.MessageText, b)
		cancel()
		if err != nil {
			in.log.Infof("gateway: dropping WebSocket ingest client %s: %v", r.RemoteAddr, err)
			return
		}
	}
}

// read reads the next message, closing c with 1008 when none comes within
// in.idle. The timer runs only while the gateway waits for the client, not
// while it appends and answers. A Read whose ctx expires would close the
// connection too, but with no close frame: the client would not learn why.
func (in *ingest) read(ctx context.Context, c *websocket.Conn) (websocket.MessageType, []byte, error) {
	closed := make(chan struct{})
	idle := time.AfterFunc(in.idle, func() {
		defer close(closed)
		_ = c.Close(websocket.StatusPolicyViolation, fmt.Sprintf("no message for %v: closing an idle connection; reconnect to send", in.idle))
	})
	typ, msg, err := c.Read(ctx)
	if !idle.Stop() { // it fired: wait for the close, whatever Read got
		<-closed
		return 0, nil, fmt.Errorf("ingest: idle for %v: %w", in.idle, net.ErrClosed)
	}
	return typ, msg, err
}

// parseVerbatim: the message is one record.
func parseVerbatim(msg []byte) ([][]byte, *badInput) {
	if len(msg) == 0 {
		return nil, bad(http.StatusBadRequest, "empty record")
	}
	return [][]byte{msg}, nil
}
