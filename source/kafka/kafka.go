package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/acktor/acktor/source"
)

// Defaults and bounds of Config.
const (
	// DefaultMaxBuffered is Config.MaxBuffered when it is 0.
	DefaultMaxBuffered = 8192
	// DefaultMaxUncommitted is Config.MaxUncommitted when it is 0.
	DefaultMaxUncommitted = 1 << 16
	// DefaultCommitInterval is Config.CommitInterval when it is 0.
	DefaultCommitInterval = time.Second

	maxKafkaBuffered    = 1 << 20
	maxKafkaUncommitted = 1 << 24
	maxKafkaTopics      = 256
)

// kafkaOffsetBits is the width of the offset in a Kafka root's ID; the 16
// bits above it name the topic and partition.
const kafkaOffsetBits = 48

// MaxOffset is the largest record offset a Kafka source can hand out:
// a larger one does not fit a root's ID and is an error.
const MaxOffset = 1<<kafkaOffsetBits - 1

// ErrCommit is wrapped by the error of every failed offset commit of a
// Kafka source, as OnError receives it (and Close returns its own), so that
// a caller can tell commits that did not land, which keep the group's
// offsets where they were, from the fetch errors the client retries.
var ErrCommit = errors.New("offset commit failed")

// kafkaTimeout bounds the requests of opening a Kafka source (the topic
// check, the end offsets of StopAtEnd) and of each offset commit.
const kafkaTimeout = 10 * time.Second

// Config describes a Kafka source: the topics a consumer group reads.
// Brokers, Topics and Group must be set; the zero value of every other field
// means its default.
type Config struct {
	// Brokers are the seed brokers, "host:port".
	Brokers []string
	// Topics are the topics to consume, 1 to 256 distinct names, each of
	// which must exist when the source opens. Their order is part of the
	// roots' IDs (see Kafka): keep it when the topology restarts.
	Topics []string
	// Group is the consumer group. Every task of the spout is one member of
	// it, so Kafka spreads the partitions over the tasks, and the group's
	// committed offsets are where a restarted topology resumes.
	Group string
	// Decode turns a record into a root's payload; an error makes the record
	// a BadRecord (dead-lettered, then skipped). nil requires the record's
	// value to be valid UTF-8 and uses it as is.
	Decode func(rec *kgo.Record) (string, error)
	// MaxBuffered bounds the records fetched from Kafka and not yet handed
	// out by Next, over all partitions of a task: 0 means
	// DefaultMaxBuffered, at most 1048576. (The client also holds up to
	// one fetch response per broker; bound its size with kgo.FetchMaxBytes
	// in Opts.)
	MaxBuffered int
	// MaxUncommitted bounds the records of one partition that a task keeps
	// between the first unfinished one and the last handed out: once it is
	// reached the partition is paused (no more fetches) until the first
	// unfinished records finish, while the other partitions go on. 0 means
	// DefaultMaxUncommitted, at most 16777216.
	MaxUncommitted int
	// CommitInterval is how often each task commits the offsets its
	// finished roots allow; it also commits when a partition is revoked and
	// on Close. 0 means DefaultCommitInterval; otherwise it must be at
	// least 1ms.
	CommitInterval time.Duration
	// StopAtEnd makes Next return io.EOF once the member joined the group
	// and every partition assigned to it was read up to the end offset (high
	// watermark) it had when the source opened; records past that end are
	// left for a later run. For tests, benchmarks and batch runs over a
	// topic that is not written to meanwhile. A task that is assigned no
	// partition ends at once; one that ended may still be assigned
	// partitions when another member leaves, and does not read them. It
	// assumes plain partitions: one whose last records before the end are
	// transaction markers never counts as read, and partitions without a
	// committed offset are read from their start.
	StopAtEnd bool
	// Opts are extra client options, applied after the source's own: TLS
	// (kgo.DialTLSConfig), SASL (kgo.SASL), timeouts, fetch sizes, a logger.
	// The source sets kgo.FetchMaxWait to 500ms (a paused partition that is
	// resumed waits for the fetch under way) and starts partitions without a
	// committed offset at their beginning; both may be changed here. Do not
	// use Opts to change the group, the topics or committing.
	Opts []kgo.Opt
	// OnError, if not nil, is told of errors the source recovers from:
	// every failed offset commit, a lost group session, a fetch error the
	// client retries. It is called from the source's own goroutines and must
	// not block. Errors the source cannot recover from are returned by Next
	// instead.
	//
	// A commit error wraps ErrCommit and the broker's error, and names
	// the group, the partitions with the offsets that were not stored, and
	// what committed: "periodic" (the next tick tries again), "revoke" (the
	// partitions' new owners re-read from the offsets committed before) or
	// "close" (also returned by Close). A commit that fails every time, for
	// an ACL or a group error, is reported every CommitInterval: the
	// group's offsets do not advance meanwhile, so a restart reads
	// everything since the last commit that landed again.
	OnError func(err error)
}

// Validate reports the first invalid field of c.
func (c Config) Validate() error {
	switch {
	case len(c.Brokers) == 0:
		return errors.New("source: kafka: Brokers is empty, want at least one host:port")
	case len(c.Topics) == 0:
		return errors.New("source: kafka: Topics is empty, want at least one topic")
	case len(c.Topics) > maxKafkaTopics:
		return fmt.Errorf("source: kafka: Topics has %d topics, want at most %d", len(c.Topics), maxKafkaTopics)
	case c.Group == "":
		return errors.New("source: kafka: Group is empty")
	case c.MaxBuffered < 0 || c.MaxBuffered > maxKafkaBuffered:
		return fmt.Errorf("source: kafka: MaxBuffered is %d, want 0 (default %d) to %d", c.MaxBuffered, DefaultMaxBuffered, maxKafkaBuffered)
	case c.MaxUncommitted < 0 || c.MaxUncommitted > maxKafkaUncommitted:
		return fmt.Errorf("source: kafka: MaxUncommitted is %d, want 0 (default %d) to %d", c.MaxUncommitted, DefaultMaxUncommitted, maxKafkaUncommitted)
	case c.CommitInterval < 0 || (c.CommitInterval > 0 && c.CommitInterval < time.Millisecond):
		return fmt.Errorf("source: kafka: CommitInterval is %v, want 0 (default %v) or at least 1ms", c.CommitInterval, DefaultCommitInterval)
	}
	for i, b := range c.Brokers {
		if b == "" {
			return fmt.Errorf("source: kafka: Brokers[%d] is empty", i)
		}
	}
	for i, t := range c.Topics {
		if t == "" {
			return fmt.Errorf("source: kafka: Topics[%d] is empty", i)
		}
		if j := slices.Index(c.Topics[:i], t); j >= 0 {
			return fmt.Errorf("source: kafka: Topics[%d] %q repeats Topics[%d]", i, t, j)
		}
	}
	for i, o := range c.Opts {
		if o == nil {
			return fmt.Errorf("source: kafka: Opts[%d] is nil", i)
		}
	}
	return nil
}

// withDefaults fills the zero fields and copies the slices.
func (c Config) withDefaults() Config {
	if c.MaxBuffered == 0 {
		c.MaxBuffered = DefaultMaxBuffered
	}
	if c.MaxUncommitted == 0 {
		c.MaxUncommitted = DefaultMaxUncommitted
	}
	if c.CommitInterval == 0 {
		c.CommitInterval = DefaultCommitInterval
	}
	c.Brokers = slices.Clone(c.Brokers)
	c.Topics = slices.Clone(c.Topics)
	c.Opts = slices.Clone(c.Opts)
	return c
}

// Kafka returns a Factory for a source that consumes cfg.Topics as a member
// of the consumer group cfg.Group, with franz-go: every spout task is one
// member, Kafka assigns the partitions, and each record is one root. The
// factory returns an error naming the first invalid field of cfg, or if a
// topic does not exist.
//
// Root.ID is the record's topic and partition in the high 16 bits and its
// offset in the low 48: with n topics, the topic's index in cfg.Topics takes
// the top ceil(log2(n)) bits and the partition the rest, so one topic may
// have up to 65536 partitions, two 32768 each, and so on. A partition or
// offset (above MaxOffset) that does not fit is an error of Next.
// Root.Time is the record's timestamp.
//
// Offsets are committed for finished roots only: the committed offset of a
// partition is the end of its contiguous prefix of records that were Done
// (finished or dead-lettered), so a member that crashes has exactly the
// unfinished records, and those after them, delivered again. A failed root
// does not stall its partition: Replay returns its payload, kept until Done,
// while Next goes on with the records after it. The source commits every
// CommitInterval, when a partition is revoked and on Close; auto-commit is
// off. When MaxUncommitted records of a partition wait behind an unfinished
// one, that partition is paused until it finishes.
//
// Next never blocks: a goroutine polls the client into a buffer of
// MaxBuffered records, and Next answers ErrNotReady while it is empty. A
// record that Decode refuses (by default, one whose value is not UTF-8) is a
// *BadRecord naming topic, partition and offset. When a rebalance revokes a
// partition, the source commits its finished prefix and forgets its records:
// Replay of one of them returns an error wrapping ErrReleased (the new owner
// reads it again from the committed offset) and Done ignores it. Total is
// -1. Close commits, leaves the group and stops the goroutines.
func New(cfg Config) source.Factory {
	cfg = cfg.withDefaults()
	return func(task, tasks int) (source.Source, error) {
		if err := source.CheckTask(task, tasks); err != nil {
			return nil, fmt.Errorf("source: kafka: %w", err)
		}
		if err := cfg.Validate(); err != nil {
			return nil, err
		}
		return openKafka(cfg, task)
	}
}

// kafkaHeld is a record handed out and not yet in its partition's finished
// prefix.
type kafkaHeld struct {
	offset  int64
	payload string // kept until Done, for Replay
	epoch   int32
	done    bool
	bad     bool
}

// kafkaPart is the state of one partition assigned to the member.
type kafkaPart struct {
	topic     string
	partition int32
	slot      uint64      // the high 16 bits of its roots' IDs, in place
	recs      []kafkaHeld // recs[head:] are held, in offset order
	head      int
	last      int64           // offset of the last record handed out; -1: none
	commit    kgo.EpochOffset // end of the finished prefix; Offset -1: nothing finished
	committed int64           // the offset known to be committed; -1: unknown
	full      bool            // paused for MaxUncommitted
	paused    bool            // paused in the client
	end       int64           // StopAtEnd: the end offset at open
	start     int64           // StopAtEnd: where consuming started; -1: unknown
	atEnd     bool            // StopAtEnd: read up to end
	hwm       int64           // the partition's high watermark at the last fetch; 0: none yet
	first     int64           // offset of the first record fetched since assigned; -1: none
}

// held is the number of records from the first unfinished one on.
func (p *kafkaPart) held() int { return len(p.recs) - p.head }

// find returns the index in recs of the held record at offset off.
func (p *kafkaPart) find(off int64) (int, bool) {
	held := p.recs[p.head:]
	if len(held) == 0 || off < held[0].offset {
		return 0, false
	}
	// Offsets without gaps (no compaction, no transaction markers): the
	// record is at its distance from the first.
	if d := off - held[0].offset; d < int64(len(held)) && held[d].offset == off {
		return p.head + int(d), true
	}
	i, ok := slices.BinarySearchFunc(held, off, func(h kafkaHeld, off int64) int {
		switch {
		case h.offset < off:
			return -1
		case h.offset > off:
			return 1
		}
		return 0
	})
	return p.head + i, ok
}

// kafkaFetched is a polled record not yet handed out, with its partition.
type kafkaFetched struct {
	rec  *kgo.Record
	part *kafkaPart
}

// kafkaSource is the Source of one task of Kafka.
type kafkaSource struct {
	cfg      Config
	decode   func(*kgo.Record) (string, error)
	partBits uint // bits of the partition in a slot
	cl       *kgo.Client
	ctx      context.Context // canceled by Close: stops polling and commits
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	// commitMu serialises commits with revocations, so that a periodic
	// commit of a partition never lands after its revoke.
	commitMu sync.Mutex

	mu          sync.Mutex
	room        *sync.Cond // the poller waits on it for room in fetched
	waiting     bool       // the poller waits for room
	fetched     []kafkaFetched
	fhead       int
	parts       map[uint64]*kafkaPart // assigned partitions, by slot
	ends        map[string][]int64    // StopAtEnd: end offsets at open, by topic and partition
	starts      map[string][]int64    // StopAtEnd: log start offsets at open
	joined      bool                  // an assignment was received
	rebalancing bool                  // between a revoke and the next assignment
	err         error                 // fatal: returned by Next
	closed      bool
	abandon     bool // tests: commit nothing, as if the process had died
}

func openKafka(cfg Config, task int) (*kafkaSource, error) {
	s := &kafkaSource{
		cfg:      cfg,
		decode:   cfg.Decode,
		partBits: 16 - uint(bits.Len(uint(len(cfg.Topics)-1))),
		parts:    map[uint64]*kafkaPart{},
	}
	if s.decode == nil {
		s.decode = kafkaDecodeUTF8
	}
	s.room = sync.NewCond(&s.mu)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(fmt.Sprintf("acktor-%s-%d", cfg.Group, task)),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topics...),
		kgo.ConsumeStartOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.FetchMaxWait(500 * time.Millisecond), // a resumed partition waits for the fetch under way
		kgo.OnPartitionsAssigned(s.onAssigned),
		kgo.OnPartitionsRevoked(s.onRevoked),
		kgo.OnPartitionsLost(s.onLost),
		kgo.AdjustFetchOffsetsFn(s.onStart),
	}
	// Hold the callbacks back until the topics are checked: the group is
	// joined in the background as soon as the client exists.
	s.mu.Lock()
	cl, err := kgo.NewClient(append(opts, cfg.Opts...)...)
	if err != nil {
		s.mu.Unlock()
		s.cancel()
		return nil, fmt.Errorf("source: kafka: %w", err)
	}
	s.cl = cl
	err = s.checkTopics()
	s.mu.Unlock()
	if err != nil {
		s.cancel()
		cl.Close()
		return nil, fmt.Errorf("source: kafka: %w", err)
	}
	s.wg.Add(2)
	go s.pollLoop()
	go s.commitLoop()
	return s, nil
}

// kafkaDecodeUTF8 is the default Decode: the value, if it is valid UTF-8.
func kafkaDecodeUTF8(rec *kgo.Record) (string, error) { return source.DecodeUTF8(rec.Value) }

// checkTopics makes sure every topic exists and its partitions fit the
// roots' IDs, and with StopAtEnd reads the partitions' start and end
// offsets.
func (s *kafkaSource) checkTopics() error {
	ctx, cancel := context.WithTimeout(s.ctx, kafkaTimeout)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range s.cfg.Topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	var resp *kmsg.MetadataResponse
	for {
		r, err := req.RequestWith(ctx, s.cl)
		if err != nil {
			return fmt.Errorf("brokers %v: reading metadata: %w", s.cfg.Brokers, err)
		}
		var retry error
		for _, t := range r.Topics {
			name := kafkaStr(t.Topic)
			switch e := kerr.ErrorForCode(t.ErrorCode); {
			case e == nil:
			case errors.Is(e, kerr.UnknownTopicOrPartition):
				return fmt.Errorf("topic %q does not exist: %w", name, e)
			case kerr.IsRetriable(e):
				retry = fmt.Errorf("topic %q: %w", name, e)
			default:
				return fmt.Errorf("topic %q: %w", name, e)
			}
		}
		if retry == nil {
			resp = r
			break
		}
		select {
		case <-ctx.Done():
			return retry
		case <-time.After(50 * time.Millisecond):
		}
	}
	counts := map[string]int32{}
	for _, t := range resp.Topics {
		name := kafkaStr(t.Topic)
		counts[name] = int32(len(t.Partitions))
		if max := int32(1) << s.partBits; counts[name] > max {
			return fmt.Errorf("topic %q has %d partitions; with %d topics a root ID fits %d", name, counts[name], len(s.cfg.Topics), max)
		}
	}
	for _, t := range s.cfg.Topics {
		if _, ok := counts[t]; !ok {
			return fmt.Errorf("topic %q: not in the brokers' metadata", t)
		}
	}
	if !s.cfg.StopAtEnd {
		return nil
	}
	var err error
	if s.ends, err = s.listOffsets(ctx, counts, -1); err != nil {
		return fmt.Errorf("reading end offsets: %w", err)
	}
	if s.starts, err = s.listOffsets(ctx, counts, -2); err != nil {
		return fmt.Errorf("reading start offsets: %w", err)
	}
	return nil
}

// listOffsets asks for the offsets at timestamp ts (-1: the end, -2: the
// start) of every partition of the topics, retrying retriable errors.
func (s *kafkaSource) listOffsets(ctx context.Context, counts map[string]int32, ts int64) (map[string][]int64, error) {
	for {
		req := kmsg.NewPtrListOffsetsRequest()
		for topic, n := range counts {
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = topic
			for p := range n {
				rp := kmsg.NewListOffsetsRequestTopicPartition()
				rp.Partition, rp.Timestamp = p, ts
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, s.cl)
		if err != nil {
			return nil, err
		}
		out := map[string][]int64{}
		for topic, n := range counts {
			out[topic] = make([]int64, n)
		}
		var retry error
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if e := kerr.ErrorForCode(p.ErrorCode); e != nil {
					if !kerr.IsRetriable(e) {
						return nil, fmt.Errorf("%s/%d: %w", t.Topic, p.Partition, e)
					}
					retry = fmt.Errorf("%s/%d: %w", t.Topic, p.Partition, e)
					continue
				}
				if offs := out[t.Topic]; p.Partition >= 0 && int(p.Partition) < len(offs) {
					offs[p.Partition] = p.Offset
				}
			}
		}
		if retry == nil {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, retry
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// kafkaStr is *p, or "" for nil.
func kafkaStr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// slotOf returns the slot of a topic's partition, or false if it does not
// fit.
func (s *kafkaSource) slotOf(topic string, partition int32) (uint64, bool) {
	t := slices.Index(s.cfg.Topics, topic)
	if t < 0 || partition < 0 || partition >= 1<<s.partBits {
		return 0, false
	}
	return uint64(t)<<s.partBits | uint64(partition), true
}

// where names the topic, partition and offset of a root ID.
func (s *kafkaSource) where(id uint64) string {
	slot, off := id>>kafkaOffsetBits, id&MaxOffset
	t, p := slot>>s.partBits, slot&(1<<s.partBits-1)
	if t >= uint64(len(s.cfg.Topics)) {
		return fmt.Sprintf("root %d (no topic %d)", id, t)
	}
	return fmt.Sprintf("%s/%d offset %d", s.cfg.Topics[t], p, off)
}

// part returns the state of an assigned partition, made on first sight.
// mu is held.
func (s *kafkaSource) part(topic string, partition int32) (*kafkaPart, error) {
	slot, ok := s.slotOf(topic, partition)
	if !ok {
		return nil, fmt.Errorf("partition %s/%d does not fit a root ID: with %d topics at most %d partitions each",
			topic, partition, len(s.cfg.Topics), 1<<s.partBits)
	}
	if p := s.parts[slot]; p != nil {
		return p, nil
	}
	p := &kafkaPart{topic: topic, partition: partition, slot: slot << kafkaOffsetBits, first: -1,
		last: -1, commit: kgo.EpochOffset{Epoch: -1, Offset: -1}, committed: -1, start: -1}
	if ends := s.ends[topic]; int(partition) < len(ends) {
		p.end = ends[partition] // partitions made after open have nothing to read
	}
	s.parts[slot] = p
	s.updateAtEnd(p)
	return p, nil
}

// onAssigned records newly assigned partitions (the client calls it from the
// group's goroutine, never while polled records are being buffered).
func (s *kafkaSource) onAssigned(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
	// A partition this member paused when it owned it before starts afresh.
	cl.ResumeFetchPartitions(assigned)
	s.mu.Lock()
	var fatal error
	for topic, ps := range assigned {
		for _, partition := range ps {
			if _, err := s.part(topic, partition); err != nil && fatal == nil {
				fatal = err
			}
		}
	}
	if fatal != nil && s.err == nil {
		s.err = fmt.Errorf("source: kafka: %w", fatal)
	}
	s.joined, s.rebalancing = true, false
	s.mu.Unlock()
}

// onStart learns where consuming starts in newly assigned partitions: the
// committed offset, or the start of the log.
func (s *kafkaSource) onStart(_ context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for topic, ps := range offsets {
		for partition, o := range ps {
			slot, ok := s.slotOf(topic, partition)
			p := s.parts[slot]
			if !ok || p == nil {
				continue
			}
			switch at := o.EpochOffset().Offset; {
			case at >= 0:
				p.start, p.committed = at, at
			case at == -2: // the start of the log
				if starts := s.starts[topic]; int(partition) < len(starts) {
					p.start = starts[partition]
				}
			case at == -1: // the end of the log
				p.start = max(p.end, 0)
			}
			s.updateAtEnd(p)
		}
	}
	return offsets, nil
}

// onRevoked commits the finished prefix of the revoked partitions and
// forgets them.
func (s *kafkaSource) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	s.mu.Lock()
	s.rebalancing = true
	offsets := s.release(revoked)
	abandon := s.abandon
	s.mu.Unlock()
	if abandon {
		return
	}
	// The partitions are gone from this member whatever happens: a failed
	// commit only means their new owner starts from an older offset, and
	// reads again what finished here since. Nothing retries it, so say so.
	if err := s.commitOffsets(ctx, "revoke", offsets); err != nil {
		s.report(err)
	}
}

// onLost forgets partitions lost without a chance to commit.
func (s *kafkaSource) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	s.mu.Lock()
	s.rebalancing = true
	s.release(lost)
	s.mu.Unlock()
	s.report(errors.New("source: kafka: group session lost; uncommitted records will be read again"))
}

// release forgets the given partitions and their buffered records, resumes
// those it paused, and returns the offsets to commit for them. mu is held.
func (s *kafkaSource) release(ps map[string][]int32) map[string]map[int32]kgo.EpochOffset {
	offsets := map[string]map[int32]kgo.EpochOffset{}
	gone := map[*kafkaPart]bool{}
	resume := map[string][]int32{}
	for topic, partitions := range ps {
		for _, partition := range partitions {
			slot, ok := s.slotOf(topic, partition)
			p := s.parts[slot]
			if !ok || p == nil {
				continue
			}
			delete(s.parts, slot)
			gone[p] = true
			if p.paused {
				resume[topic] = append(resume[topic], partition)
			}
			if p.commit.Offset >= 0 && p.commit.Offset != p.committed {
				if offsets[topic] == nil {
					offsets[topic] = map[int32]kgo.EpochOffset{}
				}
				offsets[topic][partition] = p.commit
			}
		}
	}
	if len(gone) > 0 {
		kept := s.fetched[:s.fhead]
		for _, f := range s.fetched[s.fhead:] {
			if !gone[f.part] {
				kept = append(kept, f)
			}
		}
		clear(s.fetched[len(kept):])
		s.fetched = kept
		s.signalRoom()
	}
	if len(resume) > 0 {
		s.cl.ResumeFetchPartitions(resume)
	}
	return offsets
}

// pollLoop polls the client into fetched while there is room, until Close.
func (s *kafkaSource) pollLoop() {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		for !s.closed && s.queued() >= s.cfg.MaxBuffered {
			s.waiting = true
			s.room.Wait()
		}
		room := s.cfg.MaxBuffered - s.queued()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return
		}
		fs := s.cl.PollRecords(s.ctx, room)
		stop := s.buffer(fs)
		s.cl.AllowRebalance()
		if stop {
			return
		}
	}
}

// signalRoom wakes the poller once fetched has room for a good batch. mu is
// held.
func (s *kafkaSource) signalRoom() {
	if s.waiting && s.queued() <= s.cfg.MaxBuffered/2 {
		s.waiting = false
		s.room.Signal()
	}
}

// queued is the number of records in fetched. mu is held.
func (s *kafkaSource) queued() int { return len(s.fetched) - s.fhead }

// buffer appends polled records to fetched and sorts out errors; it reports
// whether polling is over (the client closed).
func (s *kafkaSource) buffer(fs kgo.Fetches) (stop bool) {
	var report []error
	s.mu.Lock()
	fs.EachError(func(topic string, partition int32, err error) {
		var loss *kgo.ErrDataLoss
		var session *kgo.ErrGroupSession
		var ke *kerr.Error
		switch {
		case errors.Is(err, kgo.ErrClientClosed) || errors.Is(err, context.Canceled):
			stop = true
		case errors.As(err, &loss) || errors.As(err, &session) || (errors.As(err, &ke) && ke.Retriable):
			report = append(report, fmt.Errorf("source: kafka: fetching %s/%d: %w", topic, partition, err))
		case errors.As(err, &ke):
			if s.err == nil {
				s.err = fmt.Errorf("source: kafka: fetching %s/%d: %w", topic, partition, err)
			}
		default: // the client retries these itself
			report = append(report, fmt.Errorf("source: kafka: fetching %s/%d: %w", topic, partition, err))
		}
	})
	if s.fhead > 0 {
		n := copy(s.fetched, s.fetched[s.fhead:])
		clear(s.fetched[n:])
		s.fetched, s.fhead = s.fetched[:n], 0
	}
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		if slot, ok := s.slotOf(fp.Topic, fp.Partition); ok && s.parts[slot] != nil && fp.HighWatermark > 0 {
			s.parts[slot].hwm = fp.HighWatermark
		}
	})
	var last *kafkaPart
	fs.EachRecord(func(rec *kgo.Record) {
		if last == nil || last.topic != rec.Topic || last.partition != rec.Partition {
			slot, ok := s.slotOf(rec.Topic, rec.Partition)
			last = s.parts[slot]
			if !ok {
				last = nil
			}
		}
		if last != nil { // else not (or no longer) assigned
			if last.first < 0 {
				last.first = rec.Offset
			}
			s.fetched = append(s.fetched, kafkaFetched{rec, last})
		}
	})
	s.mu.Unlock()
	for _, err := range report {
		s.report(err)
	}
	return stop
}

// report hands a recoverable error to OnError.
func (s *kafkaSource) report(err error) {
	if s.cfg.OnError != nil {
		s.cfg.OnError(err)
	}
}

// commitLoop commits every CommitInterval until Close.
func (s *kafkaSource) commitLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			// A commit cut short by Close is not reported: Close commits again.
			if err := s.commit(s.ctx, "periodic"); err != nil && s.ctx.Err() == nil {
				s.report(err)
			}
		}
	}
}

// commit commits the finished prefix of every assigned partition that moved
// since its last commit; trigger says why, for the error.
func (s *kafkaSource) commit(ctx context.Context, trigger string) error {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	s.mu.Lock()
	if s.abandon {
		s.mu.Unlock()
		return nil
	}
	offsets := map[string]map[int32]kgo.EpochOffset{}
	parts := map[*kafkaPart]int64{}
	for _, p := range s.parts {
		if p.commit.Offset >= 0 && p.commit.Offset != p.committed {
			if offsets[p.topic] == nil {
				offsets[p.topic] = map[int32]kgo.EpochOffset{}
			}
			offsets[p.topic][p.partition] = p.commit
			parts[p] = p.commit.Offset
		}
	}
	s.mu.Unlock()
	if len(offsets) == 0 {
		return nil
	}
	err := s.commitOffsets(ctx, trigger, offsets)
	failed := map[kafkaTP]bool{}
	if ce, ok := errors.AsType[*kafkaCommitError](err); ok {
		for _, f := range ce.failed {
			failed[kafkaTP{f.topic, f.partition}] = true
		}
	}
	s.mu.Lock()
	for p, off := range parts {
		// The partitions the broker stored are not committed again; the
		// others are, at the next tick.
		if s.parts[p.slot>>kafkaOffsetBits] == p && !failed[kafkaTP{p.topic, p.partition}] {
			p.committed = off
		}
	}
	s.mu.Unlock()
	return err
}

// kafkaTP names a partition.
type kafkaTP struct {
	topic     string
	partition int32
}

// kafkaCommitFailure is a partition whose offset a commit did not store.
type kafkaCommitFailure struct {
	kafkaTP
	offset int64
	err    error
}

// kafkaCommitError is the error of a commit that did not store the offsets
// of some partitions. It wraps ErrCommit and the causes, so that
// errors.Is finds both it and the broker's error (a *kerr.Error).
type kafkaCommitError struct {
	msg    string
	failed []kafkaCommitFailure // by topic and partition
}

func (e *kafkaCommitError) Error() string { return e.msg }

func (e *kafkaCommitError) Unwrap() []error {
	errs := []error{ErrCommit}
	for _, f := range e.failed {
		errs = append(errs, f.err)
	}
	return errs
}

// newKafkaCommitError describes the failed partitions of a commit of group
// made for trigger. One cause shared by all (the request failed, or the
// broker refused every partition alike) is said once, after the list.
func newKafkaCommitError(trigger, group string, failed []kafkaCommitFailure) *kafkaCommitError {
	slices.SortFunc(failed, func(a, b kafkaCommitFailure) int {
		if c := strings.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return int(a.partition) - int(b.partition)
	})
	var b strings.Builder
	fmt.Fprintf(&b, "source: kafka: %s commit of group %q", trigger, group)
	same := true
	for _, f := range failed {
		same = same && f.err.Error() == failed[0].err.Error()
	}
	if same {
		b.WriteString(" failed for ")
		for i, f := range failed {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s/%d at offset %d", f.topic, f.partition, f.offset)
		}
		fmt.Fprintf(&b, ": %v", failed[0].err)
	} else {
		b.WriteString(" failed: ")
		for i, f := range failed {
			if i > 0 {
				b.WriteString("; ")
			}
			fmt.Fprintf(&b, "%s/%d at offset %d: %v", f.topic, f.partition, f.offset, f.err)
		}
	}
	return &kafkaCommitError{msg: b.String(), failed: failed}
}

// commitOffsets commits offsets synchronously. Its error, a
// *kafkaCommitError, names every partition whose offset was not stored,
// trigger (what committed) and the group.
func (s *kafkaSource) commitOffsets(ctx context.Context, trigger string, offsets map[string]map[int32]kgo.EpochOffset) error {
	if len(offsets) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, kafkaTimeout)
	defer cancel()
	var failed []kafkaCommitFailure
	s.cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil { // nothing was stored
			for topic, ps := range offsets {
				for partition, eo := range ps {
					failed = append(failed, kafkaCommitFailure{kafkaTP{topic, partition}, eo.Offset, err})
				}
			}
			return
		}
		for _, t := range resp.Topics {
			topic := t.Topic
			if topic == "" { // v10+ answers with topic IDs only
				for _, rt := range req.Topics {
					if rt.TopicID == t.TopicID {
						topic = rt.Topic
					}
				}
			}
			for _, p := range t.Partitions {
				if e := kerr.ErrorForCode(p.ErrorCode); e != nil {
					failed = append(failed, kafkaCommitFailure{kafkaTP{topic, p.Partition}, offsets[topic][p.Partition].Offset, e})
				}
			}
		}
	})
	if len(failed) > 0 {
		return newKafkaCommitError(trigger, s.cfg.Group, failed)
	}
	return nil
}

// Next hands out the next buffered record, ErrNotReady if there is none,
// io.EOF with StopAtEnd once the assigned partitions were read to their end,
// or the error that stopped the source.
func (s *kafkaSource) Next() (source.Root, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return source.Root{}, fmt.Errorf("source: kafka: %w", os.ErrClosed)
	}
	if s.err != nil {
		return source.Root{}, s.err
	}
	for s.fhead < len(s.fetched) {
		f := s.fetched[s.fhead]
		s.fetched[s.fhead] = kafkaFetched{}
		s.fhead++
		s.signalRoom()
		rec, p := f.rec, f.part
		switch {
		case rec.Offset <= p.last: // read again after a reset: handed out already
			continue
		case s.cfg.StopAtEnd && rec.Offset >= p.end: // left for a later run
			continue
		case rec.Offset > MaxOffset:
			s.err = fmt.Errorf("source: kafka: %s/%d offset %d does not fit a root ID (at most %d)",
				rec.Topic, rec.Partition, rec.Offset, MaxOffset)
			return source.Root{}, s.err
		}
		id := p.slot | uint64(rec.Offset)
		payload, err := s.decode(rec)
		p.recs = append(p.recs, kafkaHeld{offset: rec.Offset, payload: payload, epoch: rec.LeaderEpoch, bad: err != nil})
		p.last = rec.Offset
		if p.held() >= s.cfg.MaxUncommitted {
			p.full = true
		}
		s.updateAtEnd(p)
		s.setPaused(p)
		if err != nil {
			p.recs[len(p.recs)-1].payload = ""
			return source.Root{}, &source.BadRecord{ID: id, Payload: string(rec.Value),
				Reason: fmt.Sprintf("kafka %s/%d offset %d: %v", rec.Topic, rec.Partition, rec.Offset, err)}
		}
		r := source.Root{ID: id, Payload: payload}
		if ts := rec.Timestamp.UnixNano(); !rec.Timestamp.IsZero() && ts > 0 {
			r.Time = ts
		}
		return r, nil
	}
	s.fetched, s.fhead = s.fetched[:0], 0
	if s.cfg.StopAtEnd && s.joined && !s.rebalancing {
		end := true
		for _, p := range s.parts {
			end = end && p.atEnd
		}
		if end {
			return source.Root{}, io.EOF
		}
	}
	return source.Root{}, source.ErrNotReady
}

// updateAtEnd notes, with StopAtEnd, whether p was read to its end. mu is
// held.
func (s *kafkaSource) updateAtEnd(p *kafkaPart) {
	if s.cfg.StopAtEnd && !p.atEnd {
		p.atEnd = p.last+1 >= p.end || (p.start >= 0 && p.start >= p.end)
		s.setPaused(p)
	}
}

// setPaused pauses p in the client while it is full or read to its end,
// and resumes it otherwise. mu is held.
func (s *kafkaSource) setPaused(p *kafkaPart) {
	want := p.full || (s.cfg.StopAtEnd && p.atEnd)
	if want == p.paused || s.cl == nil {
		return
	}
	p.paused = want
	tp := map[string][]int32{p.topic: {p.partition}}
	if want {
		s.cl.PauseFetchPartitions(tp)
	} else {
		s.cl.ResumeFetchPartitions(tp)
	}
}

// Backlog is the records of the partitions assigned to this member that
// are not handed out yet, up to each one's high watermark at its last
// fetch: the consumer's lag (Backlogger).
func (s *kafkaSource) Backlog() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, p := range s.parts {
		next := p.last + 1
		if p.last < 0 {
			next = p.first // nothing handed out yet: from the first fetched, if any
		}
		if p.hwm > 0 && next >= 0 {
			n += max(p.hwm-next, 0)
		}
	}
	return n
}

// Replay returns the payload of a root handed out and not yet Done. For a
// root of a partition no longer assigned, not handed out by this member or
// already finished it returns an error wrapping ErrReleased; for a bad
// record or an unknown topic, one wrapping ErrUnknownRoot.
func (s *kafkaSource) Replay(id uint64) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", fmt.Errorf("source: kafka: %w", os.ErrClosed)
	}
	p := s.parts[id>>kafkaOffsetBits]
	off := int64(id & MaxOffset)
	switch {
	case p == nil && id>>kafkaOffsetBits>>s.partBits >= uint64(len(s.cfg.Topics)):
		return "", fmt.Errorf("source: kafka: %s: %w", s.where(id), source.ErrUnknownRoot)
	case p == nil:
		return "", fmt.Errorf("source: kafka: %s: partition not assigned to this member: %w", s.where(id), source.ErrReleased)
	case off > p.last:
		return "", fmt.Errorf("source: kafka: %s: not handed out by this member; it comes again from the committed offset: %w",
			s.where(id), source.ErrReleased)
	}
	i, ok := p.find(off)
	switch {
	case !ok || p.recs[i].done:
		// Finished: by this delivery's own earlier attempt, or by another
		// delivery of the same offset (a partition that came back to this
		// member hands its uncommitted records out again under the same
		// ids). Either way there is nothing to replay, and no dead letter.
		return "", fmt.Errorf("source: kafka: %s: already finished: %w", s.where(id), source.ErrReleased)
	case p.recs[i].bad:
		return "", fmt.Errorf("source: kafka: %s: a bad record: %w", s.where(id), source.ErrUnknownRoot)
	}
	return p.recs[i].payload, nil
}

// Done marks a root finished and moves its partition's finished prefix on.
// IDs of partitions no longer assigned, and unknown IDs, are ignored.
func (s *kafkaSource) Done(id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.parts[id>>kafkaOffsetBits]
	if p == nil {
		return
	}
	i, ok := p.find(int64(id & MaxOffset))
	if !ok || p.recs[i].done {
		return
	}
	p.recs[i].done, p.recs[i].payload = true, ""
	for p.head < len(p.recs) && p.recs[p.head].done {
		h := p.recs[p.head]
		p.commit = kgo.EpochOffset{Epoch: h.epoch, Offset: h.offset + 1}
		p.head++
	}
	switch {
	case p.head == len(p.recs):
		p.recs, p.head = p.recs[:0], 0
	case p.head >= 1024 && p.head >= len(p.recs)/2:
		n := copy(p.recs, p.recs[p.head:])
		clear(p.recs[n:])
		p.recs, p.head = p.recs[:n], 0
	}
	if p.full && p.held() <= s.cfg.MaxUncommitted/2 {
		p.full = false
		s.setPaused(p)
	}
}

// Total is -1: a topic has no known end.
func (s *kafkaSource) Total() int64 { return -1 }

// GlobalIDs: a topic, partition and offset name one record for every member of the group, and a rebalance moves a partition to another task.
func (s *kafkaSource) GlobalIDs() {}

var _ source.GlobalIDs = (*kafkaSource)(nil)

// Close stops polling, commits the finished prefixes, leaves the group and
// waits for the source's goroutines. It returns the error of its commit,
// which OnError is told of too. Calling it again does nothing.
func (s *kafkaSource) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.room.Broadcast()
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	err := s.commit(context.Background(), "close")
	if err != nil {
		s.report(err) // OnError sees every failed commit
	}
	s.cl.CloseAllowingRebalance() // the final revoke commits what is left
	s.mu.Lock()
	s.parts, s.fetched, s.fhead = map[uint64]*kafkaPart{}, nil, 0
	s.mu.Unlock()
	return err
}
