package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"go.uber.org/goleak"

	"github.com/acktor/acktor/internal/testserver"
	"github.com/acktor/acktor/source"
)

// kafkaEnv is a one-broker fake cluster with a client to produce to it and
// read the groups' committed offsets.
type kafkaEnv struct {
	c  *kfake.Cluster
	cl *kgo.Client
}

// newKafkaEnv starts a cluster whose topics have the given partitions;
// close it before checking for leaks.
func newKafkaEnv(t testing.TB, partitions int32, topics ...string) *kafkaEnv {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxVersions(kversion.V2_8_0())) // OffsetFetch by topic name
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	return &kafkaEnv{c: c, cl: cl}
}

func (e *kafkaEnv) close() {
	e.cl.Close()
	e.c.Close()
}

// produce writes the values to one partition, in order.
func (e *kafkaEnv) produce(t testing.TB, topic string, partition int32, values ...string) {
	t.Helper()
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Topic: topic, Partition: partition, Value: []byte(v)}
	}
	if err := e.cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// fill writes n records "topic/partition/i" to every partition of topic.
func (e *kafkaEnv) fill(t testing.TB, topic string, partitions int32, n int) {
	t.Helper()
	for p := range partitions {
		vals := make([]string, n)
		for i := range vals {
			vals[i] = fmt.Sprintf("%s/%d/%d", topic, p, i)
		}
		e.produce(t, topic, p, vals...)
	}
}

// committed returns the group's committed offset of each partition of topic
// (-1: none).
func (e *kafkaEnv) committed(t testing.TB, group, topic string, partitions int32) []int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), e.cl)
	if err != nil {
		t.Fatal(err)
	}
	out := slices.Repeat([]int64{-1}, int(partitions))
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			out[p.Partition] = p.Offset
		}
	}
	return out
}

// waitCommitted waits until the group's committed offsets are want.
func (e *kafkaEnv) waitCommitted(t testing.TB, group, topic string, want []int64) {
	t.Helper()
	var got []int64
	kafkaWaitFor(t, func() bool {
		got = e.committed(t, group, topic, int32(len(want)))
		return slices.Equal(got, want)
	}, func() string { return fmt.Sprintf("committed offsets %v, want %v", got, want) })
}

// config is a test configuration: fast fetches, heartbeats and commits,
// StopAtEnd.
func (e *kafkaEnv) config(group string, topics ...string) Config {
	return Config{Brokers: e.c.ListenAddrs(), Topics: topics, Group: group, StopAtEnd: true,
		CommitInterval: 20 * time.Millisecond,
		Opts:           []kgo.Opt{kgo.FetchMaxWait(20 * time.Millisecond), kgo.HeartbeatInterval(50 * time.Millisecond)}}
}

func openKafkaTask(t testing.TB, cfg Config, task, tasks int) *kafkaSource {
	t.Helper()
	src, err := New(cfg)(task, tasks)
	if err != nil {
		t.Fatal(err)
	}
	return src.(*kafkaSource)
}

// kafkaWaitFor polls cond for up to 10 seconds.
func kafkaWaitFor(t testing.TB, cond func() bool, what func() string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: %s", what())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// assigned returns the partitions assigned to s, as "topic/partition".
func (s *kafkaSource) assigned() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, p := range s.parts {
		out = append(out, fmt.Sprintf("%s/%d", p.topic, p.partition))
	}
	slices.Sort(out)
	return out
}

// kafkaNext calls Next until it returns something other than ErrNotReady.
func kafkaNext(t testing.TB, src source.Source) (source.Root, error) {
	t.Helper()
	var r source.Root
	var err error
	kafkaWaitFor(t, func() bool {
		r, err = src.Next()
		return !errors.Is(err, source.ErrNotReady)
	}, func() string { return "Next stayed ErrNotReady" })
	return r, err
}

// kafkaTake reads n roots, failing on errors.
func kafkaTake(t testing.TB, src source.Source, n int) []source.Root {
	t.Helper()
	roots := make([]source.Root, 0, n)
	for range n {
		r, err := kafkaNext(t, src)
		if err != nil {
			t.Fatalf("after %d roots: %v", len(roots), err)
		}
		roots = append(roots, r)
	}
	return roots
}

// kafkaDrain reads roots until EOF, calling Done on each.
func kafkaDrain(t testing.TB, src source.Source) []source.Root {
	t.Helper()
	var roots []source.Root
	for {
		r, err := kafkaNext(t, src)
		if errors.Is(err, io.EOF) {
			return roots
		}
		if err != nil {
			t.Fatalf("after %d roots: %v", len(roots), err)
		}
		roots = append(roots, r)
		src.Done(r.ID)
	}
}

// kafkaID is the root ID of a record of the topic of index ti out of n.
func kafkaID(ti, n int, partition int32, offset int64) uint64 {
	partBits := 16
	for 1<<(16-partBits) < n {
		partBits--
	}
	return (uint64(ti)<<partBits|uint64(partition))<<48 | uint64(offset)
}

// kafkaByPayload indexes roots by payload, failing on a duplicate.
func kafkaByPayload(t testing.TB, roots []source.Root) map[string]source.Root {
	t.Helper()
	m := map[string]source.Root{}
	for _, r := range roots {
		if _, dup := m[r.Payload]; dup {
			t.Fatalf("%q delivered twice", r.Payload)
		}
		m[r.Payload] = r
	}
	return m
}

func TestKafkaConfigValidation(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ok := Config{Brokers: []string{"127.0.0.1:1"}, Topics: []string{"t"}, Group: "g"}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no brokers", func(c *Config) { c.Brokers = nil }, "Brokers is empty"},
		{"empty broker", func(c *Config) { c.Brokers = []string{"a:1", ""} }, "Brokers[1] is empty"},
		{"no topics", func(c *Config) { c.Topics = nil }, "Topics is empty"},
		{"empty topic", func(c *Config) { c.Topics = []string{""} }, "Topics[0] is empty"},
		{"repeated topic", func(c *Config) { c.Topics = []string{"a", "b", "a"} }, `Topics[2] "a" repeats Topics[0]`},
		{"too many topics", func(c *Config) {
			c.Topics = nil
			for i := range 257 {
				c.Topics = append(c.Topics, fmt.Sprint(i))
			}
		}, "Topics has 257 topics"},
		{"no group", func(c *Config) { c.Group = "" }, "Group is empty"},
		{"negative buffer", func(c *Config) { c.MaxBuffered = -1 }, "MaxBuffered is -1"},
		{"huge buffer", func(c *Config) { c.MaxBuffered = 1<<20 + 1 }, "MaxBuffered is 1048577"},
		{"negative uncommitted", func(c *Config) { c.MaxUncommitted = -5 }, "MaxUncommitted is -5"},
		{"negative interval", func(c *Config) { c.CommitInterval = -time.Second }, "CommitInterval is -1s"},
		{"tiny interval", func(c *Config) { c.CommitInterval = time.Microsecond }, "CommitInterval is 1µs"},
		{"nil opt", func(c *Config) { c.Opts = []kgo.Opt{nil} }, "Opts[0] is nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok
			tc.edit(&cfg)
			err := cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "source: kafka: ") {
				t.Fatalf("Validate() = %v, want an error with %q", err, tc.want)
			}
			if src, err := New(cfg)(0, 1); err == nil || !strings.Contains(err.Error(), tc.want) {
				if src != nil {
					src.Close()
				}
				t.Fatalf("factory: %v, want an error with %q", err, tc.want)
			}
		})
	}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	if _, err := New(ok)(2, 2); err == nil || !strings.Contains(err.Error(), "task is 2") {
		t.Fatalf("task 2 of 2: %v", err)
	}
}

func TestKafkaMissingTopic(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	e := newKafkaEnv(t, 1, "t")
	defer e.close()
	_, err := New(e.config("g", "t", "nope"))(0, 1)
	if err == nil || !strings.Contains(err.Error(), `topic "nope" does not exist`) {
		t.Fatalf("open = %v, want a missing topic", err)
	}
}

// TestKafkaPartitionsMustFitIDs: with 129 topics a root ID has 8 bits for
// the partition, so a topic of 257 partitions is refused at open.
func TestKafkaPartitionsMustFitIDs(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	topics := []string{"big"}
	for i := range 128 {
		topics = append(topics, fmt.Sprint("small", i))
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(257, "big"), kfake.SeedTopics(1, topics[1:]...))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = New(Config{Brokers: c.ListenAddrs(), Topics: topics, Group: "g"})(0, 1)
	if err == nil || !strings.Contains(err.Error(), `topic "big" has 257 partitions; with 129 topics a root ID fits 256`) {
		t.Fatalf("open = %v", err)
	}
}

// TestKafkaConsumes reads every record once with one and with two group
// members, and commits everything on Close.
func TestKafkaConsumes(t *testing.T) {
	const parts, n = 4, 50
	for _, tc := range []struct {
		name   string
		tasks  int
		topics []string
	}{
		{"one task", 1, []string{"a"}},
		{"two tasks", 2, []string{"a"}},
		{"two topics", 1, []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			e := newKafkaEnv(t, parts, tc.topics...)
			defer e.close()
			for _, topic := range tc.topics {
				e.fill(t, topic, parts, n)
			}
			start := time.Now()
			cfg := e.config("g", tc.topics...)
			srcs := make([]*kafkaSource, tc.tasks)
			for i := range srcs {
				srcs[i] = openKafkaTask(t, cfg, i, tc.tasks)
			}
			if tc.tasks > 1 { // let the group settle, so that every task reads
				kafkaWaitFor(t, func() bool {
					all := 0
					for _, s := range srcs {
						a := len(s.assigned())
						if a == 0 {
							return false
						}
						all += a
					}
					return all == parts
				}, func() string { return fmt.Sprintf("assignments %v, %v", srcs[0].assigned(), srcs[1].assigned()) })
			}
			var roots []source.Root
			got := make([]int, tc.tasks)
			eof := make([]bool, tc.tasks)
			kafkaWaitFor(t, func() bool {
				for i, s := range srcs {
					for !eof[i] {
						r, err := s.Next()
						if errors.Is(err, source.ErrNotReady) {
							break
						}
						if errors.Is(err, io.EOF) {
							eof[i] = true
							break
						}
						if err != nil {
							t.Fatal(err)
						}
						roots = append(roots, r)
						got[i]++
						s.Done(r.ID)
					}
				}
				return !slices.Contains(eof, false)
			}, func() string { return fmt.Sprintf("read %d roots, ended %v", len(roots), eof) })
			m := kafkaByPayload(t, roots)
			if len(m) != len(tc.topics)*parts*n {
				t.Fatalf("read %d roots, want %d", len(m), len(tc.topics)*parts*n)
			}
			for ti, topic := range tc.topics {
				for p := range int32(parts) {
					for i := range int64(n) {
						r := m[fmt.Sprintf("%s/%d/%d", topic, p, i)]
						if want := kafkaID(ti, len(tc.topics), p, i); r.ID != want {
							t.Fatalf("%s/%d/%d: ID %x, want %x", topic, p, i, r.ID, want)
						}
						if r.Time < start.Add(-time.Minute).UnixNano() || r.Time > time.Now().UnixNano() {
							t.Fatalf("%s/%d/%d: time %v, not the record's timestamp", topic, p, i, time.Unix(0, r.Time))
						}
					}
				}
			}
			if tc.tasks > 1 && slices.Contains(got, 0) {
				t.Errorf("roots per task %v: a task read nothing", got)
			}
			for _, s := range srcs {
				if s.Total() != -1 {
					t.Errorf("Total = %d", s.Total())
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				if err := s.Close(); err != nil {
					t.Fatalf("second Close: %v", err)
				}
				if _, err := s.Next(); !errors.Is(err, os.ErrClosed) {
					t.Fatalf("Next after Close = %v", err)
				}
			}
			for _, topic := range tc.topics {
				if got := e.committed(t, "g", topic, parts); !slices.Equal(got, []int64{n, n, n, n}) {
					t.Fatalf("%s: committed %v, want all %d", topic, got, n)
				}
			}
		})
	}
}

// TestKafkaCommitsContiguousPrefix finishes roots out of order: the
// committed offset of each partition is the end of its finished prefix.
func TestKafkaCommitsContiguousPrefix(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const parts, n = 3, 20
	e := newKafkaEnv(t, parts, "t")
	defer e.close()
	e.fill(t, "t", parts, n)
	src := openKafkaTask(t, e.config("g", "t"), 0, 1)
	defer src.Close()
	roots := kafkaTake(t, src, parts*n)
	if _, err := kafkaNext(t, src); !errors.Is(err, io.EOF) {
		t.Fatalf("after every record: %v, want EOF", err)
	}
	held := map[uint64]bool{kafkaID(0, 1, 0, 7): true, kafkaID(0, 1, 0, 12): true, kafkaID(0, 1, 1, 0): true}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(roots), func(i, j int) { roots[i], roots[j] = roots[j], roots[i] })
	for _, r := range roots {
		if !held[r.ID] {
			src.Done(r.ID)
		}
	}
	src.Done(kafkaID(0, 1, 0, 999)) // unknown: ignored
	// Partition 1 has nothing finished before offset 0, so no commit yet.
	e.waitCommitted(t, "g", "t", []int64{7, -1, n})
	src.Done(kafkaID(0, 1, 0, 12))
	src.Done(kafkaID(0, 1, 1, 0))
	e.waitCommitted(t, "g", "t", []int64{7, n, n})
	src.Done(kafkaID(0, 1, 0, 7))
	e.waitCommitted(t, "g", "t", []int64{n, n, n})
}

// TestKafkaReplayDoesNotStall keeps the first record of a partition
// unfinished and replays it while the records after it keep coming; the
// commit waits for it.
func TestKafkaReplayDoesNotStall(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const n = 100
	e := newKafkaEnv(t, 1, "t")
	defer e.close()
	e.fill(t, "t", 1, n)
	src := openKafkaTask(t, e.config("g", "t"), 0, 1)
	defer src.Close()
	first := kafkaTake(t, src, 1)[0]
	for i := range 3 {
		if p, err := src.Replay(first.ID); err != nil || p != "t/0/0" {
			t.Fatalf("replay %d: %q, %v", i, p, err)
		}
		rest := kafkaTake(t, src, (n-1)/3)
		for _, r := range rest {
			src.Done(r.ID)
		}
	}
	rest := kafkaDrain(t, src)
	if len(rest) != (n-1)%3 {
		t.Fatalf("%d roots at the end", len(rest))
	}
	time.Sleep(60 * time.Millisecond) // a few commit intervals
	if got := e.committed(t, "g", "t", 1); got[0] > 0 {
		t.Fatalf("committed %v past the unfinished record 0", got)
	}
	if p, err := src.Replay(first.ID); err != nil || p != "t/0/0" {
		t.Fatalf("replay after the rest: %q, %v", p, err)
	}
	src.Done(first.ID)
	e.waitCommitted(t, "g", "t", []int64{n})
	// A done root has nothing to replay: released, so the spout forgets it
	// without a dead letter (another delivery of the offset finished it).
	if _, err := src.Replay(first.ID); !errors.Is(err, source.ErrReleased) {
		t.Fatalf("replay of a done root: %v", err)
	}
}

// TestKafkaPausesBehindUnfinished: with one record unfinished, a partition
// stops at MaxUncommitted held records (plus the buffer) and goes on once it
// finishes.
func TestKafkaPausesBehindUnfinished(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const n, maxUncommitted, maxBuffered = 300, 20, 10
	e := newKafkaEnv(t, 1, "t")
	defer e.close()
	e.fill(t, "t", 1, n)
	cfg := e.config("g", "t")
	cfg.MaxUncommitted, cfg.MaxBuffered = maxUncommitted, maxBuffered
	src := openKafkaTask(t, cfg, 0, 1)
	defer src.Close()
	first := kafkaTake(t, src, 1)[0]
	read := 1
	for quiet := time.Now(); time.Since(quiet) < 200*time.Millisecond; {
		r, err := src.Next()
		switch {
		case errors.Is(err, source.ErrNotReady):
			time.Sleep(time.Millisecond)
			continue
		case err != nil:
			t.Fatalf("after %d roots: %v", read, err)
		}
		read++
		src.Done(r.ID)
		quiet = time.Now()
	}
	t.Logf("%d roots read behind the unfinished one", read)
	if read < maxUncommitted || read > maxUncommitted+maxBuffered {
		t.Fatalf("read %d roots behind an unfinished one, want %d to %d", read, maxUncommitted, maxUncommitted+maxBuffered)
	}
	src.Done(first.ID)
	if rest := kafkaDrain(t, src); read+len(rest) != n {
		t.Fatalf("read %d + %d roots, want %d", read, len(rest), n)
	}
	e.waitCommitted(t, "g", "t", []int64{n})
}

// TestKafkaRestart closes (or crashes) a member with unfinished roots; a new
// member reads exactly the records from each partition's first unfinished
// one on.
func TestKafkaRestart(t *testing.T) {
	const parts, n = 3, 30
	for _, tc := range []struct {
		name  string
		crash bool
		want  map[int32]int64 // partition -> first offset read again
	}{
		// Offset 29 of partition 1 finishes before Close: it is committed.
		{"close", false, map[int32]int64{0: 5, 2: n}},
		// ... but not if the member dies before committing it.
		{"crash", true, map[int32]int64{0: 5, 1: 29, 2: n}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			e := newKafkaEnv(t, parts, "t")
			defer e.close()
			e.fill(t, "t", parts, n)
			cfg := e.config("g", "t")
			src := openKafkaTask(t, cfg, 0, 1)
			unfinished := map[uint64]bool{kafkaID(0, 1, 0, 5): true, kafkaID(0, 1, 0, 17): true, kafkaID(0, 1, 1, 29): true}
			for _, r := range kafkaTake(t, src, parts*n) {
				if !unfinished[r.ID] {
					src.Done(r.ID)
				}
			}
			e.waitCommitted(t, "g", "t", []int64{5, 29, n})
			src.Done(kafkaID(0, 1, 1, 29))
			if tc.crash {
				src.mu.Lock()
				src.abandon = true
				src.mu.Unlock()
			}
			if err := src.Close(); err != nil {
				t.Fatal(err)
			}

			again := openKafkaTask(t, cfg, 0, 1)
			defer again.Close()
			var want []string
			for p := range int32(parts) {
				from, ok := tc.want[p]
				if !ok {
					from = n
				}
				for i := from; i < n; i++ {
					want = append(want, fmt.Sprintf("t/%d/%d", p, i))
				}
			}
			var got []string
			for _, r := range kafkaDrain(t, again) {
				got = append(got, r.Payload)
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("read again %v,\nwant %v", got, want)
			}
		})
	}
}

// TestKafkaRebalanceReleases: a second member takes a partition from the
// first, which commits its finished prefix and forgets the rest; the new
// owner reads from there.
func TestKafkaRebalanceReleases(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const parts, n, finished = 2, 20, 10
	e := newKafkaEnv(t, parts, "t")
	defer e.close()
	e.fill(t, "t", parts, n)
	cfg := e.config("g", "t")
	a := openKafkaTask(t, cfg, 0, 2)
	defer a.Close()
	for _, r := range kafkaTake(t, a, parts*n) {
		if r.ID&MaxOffset < finished {
			a.Done(r.ID)
		}
	}
	b := openKafkaTask(t, cfg, 1, 2)
	defer b.Close()
	kafkaWaitFor(t, func() bool { return len(a.assigned()) == 1 && len(b.assigned()) == 1 },
		func() string { return fmt.Sprintf("assignments %v, %v", a.assigned(), b.assigned()) })
	lost, kept := int32(0), int32(1)
	if a.assigned()[0] == "t/0" {
		lost, kept = 1, 0
	}
	if _, err := a.Replay(kafkaID(0, 1, lost, 15)); !errors.Is(err, source.ErrReleased) || !strings.Contains(err.Error(), fmt.Sprintf("t/%d offset 15", lost)) {
		t.Fatalf("replay of a revoked partition's root: %v, want ErrReleased", err)
	}
	a.Done(kafkaID(0, 1, lost, 15)) // ignored
	if p, err := a.Replay(kafkaID(0, 1, kept, 15)); err != nil || p != fmt.Sprintf("t/%d/15", kept) {
		t.Fatalf("replay of a kept partition's root: %q, %v", p, err)
	}
	var got []string
	for _, r := range kafkaDrain(t, b) {
		got = append(got, r.Payload)
	}
	var want []string
	for i := finished; i < n; i++ {
		want = append(want, fmt.Sprintf("t/%d/%d", lost, i))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("new owner read %v, want %v", got, want)
	}
}

// TestKafkaBadRecord: an undecodable record is a BadRecord naming where it
// is; once Done, the partition's commit moves past it.
func TestKafkaBadRecord(t *testing.T) {
	for _, tc := range []struct {
		name   string
		decode func(*kgo.Record) (string, error)
		bad    string
		reason string
	}{
		{"not UTF-8", nil, "\xff\xfe", "not valid UTF-8"},
		{"decoder refuses", func(r *kgo.Record) (string, error) {
			if string(r.Value) == "reject" {
				return "", errors.New("rejected")
			}
			return strings.ToUpper(string(r.Value)), nil
		}, "reject", "rejected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			e := newKafkaEnv(t, 1, "t")
			defer e.close()
			e.produce(t, "t", 0, "a", tc.bad, "b")
			cfg := e.config("g", "t")
			cfg.Decode = tc.decode
			src := openKafkaTask(t, cfg, 0, 1)
			defer src.Close()
			r, err := kafkaNext(t, src)
			if err != nil || !strings.EqualFold(r.Payload, "a") {
				t.Fatalf("first: %+v, %v", r, err)
			}
			src.Done(r.ID)
			_, err = kafkaNext(t, src)
			var bad *source.BadRecord
			if !errors.As(err, &bad) || bad.ID != kafkaID(0, 1, 0, 1) || bad.Payload != tc.bad ||
				!strings.Contains(bad.Reason, "t/0 offset 1") || !strings.Contains(bad.Reason, tc.reason) {
				t.Fatalf("second: %v (%+v)", err, bad)
			}
			if _, err := src.Replay(bad.ID); !errors.Is(err, source.ErrUnknownRoot) {
				t.Fatalf("replay of a bad record: %v", err)
			}
			e.waitCommitted(t, "g", "t", []int64{1})
			src.Done(bad.ID)
			rest := kafkaDrain(t, src)
			if len(rest) != 1 || !strings.EqualFold(rest[0].Payload, "b") {
				t.Fatalf("after the bad record: %+v", rest)
			}
			e.waitCommitted(t, "g", "t", []int64{3})
		})
	}
}

// BenchmarkKafkaSource reads b.N records from 4 partitions with one task,
// Next and Done on each, to the end.
func BenchmarkKafkaSource(b *testing.B) {
	const parts = 4
	e := newKafkaEnv(b, parts, "t")
	defer e.close()
	produceKafkaBench(b, e, "t", parts, b.N)
	b.ResetTimer()
	src := openKafkaTask(b, e.config("bench", "t"), 0, 1)
	testserver.Drain(b, src, b.N)
	if err := src.Close(); err != nil { // untimed: it commits and leaves the group
		b.Fatal(err)
	}
}

// produceKafkaBench writes n short words round-robin over the partitions.
func produceKafkaBench(b *testing.B, e *kafkaEnv, topic string, parts, n int) {
	b.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(i % parts), Value: fmt.Appendf(nil, "w%d", i%1000)}
	}
	if err := e.cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
}

// TestKafkaBacklog: the backlog is the records up to each partition's high
// watermark not handed out yet, and grows as more are produced.
func TestKafkaBacklog(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const parts, n = 2, 30
	e := newKafkaEnv(t, parts, "t")
	defer e.close()
	e.fill(t, "t", parts, n)
	cfg := e.config("g", "t")
	cfg.StopAtEnd = false // it would leave what comes after open unread
	src := openKafkaTask(t, cfg, 0, 1)
	defer src.Close()
	var _ source.Backlogger = src
	kafkaTake(t, src, 10)
	kafkaWaitFor(t, func() bool { return src.Backlog() == parts*n-10 },
		func() string {
			return fmt.Sprintf("backlog %d after 10 of %d, want %d", src.Backlog(), parts*n, parts*n-10)
		})
	e.produce(t, "t", 0, "more", "and more")
	kafkaTake(t, src, parts*n-10)
	kafkaWaitFor(t, func() bool { return src.Backlog() == 2 },
		func() string {
			return fmt.Sprintf("backlog %d after every first record, want the 2 produced since", src.Backlog())
		})
}

// kafkaErrors collects what a source's OnError is told.
type kafkaErrors struct {
	mu   sync.Mutex
	errs []error
}

func (k *kafkaErrors) add(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.errs = append(k.errs, err)
}

// commitError returns the first commit error whose message contains want.
func (k *kafkaErrors) commitError(want string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, err := range k.errs {
		if errors.Is(err, ErrCommit) && strings.Contains(err.Error(), want) {
			return err
		}
	}
	return nil
}

func (k *kafkaErrors) String() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return fmt.Sprint(k.errs)
}

// waitCommitError waits until OnError was told of a commit error whose
// message contains want, and checks that it wraps the broker's error.
func (k *kafkaErrors) waitCommitError(t testing.TB, want string, cause error) {
	t.Helper()
	kafkaWaitFor(t, func() bool { return k.commitError(want) != nil },
		func() string { return fmt.Sprintf("no commit error containing %q reached OnError; it got %v", want, k) })
	if err := k.commitError(want); !errors.Is(err, cause) {
		t.Errorf("commit error %q does not wrap %v", err, cause)
	}
}

// failKafkaCommits makes the broker refuse every offset commit, partition
// by partition with the code of cause, until the returned switch is
// cleared: as an ACL that denies the group would.
func failKafkaCommits(c *kfake.Cluster, cause *kerr.Error) *atomic.Bool {
	var fail atomic.Bool
	fail.Store(true)
	c.ControlKey(int16(kmsg.OffsetCommit), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !fail.Load() {
			return nil, nil, false // the broker commits as usual
		}
		req := kreq.(*kmsg.OffsetCommitRequest)
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, cause.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	return &fail
}

// TestKafkaCommitErrorsReported: a commit the broker refuses reaches
// OnError, naming what committed (periodic, revoke, close), the group, the
// partitions and offsets, and wrapping ErrCommit and the broker's
// error; the offsets stay where they were until a commit lands.
func TestKafkaCommitErrorsReported(t *testing.T) {
	const parts, n = 2, 10
	denied := kerr.GroupAuthorizationFailed

	t.Run("periodic", func(t *testing.T) {
		defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
		e := newKafkaEnv(t, parts, "t")
		defer e.close()
		e.fill(t, "t", parts, n)
		fail := failKafkaCommits(e.c, denied)
		var errs kafkaErrors
		cfg := e.config("g", "t")
		cfg.OnError = errs.add
		src := openKafkaTask(t, cfg, 0, 1)
		defer src.Close()
		for _, r := range kafkaTake(t, src, parts*n) {
			src.Done(r.ID)
		}
		errs.waitCommitError(t, fmt.Sprintf(`source: kafka: periodic commit of group "g" failed for t/0 at offset %d, t/1 at offset %d: GROUP_AUTHORIZATION_FAILED`, n, n), denied)
		if got := e.committed(t, "g", "t", parts); !slices.Equal(got, []int64{-1, -1}) {
			t.Fatalf("committed %v while the broker refuses commits", got)
		}
		fail.Store(false) // the next tick commits what failed
		e.waitCommitted(t, "g", "t", []int64{n, n})
	})

	t.Run("revoke", func(t *testing.T) {
		defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
		e := newKafkaEnv(t, parts, "t")
		defer e.close()
		e.fill(t, "t", parts, n)
		var errs kafkaErrors
		cfg := e.config("g", "t")
		cfg.CommitInterval = time.Hour // only the revoke commits
		cfg.OnError = errs.add
		a := openKafkaTask(t, cfg, 0, 2)
		defer a.Close()
		for _, r := range kafkaTake(t, a, parts*n) {
			a.Done(r.ID)
		}
		fail := failKafkaCommits(e.c, denied)
		b := openKafkaTask(t, cfg, 1, 2)
		defer b.Close()
		kafkaWaitFor(t, func() bool { return len(a.assigned()) == 1 && len(b.assigned()) == 1 },
			func() string { return fmt.Sprintf("assignments %v, %v", a.assigned(), b.assigned()) })
		moved := b.assigned()[0]
		errs.waitCommitError(t, fmt.Sprintf(`source: kafka: revoke commit of group "g" failed for %s at offset %d: GROUP_AUTHORIZATION_FAILED`, moved, n), denied)
		if err := errs.commitError("revoke"); strings.Contains(err.Error(), a.assigned()[0]) {
			t.Errorf("revoke commit error %q names the partition kept", err)
		}
		fail.Store(false)
	})

	t.Run("close", func(t *testing.T) {
		defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
		e := newKafkaEnv(t, parts, "t")
		defer e.close()
		e.fill(t, "t", parts, n)
		var errs kafkaErrors
		cfg := e.config("g", "t")
		cfg.CommitInterval = time.Hour // only Close commits
		cfg.OnError = errs.add
		src := openKafkaTask(t, cfg, 0, 1)
		for _, r := range kafkaTake(t, src, parts*n) {
			src.Done(r.ID)
		}
		failKafkaCommits(e.c, denied)
		want := fmt.Sprintf(`source: kafka: close commit of group "g" failed for t/0 at offset %d, t/1 at offset %d: GROUP_AUTHORIZATION_FAILED`, n, n)
		if err := src.Close(); err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrCommit) {
			t.Fatalf("Close = %v, want %q", err, want)
		}
		errs.waitCommitError(t, want, denied)
		// Leaving the group revokes the partitions, whose commit fails too.
		errs.waitCommitError(t, `source: kafka: revoke commit of group "g" failed for t/0`, denied)
	})
}

// TestKafkaCommitErrorMessage: partitions refused for different reasons
// are each named with theirs, in order, and errors.Is finds every cause.
func TestKafkaCommitErrorMessage(t *testing.T) {
	err := error(newKafkaCommitError("periodic", "g", []kafkaCommitFailure{
		{kafkaTP{"u", 0}, 7, kerr.TopicAuthorizationFailed},
		{kafkaTP{"t", 1}, 5, kerr.GroupAuthorizationFailed},
		{kafkaTP{"t", 0}, 3, kerr.GroupAuthorizationFailed},
	}))
	want := `source: kafka: periodic commit of group "g" failed: t/0 at offset 3: GROUP_AUTHORIZATION_FAILED`
	if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "; t/1 at offset 5: GROUP_AUTHORIZATION_FAILED") ||
		!strings.Contains(err.Error(), "; u/0 at offset 7: TOPIC_AUTHORIZATION_FAILED") {
		t.Errorf("error %q, want it to start with %q and name t/1 and u/0 after", err, want)
	}
	for _, cause := range []error{ErrCommit, kerr.TopicAuthorizationFailed, kerr.GroupAuthorizationFailed} {
		if !errors.Is(err, cause) {
			t.Errorf("error does not wrap %v", cause)
		}
	}
}
