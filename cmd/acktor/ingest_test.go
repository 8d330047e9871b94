package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/acktor/acktor/gateway"
	"github.com/acktor/acktor/internal/testserver"
	"github.com/acktor/acktor/member"
	"github.com/acktor/acktor/wal"
)

func TestIngestConfigErrors(t *testing.T) {
	const cl = "cluster:\n  automanaged:\n    port: 7000\n    peers: [127.0.0.1:7000]\n"
	const gw = "gateway:\n  address: 127.0.0.1:0\n"
	const job = "job:\n  driver: true\n  source: ingest\n"
	const ing = "ingest:\n  dir: /nonexistent/acktor-ingest\n"
	for _, tc := range []struct {
		name, text, want string
	}{
		{"sync", cl + gw + job + ing + "  sync: sometimes\n", `ingest.sync "sometimes": want every or grouped`},
		{"group without grouped", cl + gw + job + ing + "  group: 5ms\n", "ingest.group 5ms: only with ingest.sync: grouped"},
		{"group too long", cl + gw + job + ing + "  sync: grouped\n  group: 2s\n", "ingest.group 2s: want 0 (2ms) to 1s"},
		{"group negative", cl + gw + job + ing + "  sync: grouped\n  group: -1ms\n", "ingest.group -1ms"},
		{"segment", cl + gw + job + ing + "  segment_bytes: 100\n", "ingest.segment_bytes 100: want 4096 to"},
		{"record over segment", cl + gw + job + ing + "  segment_bytes: 4096\n  max_record_bytes: 4090\n", "ingest.max_record_bytes 4090: want 1 to ingest.segment_bytes - 16 (4080)"},
		{"record over body", cl + gw + job + ing + "  max_record_bytes: 9000000\n", "ingest.max_record_bytes 9000000: want at most 8388608"},
		{"record negative", cl + gw + job + ing + "  max_record_bytes: -1\n", "ingest.max_record_bytes -1"},
		{"retention bytes", cl + gw + job + ing + "  retention_bytes: -1\n", "ingest.retention_bytes -1"},
		{"retention age", cl + gw + job + ing + "  retention_age: -1h\n", "ingest.retention_age -1h0m0s"},
		{"fields without dir", cl + gw + "job:\n  input: in.txt\ningest:\n  sync: grouped\n", "ingest.dir: empty, but other ingest fields are set"},
		{"no gateway", cl + job + ing, "ingest.dir: set, but gateway.address is empty"},
		{"no gateway, file job", cl + "job:\n  input: in.txt\n" + ing, "ingest.dir: set, but gateway.address is empty"},
		{"source", cl + gw + "job:\n  source: kafka9\n  input: in.txt\n", `job.source "kafka9": want file (job.input), generator (job.lines), ingest (the ingest log), kafka`},
		{"source without dir", cl + gw + job, "job.source ingest: ingest.dir is empty"},
		{"input and ingest", cl + gw + job + "  input: in.txt\n" + ing, `job.input "in.txt": set, but job.source is ingest`},
		{"not the driver", cl + gw + "job:\n  source: ingest\n" + ing, "job.source ingest: job.driver is false"},
		{"members", cl + gw + job + "  members: 2\n" + ing, "job.members 2: want 1 with job.source ingest"},
		{"spouts", cl + gw + job + "  spouts: 2\n" + ing, "job.spouts 2: want 1 with job.source ingest"},
		{"unknown field", cl + gw + job + ing + "  fsync: always\n", "ingest.fsync: no such key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "node.yaml", tc.text)
			err := acktor(t, "node", "--config", path)
			var ee *exitError
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &ee) || ee.code != 2 {
				t.Fatalf("error %v, want exit 2 mentioning %q", err, tc.want)
			}
		})
	}
}

// ingestSegment is the test log's segment size: small, so that the log
// has several segments and deletes the finished ones.
const ingestSegment = 16 << 10

// writeIngestConfig writes the config of a single driver node with an
// ingest log in dir/log, and returns its path and gateway URL.
func writeIngestConfig(t *testing.T, dir string, exactlyOnce bool) (string, string) {
	ports := testserver.FreePorts(t, 3)
	cfg := fmt.Sprintf(`cluster:
  name: ingest
  host: 127.0.0.1
  port: %d
  provider: automanaged
  automanaged:
    port: %d
    peers: [127.0.0.1:%d]
    refresh: 500ms
tracker:
  timeout: 2s
  progress: log
job:
  driver: true
  source: ingest
  output: %s
  stats: %s
  exactly_once: %v
ingest:
  dir: %s
  sync: grouped
  group: 2ms
  segment_bytes: %d
gateway:
  address: 127.0.0.1:%d
`, ports[0], ports[1], ports[1], filepath.Join(dir, "out.tsv"), filepath.Join(dir, "stats.json"), exactlyOnce,
		filepath.Join(dir, "log"), ingestSegment, ports[2])
	path := filepath.Join(dir, "node.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, fmt.Sprintf("http://127.0.0.1:%d", ports[2])
}

// ingestStats asks the node's gateway for its log's stats.
func ingestStats(url string) (gateway.IngestStats, error) {
	var st gateway.IngestStats
	c := http.Client{Timeout: 2 * time.Second}
	res, err := c.Get(url + "/api/ingest")
	if err != nil {
		return st, err
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		return st, fmt.Errorf("GET /api/ingest: %s", res.Status)
	}
	return st, json.NewDecoder(res.Body).Decode(&st)
}

// waitIngest polls the node's log stats until ok says so.
func waitIngest(t *testing.T, url, what, logPath string, ok func(gateway.IngestStats) bool) gateway.IngestStats {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		st, err := ingestStats(url)
		if err == nil && ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("%s: not after 15 s (last: %+v, %v); the node's log:\n%s", what, st, err, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ingestClients post unique words ("w000123", one record each) from a few
// goroutines, each with its own content type, and keep what the node
// answered.
type ingestClients struct {
	url   string
	next  atomic.Int64
	stop  atomic.Bool
	wg    sync.WaitGroup
	mu    sync.Mutex
	acked map[uint64]string   // offset → word, of the records that got a 200
	sent  map[string]struct{} // every word sent, answered or not
	fails []string            // answers other than 200 (connection errors are not answers)
}

func newIngestClients(url string) *ingestClients {
	return &ingestClients{url: url, acked: map[uint64]string{}, sent: map[string]struct{}{}}
}

func (c *ingestClients) ackedCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.acked)
}

// post sends one request of words and records the answer.
func (c *ingestClients) post(client *http.Client, kind int, words []string) error {
	var ct, body string
	switch kind % 3 {
	case 0:
		ct, body = "text/plain", strings.Join(words, "\n")+"\n"
	case 1:
		ct, body = "application/x-ndjson", `"`+strings.Join(words, "\"\n\"")+`"`
	default:
		ct, body = "application/json", `["`+strings.Join(words, `","`)+`"]`
	}
	c.mu.Lock()
	for _, w := range words {
		c.sent[w] = struct{}{}
	}
	c.mu.Unlock()
	res, err := client.Post(c.url+"/api/ingest", ct, strings.NewReader(body))
	if err != nil {
		return err // no answer: those words may be in the log or not
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	var a gateway.IngestAnswer
	c.mu.Lock()
	defer c.mu.Unlock()
	if res.StatusCode != 200 || json.Unmarshal(b, &a) != nil || a.Count != len(words) {
		c.fails = append(c.fails, fmt.Sprintf("%s %s: %s", ct, res.Status, b))
		return nil
	}
	for i, w := range words {
		c.acked[a.First+uint64(i)] = w
	}
	return nil
}

// run posts from n goroutines until stopped or the node goes away.
func (c *ingestClients) run(n int) {
	for g := range n {
		c.wg.Go(func() {
			client := &http.Client{Timeout: 5 * time.Second}
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for !c.stop.Load() {
				words := make([]string, 1+rng.IntN(4))
				for i := range words {
					words[i] = fmt.Sprintf("w%06d", c.next.Add(1))
				}
				if c.post(client, g, words) != nil {
					return // the node is gone
				}
			}
		})
	}
}

// TestIngestKill9 kill -9s a node while clients post records to its
// ingest log, and restarts it on the same log: every record that got a
// 200 is in the log at its offset, whole; nothing else is but whole
// records that were sent; a torn tail (made by hand, since a kill -9 of a
// process rarely leaves one) is truncated with a warning; the restarted
// node reads the log from the offset committed before the crash to its
// end, counts every record there (once, with job.exactly_once) and none
// before it, commits the end and exits cleanly on SIGTERM.
//
// What the killed process counted is lost with it (its counts were in
// memory): "processed at least once" is about the log and the tracker —
// every acknowledged record is read until a run finishes it — and
// "exactly once" is within one process's output.
func TestIngestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes")
	}
	for _, exactlyOnce := range []bool{false, true} {
		t.Run(fmt.Sprintf("exactly_once=%v", exactlyOnce), func(t *testing.T) { ingestKill9(t, exactlyOnce) })
	}
}

func ingestKill9(t *testing.T, exactlyOnce bool) {
	dir := t.TempDir()
	logDir := filepath.Join(dir, "log")
	path, url := writeIngestConfig(t, dir, exactlyOnce)

	// 1. Clients post while the node runs; kill -9 it mid-stream, once the
	// spout has committed some of the log and it has a few segments.
	node, _ := startNode(t, path)
	waitIngest(t, url, "the node's gateway", path+".log", func(gateway.IngestStats) bool { return true })
	clients := newIngestClients(url)
	clients.run(3)
	waitIngest(t, url, "records acknowledged and committed", path+".log", func(st gateway.IngestStats) bool {
		return clients.ackedCount() >= 1500 && st.Readers[member.IngestReader] > 0
	})
	if err := node.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = node.Wait()
	clients.stop.Store(true)
	clients.wg.Wait()
	if len(clients.fails) > 0 {
		t.Fatalf("answers other than 200 before the kill: %q", clients.fails[:min(5, len(clients.fails))])
	}

	// 2. The log as the crash left it: every acknowledged record at its
	// offset, every record one that was sent, whole, and only once.
	l, err := wal.Open(logDir, wal.Options{SegmentBytes: ingestSegment, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	checkLog(t, l, clients)
	committed, _ := l.Committed(member.IngestReader)
	end := l.End()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed with %d records acknowledged (%d sent); log end %d, committed %d", len(clients.acked), len(clients.sent), end, committed)

	// 3. A torn tail: the first half of a frame, as a write cut short by a
	// power loss would leave it.
	torn := wal.AppendFrame(nil, time.Now().UnixNano(), []byte("w999999"))
	torn = torn[:len(torn)/2]
	segs, _ := filepath.Glob(filepath.Join(logDir, "*.log"))
	slices.Sort(segs)
	last := segs[len(segs)-1]
	f, err := os.OpenFile(last, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(torn); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()

	// 4. Restart on the same log: the torn tail is truncated with a
	// warning, appends go on at the end, the spout catches up.
	path2 := filepath.Join(dir, "node2.yaml")
	if b, err := os.ReadFile(path); err != nil || os.WriteFile(path2, b, 0o644) != nil {
		t.Fatal(err)
	}
	node, _ = startNode(t, path2)
	st := waitIngest(t, url, "the restarted node's gateway", path2+".log", func(gateway.IngestStats) bool { return true })
	rec := st.Recovered
	if rec == nil || rec.Segment != last || rec.Offset != end || rec.TruncatedBytes != int64(len(torn)) || st.End != end {
		t.Fatalf("after the restart: %+v, recovered %+v; want the %d torn bytes at offset %d of %s truncated", st, rec, len(torn), end, last)
	}
	clients = &ingestClients{url: url, acked: clients.acked, sent: clients.sent}
	client := &http.Client{Timeout: 5 * time.Second}
	for i := range 3 {
		if err := clients.post(client, i, []string{fmt.Sprintf("x%06d", 2*i), fmt.Sprintf("x%06d", 2*i+1)}); err != nil || len(clients.fails) > 0 {
			t.Fatalf("POST after the restart: %v %q", err, clients.fails)
		}
	}
	final := waitIngest(t, url, "the restarted node's spout committing the end", path2+".log", func(st gateway.IngestStats) bool {
		return st.End == end+6 && st.Readers[member.IngestReader] == st.End
	})
	if final.Start == 0 { // over two segments' worth of records, all committed
		t.Fatalf("no segment deleted although the reader committed the end: %+v", final)
	}
	nodeLog, _ := os.ReadFile(path2 + ".log")
	if !strings.Contains(string(nodeLog), "level=warning msg=\"ingest: truncated a torn tail of "+fmt.Sprint(len(torn))+" bytes at offset "+fmt.Sprint(end)) {
		t.Fatalf("no warning of the torn tail in the node's log:\n%s", nodeLog)
	}

	// 5. SIGTERM: the node finishes, commits and writes what it counted.
	if err := node.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- node.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			b, _ := os.ReadFile(path2 + ".log")
			t.Fatalf("the node exited with %v after SIGTERM:\n%s", err, b)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the node did not exit 15 s after SIGTERM")
	}

	l, err = wal.Open(logDir, wal.Options{SegmentBytes: ingestSegment, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if rec := l.Recovered(); rec != (wal.Recovery{}) {
		t.Fatalf("the log was not closed cleanly: %+v", rec)
	}
	inLog := checkLog(t, l, clients)
	if c, _ := l.Committed(member.IngestReader); c != l.End() || l.End() != end+6 {
		t.Fatalf("committed %d, end %d, want both %d", c, l.End(), end+6)
	}
	// The restarted process counted the records from the offset committed
	// before the crash to the end (the acknowledged ones, and those sent
	// unanswered that made it into the log), and no others.
	counts := readCounts(t, dir)
	for off, w := range clients.acked {
		inLog[w] = off // those deleted from the log too
	}
	if uint64(len(counts)) != end+6-committed {
		t.Fatalf("%d words counted, want the %d records from offset %d to %d", len(counts), end+6-committed, committed, end+6)
	}
	for w, off := range inLog {
		n := counts[w]
		switch {
		case off < committed && n != 0:
			t.Fatalf("%s at offset %d, before the committed offset %d, counted again (%d)", w, off, committed, n)
		case off >= committed && n < 1:
			t.Fatalf("%s at offset %d (committed %d) not counted", w, off, committed)
		case off >= committed && exactlyOnce && n != 1:
			t.Fatalf("%s at offset %d counted %d times with exactly_once", w, off, n)
		}
	}
	stats, b := readNodeStats(t, dir)
	if stats.Roots != end+6-committed || stats.Completed != stats.Roots || stats.DeadLettered != 0 {
		t.Fatalf("stats %s; want %d roots, the records from %d to %d", b, end+6-committed, committed, end+6)
	}
	t.Logf("restarted: read %d records from offset %d, %d replays", stats.Roots, committed, stats.Replayed)
}

// checkLog checks l against what the clients sent: every acknowledged
// record still kept is at its offset; every record is a whole word that
// was sent, and none is there twice; acknowledged records deleted from the
// log were before the reader's committed offset (retention by reader).
func checkLog(t *testing.T, l *wal.Log, c *ingestClients) map[string]uint64 {
	t.Helper()
	start, end := l.Start(), l.End()
	committed, _ := l.Committed(member.IngestReader)
	seen := map[string]uint64{}
	for off := start; off < end; {
		recs, err := l.Read(off, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			w := string(r.Payload)
			if _, ok := c.sent[w]; !ok {
				t.Fatalf("offset %d: %q was never sent", r.Offset, w)
			}
			if prev, ok := seen[w]; ok {
				t.Fatalf("%s at offsets %d and %d", w, prev, r.Offset)
			}
			seen[w] = r.Offset
			off = r.Offset + 1
		}
	}
	for off, w := range c.acked {
		switch {
		case off >= end:
			t.Fatalf("%s acknowledged at offset %d, but the log ends at %d", w, off, end)
		case off < start && off >= committed:
			t.Fatalf("%s acknowledged at offset %d deleted, but the reader committed only %d", w, off, committed)
		case off >= start && seen[w] != off:
			t.Fatalf("%s acknowledged at offset %d, found at %d", w, off, seen[w])
		}
	}
	return seen
}
