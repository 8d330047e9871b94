package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/acktor/acktor/internal/testserver"
	"github.com/acktor/acktor/source"
)

// jsServer is an embedded nats-server with JetStream and one stream "S" on
// the subjects "s.>", with a client connection for the test's own use.
type jsServer struct {
	srv     *server.Server // nil for the system's nats-server
	url     string
	stopSrv func()
	nc      *nats.Conn
	js      jetstream.JetStream
}

// startJetStream starts an embedded server on a random port of 127.0.0.1.
// The caller defers stop, so that it runs before goleak.VerifyNone.
func startJetStream(tb testing.TB) *jsServer {
	tb.Helper()
	srv, stop := testserver.JetStream(tb)
	return connectJetStream(tb, &jsServer{srv: srv, url: srv.ClientURL(), stopSrv: stop})
}

// startSystemJetStream is startJetStream on the system's nats-server, the
// version users install (Debian's 2.9), which the test starts and stops.
func startSystemJetStream(tb testing.TB) *jsServer {
	tb.Helper()
	return connectJetStream(tb, &jsServer{url: testserver.NatsServer(tb), stopSrv: func() {}})
}

// connectJetStream connects to s and makes its stream "S".
func connectJetStream(tb testing.TB, s *jsServer) *jsServer {
	tb.Helper()
	var err error
	if s.nc, err = nats.Connect(s.url); err != nil {
		s.stop()
		tb.Fatal(err)
	}
	if s.js, err = jetstream.New(s.nc); err != nil {
		s.stop()
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"},
		Storage: jetstream.MemoryStorage}); err != nil {
		s.stop()
		tb.Fatal(err)
	}
	return s
}

func (s *jsServer) stop() {
	if s.nc != nil {
		s.nc.Close()
	}
	s.stopSrv()
}

// publish stores the payloads on subject s.x in order (sequences 1, 2, ...
// on a fresh stream).
func (s *jsServer) publish(tb testing.TB, payloads ...string) {
	tb.Helper()
	for _, p := range payloads {
		if _, err := s.js.PublishAsync("s.x", []byte(p)); err != nil {
			tb.Fatal(err)
		}
	}
	select {
	case <-s.js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		tb.Fatal("publishing took more than 30s")
	}
}

// consumer returns the info of the durable consumer name.
func (s *jsServer) consumer(tb testing.TB, name string) *jetstream.ConsumerInfo {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := s.js.Consumer(ctx, "S", name)
	if err != nil {
		tb.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return info
}

// config is a source configuration for consumer "C" of the server.
func (s *jsServer) config() Config {
	return Config{URL: s.url, Stream: "S", Consumer: "C", StopAtEnd: true}
}

func openJS(tb testing.TB, cfg Config, task, tasks int) *jetStreamSource {
	tb.Helper()
	src, err := New(cfg)(task, tasks)
	if err != nil {
		tb.Fatal(err)
	}
	return src.(*jetStreamSource)
}

func numberedPayloads(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("m%d", i+1)
	}
	return out
}

// TestJetStreamDeliversOnceAndAcks: every message is delivered once, to one
// of the tasks sharing the consumer, as a root numbered by its stream
// sequence; Done acks it, so nothing is pending or redelivered and every
// task reaches EOF.
func TestJetStreamDeliversOnceAndAcks(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tasks, n int
		fetch    int
	}{
		{"one task", 1, 300, 0},
		{"small pulls", 1, 300, 5},
		{"two tasks share the consumer", 2, 500, 16},
		{"empty stream", 2, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			s := startJetStream(t)
			defer s.stop()
			payloads := numberedPayloads(tc.n)
			start := time.Now()
			s.publish(t, payloads...)
			cfg := s.config()
			cfg.Fetch = tc.fetch
			srcs := make([]*jetStreamSource, tc.tasks)
			for i := range srcs {
				srcs[i] = openJS(t, cfg, i, tc.tasks)
			}
			got := make([][]uint64, tc.tasks) // stream sequences by task
			seen := map[uint64]bool{}
			eof := make([]bool, tc.tasks)
			deadline := time.Now().Add(10 * time.Second)
			for slices.Contains(eof, false) {
				if time.Now().After(deadline) {
					t.Fatalf("no EOF in 10s; %d of %d delivered", len(seen), tc.n)
				}
				progress := false
				for i, src := range srcs {
					if eof[i] {
						continue
					}
					r, err := src.Next()
					switch {
					case errors.Is(err, source.ErrNotReady):
						continue
					case errors.Is(err, io.EOF):
						eof[i] = true
						continue
					case err != nil:
						t.Fatal(err)
					}
					progress = true
					if seen[r.ID] {
						t.Fatalf("sequence %d delivered twice", r.ID)
					}
					seen[r.ID] = true
					got[i] = append(got[i], r.ID)
					if r.ID < 1 || r.ID > uint64(tc.n) || r.Payload != payloads[r.ID-1] || r.Attempt != 0 {
						t.Fatalf("task %d: root %+v", i, r)
					}
					if r.Time < start.Add(-time.Second).UnixNano() || r.Time > time.Now().UnixNano() {
						t.Fatalf("root %d: time %v, published after %v", r.ID, time.Unix(0, r.Time), start)
					}
					if p, err := src.Replay(r.ID); err != nil || p != r.Payload {
						t.Fatalf("Replay(%d) = %q, %v", r.ID, p, err)
					}
					src.Done(r.ID)
					if _, err := src.Replay(r.ID); !errors.Is(err, source.ErrUnknownRoot) {
						t.Fatalf("Replay(%d) after Done: %v, want ErrUnknownRoot", r.ID, err)
					}
				}
				if !progress {
					time.Sleep(time.Millisecond)
				}
			}
			if len(seen) != tc.n {
				t.Fatalf("%d of %d messages delivered", len(seen), tc.n)
			}
			for i, src := range srcs {
				if src.Total() != -1 {
					t.Errorf("Total() = %d, want -1", src.Total())
				}
				if _, err := src.Next(); !errors.Is(err, io.EOF) {
					t.Errorf("task %d: Next after EOF: %v", i, err)
				}
				if err := src.Close(); err != nil {
					t.Fatal(err)
				}
				if _, err := src.Next(); !errors.Is(err, os.ErrClosed) {
					t.Errorf("Next after Close: %v, want os.ErrClosed", err)
				}
				if err := src.Close(); err != nil {
					t.Errorf("second Close: %v", err)
				}
			}
			if tc.tasks > 1 && tc.n > 0 {
				t.Logf("messages by task: %d, %d", len(got[0]), len(got[1]))
			}
			info := s.consumer(t, "C")
			if info.NumAckPending != 0 || info.NumRedelivered != 0 || info.NumPending != 0 || info.AckFloor.Stream != uint64(tc.n) {
				t.Fatalf("consumer after the run: ack pending %d, redelivered %d, pending %d, ack floor %d",
					info.NumAckPending, info.NumRedelivered, info.NumPending, info.AckFloor.Stream)
			}
			if info.Config.AckPolicy != jetstream.AckExplicitPolicy {
				t.Fatalf("ack policy %v", info.Config.AckPolicy)
			}
		})
	}
}

// nextRoot calls Next until it returns something other than ErrNotReady.
func nextRoot(tb testing.TB, src source.Source, within time.Duration) (source.Root, error) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for {
		r, err := src.Next()
		if !errors.Is(err, source.ErrNotReady) {
			return r, err
		}
		if time.Now().After(deadline) {
			tb.Fatalf("Next stayed ErrNotReady for %v", within)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestJetStreamRedeliver: a root told to Redeliver comes back through Next
// one attempt further, after the backoff of the failed attempt; Done after
// Replay (a dead letter) terminates it.
func TestJetStreamRedeliver(t *testing.T) {
	defer goleak.VerifyNone(t)
	s := startJetStream(t)
	defer s.stop()
	s.publish(t, "a", "b", "c")
	var mu sync.Mutex
	var asked []int32
	cfg := s.config()
	cfg.BackoffFunc = func(attempt int32) time.Duration {
		mu.Lock()
		asked = append(asked, attempt)
		mu.Unlock()
		return time.Duration(attempt+1) * 150 * time.Millisecond
	}
	src := openJS(t, cfg, 0, 1)
	defer src.Close()
	term := s.terminations(t)

	for want := uint64(1); want <= 3; want++ {
		r, err := nextRoot(t, src, 5*time.Second)
		if err != nil || r.ID != want || r.Attempt != 0 {
			t.Fatalf("Next() = %+v, %v; want sequence %d, attempt 0", r, err, want)
		}
	}
	src.Done(1)
	src.Done(3)
	for attempt := int32(0); attempt < 2; attempt++ {
		naked := time.Now()
		if err := src.Redeliver(2, attempt); err != nil {
			t.Fatal(err)
		}
		if _, err := src.Replay(2); !errors.Is(err, source.ErrUnknownRoot) {
			t.Fatalf("Replay of a redelivered root: %v, want ErrUnknownRoot", err)
		}
		r, err := nextRoot(t, src, 5*time.Second)
		if err != nil || r.ID != 2 || r.Payload != "b" || r.Attempt != attempt+1 {
			t.Fatalf("Next() = %+v, %v; want sequence 2 again at attempt %d", r, err, attempt+1)
		}
		if back, delay := time.Since(naked), time.Duration(attempt+1)*150*time.Millisecond; back < delay-20*time.Millisecond {
			t.Fatalf("attempt %d came back after %v, before its backoff %v", attempt+1, back, delay)
		}
	}
	mu.Lock()
	if fmt.Sprint(asked) != "[0 1]" {
		t.Fatalf("backoff asked for attempts %v", asked)
	}
	mu.Unlock()
	if err := src.Redeliver(99, 0); !errors.Is(err, source.ErrUnknownRoot) {
		t.Fatalf("Redeliver of an unknown root: %v, want ErrUnknownRoot", err)
	}
	// Out of replays: the spout fetches the payload for its dead letter, then
	// says Done; the message is terminated.
	if p, err := src.Replay(2); err != nil || p != "b" {
		t.Fatalf("Replay(2) = %q, %v", p, err)
	}
	src.Done(2)
	if got := term.wait(t, 1); fmt.Sprint(got) != "[2]" {
		t.Fatalf("terminated %v, want [2]", got)
	}
	if _, err := nextRoot(t, src, 5*time.Second); !errors.Is(err, io.EOF) {
		t.Fatalf("Next at the end: %v, want io.EOF", err)
	}
	if info := s.consumer(t, "C"); info.NumAckPending != 0 || info.AckFloor.Stream != 3 {
		t.Fatalf("consumer: ack pending %d, ack floor %d", info.NumAckPending, info.AckFloor.Stream)
	}
}

// terminated collects the stream sequences of the server's "message
// terminated" advisories for consumer "C".
type terminated struct {
	mu   sync.Mutex
	seqs []uint64
	sub  *nats.Subscription
}

func (s *jsServer) terminations(tb testing.TB) *terminated {
	tb.Helper()
	tm := &terminated{}
	sub, err := s.nc.Subscribe("$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.S.C", func(m *nats.Msg) {
		var adv struct {
			StreamSeq uint64 `json:"stream_seq"`
		}
		if json.Unmarshal(m.Data, &adv) == nil {
			tm.mu.Lock()
			tm.seqs = append(tm.seqs, adv.StreamSeq)
			tm.mu.Unlock()
		}
	})
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.nc.Flush(); err != nil {
		tb.Fatal(err)
	}
	tm.sub = sub
	return tm
}

// wait returns the sequences once there are n of them, sorted.
func (tm *terminated) wait(tb testing.TB, n int) []uint64 {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		tm.mu.Lock()
		got := slices.Clone(tm.seqs)
		tm.mu.Unlock()
		if len(got) >= n {
			slices.Sort(got)
			return got
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d terminations in 5s, want %d", len(got), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestJetStreamInProgress: messages held far longer than AckWait are not
// redelivered, whether handed out, buffered, or left with the client library
// while the read-ahead is full: the source tells the server they are in
// progress.
func TestJetStreamInProgress(t *testing.T) {
	for _, tc := range []struct {
		name        string
		n, take     int
		fetch       int
		maxBuffered int
	}{
		{"a long tree and a buffered message", 2, 1, 0, 1},
		{"the read-ahead full", 30, 0, 4, 12}, // 8 ahead, up to 4 more drained from the library
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			s := startJetStream(t)
			defer s.stop()
			s.publish(t, numberedPayloads(tc.n)...)
			cfg := s.config()
			cfg.AckWait, cfg.Fetch = 300*time.Millisecond, tc.fetch
			src := openJS(t, cfg, 0, 1)
			defer src.Close()
			var taken []uint64
			for range tc.take {
				r, err := nextRoot(t, src, 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				taken = append(taken, r.ID)
			}
			for end := time.Now().Add(4 * cfg.AckWait); time.Now().Before(end); {
				if n := len(src.ready); n > tc.maxBuffered {
					t.Fatalf("%d messages buffered, want at most %d", n, tc.maxBuffered)
				}
				time.Sleep(10 * time.Millisecond)
			}
			info := s.consumer(t, "C")
			if info.NumRedelivered != 0 || info.NumAckPending < tc.take+1 {
				t.Fatalf("after 4×AckWait: redelivered %d, ack pending %d", info.NumRedelivered, info.NumAckPending)
			}
			for _, id := range taken {
				src.Done(id)
			}
			seen := map[uint64]bool{}
			for _, id := range taken {
				seen[id] = true
			}
			for {
				r, err := nextRoot(t, src, 5*time.Second)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if seen[r.ID] || r.Attempt != 0 {
					t.Fatalf("root %+v again, or not at attempt 0", r)
				}
				seen[r.ID] = true
				src.Done(r.ID)
			}
			if len(seen) != tc.n {
				t.Fatalf("%d of %d messages delivered", len(seen), tc.n)
			}
			if info := s.consumer(t, "C"); info.NumRedelivered != 0 {
				t.Fatalf("redelivered %d", info.NumRedelivered)
			}
		})
	}
}

// TestJetStreamBadRecord: a message the decoder rejects is a *BadRecord
// naming the stream and sequence; its Done terminates it and the source
// goes on.
func TestJetStreamBadRecord(t *testing.T) {
	for _, tc := range []struct {
		name   string
		decode func([]byte) (string, error)
		bad    string
		reason string
	}{
		{"not UTF-8", nil, "caf\xe9", "stream S sequence 2: payload is not valid UTF-8"},
		{"custom decoder", func(b []byte) (string, error) {
			if strings.HasPrefix(string(b), "{") {
				return "", errors.New("want no JSON")
			}
			return strings.ToUpper(string(b)), nil
		}, `{"a":1}`, "stream S sequence 2: want no JSON"},
		{"panicking decoder", func(b []byte) (string, error) {
			if string(b) == "boom" {
				panic("boom")
			}
			return strings.ToUpper(string(b)), nil
		}, "boom", "stream S sequence 2: decoder panicked: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			s := startJetStream(t)
			defer s.stop()
			s.publish(t, "one", tc.bad, "three")
			cfg := s.config()
			cfg.Decode = tc.decode
			src := openJS(t, cfg, 0, 1)
			defer src.Close()
			term := s.terminations(t)
			var payloads []string
			for {
				r, err := nextRoot(t, src, 5*time.Second)
				var bad *source.BadRecord
				switch {
				case errors.Is(err, io.EOF):
				case errors.As(err, &bad):
					if bad.ID != 2 || bad.Payload != tc.bad || bad.Reason != tc.reason {
						t.Fatalf("bad record %+v, want ID 2, payload %q, reason %q", bad, tc.bad, tc.reason)
					}
					src.Done(bad.ID) // as the spout does after the dead letter
					continue
				case err != nil:
					t.Fatal(err)
				default:
					payloads = append(payloads, r.Payload)
					src.Done(r.ID)
					continue
				}
				break
			}
			if want := "[one three]"; tc.decode != nil {
				want = "[ONE THREE]"
				if fmt.Sprint(payloads) != want {
					t.Fatalf("payloads %v, want %s", payloads, want)
				}
			} else if fmt.Sprint(payloads) != want {
				t.Fatalf("payloads %v, want %s", payloads, want)
			}
			if got := term.wait(t, 1); fmt.Sprint(got) != "[2]" {
				t.Fatalf("terminated %v, want [2]", got)
			}
		})
	}
}

// TestJetStreamCrashAndReopen: a source closed with messages handed out and
// not acked, and others fetched but not handed out, is opened again: exactly
// the unacked messages come back, the handed-out ones after AckWait.
func TestJetStreamCrashAndReopen(t *testing.T) {
	defer goleak.VerifyNone(t)
	s := startJetStream(t)
	defer s.stop()
	s.publish(t, numberedPayloads(10)...)
	cfg := s.config()
	cfg.AckWait = 400 * time.Millisecond
	cfg.Fetch = 4 // reads 8 ahead
	src := openJS(t, cfg, 0, 1)
	for want := uint64(1); want <= 5; want++ {
		r, err := nextRoot(t, src, 5*time.Second)
		if err != nil || r.ID != want {
			t.Fatalf("Next() = %+v, %v; want sequence %d", r, err, want)
		}
	}
	for _, id := range []uint64{1, 3, 5} {
		src.Done(id)
	}
	for deadline := time.Now().Add(5 * time.Second); len(src.ready) < 5; { // 6..10 fetched
		if time.Now().After(deadline) {
			t.Fatalf("%d messages buffered, want 5", len(src.ready))
		}
		time.Sleep(time.Millisecond)
	}
	closed := time.Now()
	if err := src.Close(); err != nil { // 2 and 4 handed out and never acked
		t.Fatal(err)
	}

	src = openJS(t, cfg, 0, 1)
	defer src.Close()
	back := map[uint64]time.Duration{}
	for {
		r, err := nextRoot(t, src, 5*time.Second)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, dup := back[r.ID]; dup || r.Attempt != 1 {
			t.Fatalf("root %+v: again, or not at attempt 1", r)
		}
		back[r.ID] = time.Since(closed)
		src.Done(r.ID)
	}
	var ids []uint64
	for id := range back {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if fmt.Sprint(ids) != "[2 4 6 7 8 9 10]" {
		t.Fatalf("came back: %v, want [2 4 6 7 8 9 10]", ids)
	}
	for _, id := range []uint64{2, 4} {
		if back[id] < cfg.AckWait/2 { // delivered before the close, so due at AckWait after
			t.Errorf("unacked sequence %d back %v after the close; want about AckWait %v", id, back[id], cfg.AckWait)
		}
	}
}

// TestJetStreamConfigErrors: each invalid field is named; a missing stream
// or server is an error of the factory.
func TestJetStreamConfigErrors(t *testing.T) {
	defer goleak.VerifyNone(t)
	s := startJetStream(t)
	defer s.stop()
	good := s.config()
	for _, tc := range []struct {
		name        string
		edit        func(*Config)
		task, tasks int
		want        string
	}{
		{"no URL", func(c *Config) { c.URL = "" }, 0, 1, "URL is empty"},
		{"no stream", func(c *Config) { c.Stream = "" }, 0, 1, "Stream is empty"},
		{"stream with a dot", func(c *Config) { c.Stream = "a.b" }, 0, 1, `Stream is "a.b"`},
		{"no consumer", func(c *Config) { c.Consumer = "" }, 0, 1, "Consumer is empty"},
		{"consumer with a wildcard", func(c *Config) { c.Consumer = "c*" }, 0, 1, `Consumer is "c*"`},
		{"negative ack wait", func(c *Config) { c.AckWait = -time.Second }, 0, 1, "AckWait is -1s"},
		{"tiny ack wait", func(c *Config) { c.AckWait = time.Millisecond }, 0, 1, "AckWait is 1ms"},
		{"negative max ack pending", func(c *Config) { c.MaxAckPending = -1 }, 0, 1, "MaxAckPending is -1"},
		{"negative fetch", func(c *Config) { c.Fetch = -1 }, 0, 1, "Fetch is -1"},
		{"huge fetch", func(c *Config) { c.Fetch = 1 << 20 }, 0, 1, "Fetch is 1048576"},
		{"negative backoff", func(c *Config) { c.Backoff = []time.Duration{time.Second, -1} }, 0, 1, "Backoff[1] is -1ns"},
		{"no tasks", func(*Config) {}, 0, 0, "tasks is 0"},
		{"task out of range", func(*Config) {}, 2, 2, "task is 2"},
		{"unknown stream", func(c *Config) { c.Stream = "NONE" }, 0, 1, "stream NONE"},
		{"no server", func(c *Config) {
			c.URL = "nats://127.0.0.1:1"
			c.Options = []nats.Option{nats.Timeout(time.Second)}
		}, 0, 1, "connecting to nats://127.0.0.1:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.edit(&cfg)
			src, err := New(cfg)(tc.task, tc.tasks)
			if err == nil {
				src.Close()
				t.Fatalf("no error, want one with %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "source: jetstream ") {
				t.Fatalf("error %q, want one starting %q with %q", err, "source: jetstream ", tc.want)
			}
		})
	}
}

// TestJetStreamBackoffDefaults: the list's last delay repeats; no list
// means DefaultBackoff.
func TestJetStreamBackoffDefaults(t *testing.T) {
	for _, tc := range []struct {
		list []time.Duration
		want string
	}{
		{nil, "[1s 5s 30s 30s]"},
		{[]time.Duration{}, "[0s 0s 0s 0s]"},
		{[]time.Duration{time.Millisecond, 2 * time.Millisecond}, "[1ms 2ms 2ms 2ms]"},
	} {
		f := Config{Backoff: tc.list}.withDefaults().BackoffFunc
		if got := fmt.Sprint([]time.Duration{f(0), f(1), f(2), f(9)}); got != tc.want {
			t.Errorf("Backoff %v: delays %s, want %s", tc.list, got, tc.want)
		}
	}
}

// BenchmarkJetStreamSource reads b.N messages of an embedded server through
// one source, calling Done on each, until StopAtEnd's EOF.
func BenchmarkJetStreamSource(b *testing.B) {
	s := startJetStream(b)
	defer s.stop()
	payloads := make([]string, b.N)
	for i := range payloads {
		payloads[i] = fmt.Sprintf("k%d", i%1000)
	}
	s.publish(b, payloads...)
	src := openJS(b, s.config(), 0, 1)
	defer src.Close()
	b.ResetTimer()
	testserver.Drain(b, src, b.N)
}

// The backlog counts the consumer's messages still to come: all of them
// before the first delivery's metadata (or the read-ahead) says otherwise,
// none once every one was handed out.
func TestJetStreamBacklog(t *testing.T) {
	defer goleak.VerifyNone(t)
	s := startJetStream(t)
	defer s.stop()
	s.publish(t, numberedPayloads(50)...)
	src := openJS(t, s.config(), 0, 1)
	defer src.Close()
	var _ source.Backlogger = src
	r, err := nextRoot(t, src, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	src.Done(r.ID)
	if n := src.Backlog(); n != 49 {
		t.Fatalf("backlog %d after one of 50, want 49", n)
	}
	for range 49 {
		r, err := nextRoot(t, src, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		src.Done(r.ID)
	}
	if n := src.Backlog(); n != 0 {
		t.Fatalf("backlog %d after all 50, want 0", n)
	}
}

// TestJetStreamDeadLetterEnds: a dead-lettered message is terminated for
// good, on the embedded server and on the one users install (Debian's
// nats-server 2.9, which ignores a termination that gives a reason: the
// message came back every AckWait, dead-lettered again each time).
func TestJetStreamDeadLetterEnds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(testing.TB) *jsServer
	}{
		{"embedded", startJetStream},
		{"system nats-server", startSystemJetStream},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.start(t)
			defer s.stop()
			s.publish(t, "bad")
			cfg := s.config()
			cfg.StopAtEnd, cfg.AckWait = false, MinAckWait
			src := openJS(t, cfg, 0, 1)
			defer src.Close()
			r, err := nextRoot(t, src, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := src.Replay(r.ID); err != nil { // out of replays: the spout dead-letters it
				t.Fatal(err)
			}
			src.Done(r.ID)
			time.Sleep(10 * MinAckWait)
			if r, err := src.Next(); !errors.Is(err, source.ErrNotReady) {
				t.Fatalf("after the dead letter, Next() = %+v, %v: the message came back", r, err)
			}
			if info := s.consumer(t, "C"); info.NumAckPending != 0 || info.NumRedelivered != 0 {
				t.Fatalf("consumer: %d pending acks, %d redelivered", info.NumAckPending, info.NumRedelivered)
			}
		})
	}
}

func TestVersionAtLeast(t *testing.T) {
	for _, tc := range []struct {
		version string
		want    bool
	}{
		{"2.10.4", true}, {"2.10.3", false}, {"2.9.10", false}, {"2.11.0", true}, {"3.0.0", true},
		{"2.10.4-beta.1", true}, {"2.10.10", true}, {"1.99.99", false}, {"", false}, {"2.10", false}, {"x.y.z", false},
	} {
		if got := versionAtLeast(tc.version, 2, 10, 4); got != tc.want {
			t.Errorf("versionAtLeast(%q, 2.10.4) = %v", tc.version, got)
		}
	}
}
