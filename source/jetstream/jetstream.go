package jetstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/acktor/acktor/source"
)

// Defaults of Config.
const (
	// DefaultAckWait is the consumer's ack wait when
	// Config.AckWait is 0.
	DefaultAckWait = 30 * time.Second
	// DefaultMaxAckPending is the consumer's max ack pending when
	// Config.MaxAckPending is 0.
	DefaultMaxAckPending = 4096
	// DefaultFetch is Config.Fetch when it is 0.
	DefaultFetch = 256
)

// MinAckWait is the shortest Config.AckWait accepted: the
// source looks at its held messages every AckWait/5.
const MinAckWait = 50 * time.Millisecond

// maxJetStreamFetch bounds Config.Fetch.
const maxJetStreamFetch = 1 << 16

// DefaultBackoff is the delay before a failed root comes back, by
// the attempt that failed, when Config sets no backoff; the last
// delay repeats.
var DefaultBackoff = []time.Duration{time.Second, 5 * time.Second, 30 * time.Second}

// jetStreamReadAhead is how many times Fetch messages a source reads ahead
// of its spout.
const jetStreamReadAhead = 2

// Timeouts of the source's requests to the server.
const (
	jetStreamOpenTimeout  = 10 * time.Second      // stream and consumer look-up at open
	jetStreamInfoTimeout  = 2 * time.Second       // consumer info, for StopAtEnd
	jetStreamFlushTimeout = 2 * time.Second       // acks still buffered at Close
	jetStreamDrainTimeout = time.Second           // messages still coming to a paused iterator
	jetStreamEndPoll      = 20 * time.Millisecond // no message for this long: StopAtEnd asks for the end
	jetStreamMaxPause     = 2 * time.Second       // between attempts after errors
)

// Config describes a JetStream source: a stream and the durable pull
// consumer all spout tasks share. URL, Stream and Consumer are required.
type Config struct {
	// URL is the NATS server URL, or a comma-separated list of them.
	URL string
	// Stream is the name of the stream to read; it must exist.
	Stream string
	// Consumer is the name of the durable pull consumer. It is created, or
	// updated to this configuration, at open with explicit acks. Every task
	// (and every later run) with the same name shares it, so the stream's
	// messages are spread over the tasks and acked progress is kept.
	Consumer string
	// Subject, if set, is the consumer's filter subject.
	Subject string
	// AckWait is how long the server waits for the ack of a delivered
	// message before it delivers it again; 0 means DefaultAckWait,
	// otherwise at least MinAckWait. The source sends "in progress"
	// for messages it holds longer than AckWait/2, so long trees are not
	// redelivered while they run.
	AckWait time.Duration
	// MaxAckPending bounds the messages delivered to all tasks and not yet
	// acked (0 means DefaultMaxAckPending), and so the memory of the
	// sources. Give it at least tasks × (the spout's MaxPending + 3×Fetch), or
	// tasks wait for each other.
	MaxAckPending int
	// Backoff is the delay before a failed root is delivered again, indexed
	// by the attempt that failed (0 for the first delivery); the last delay
	// repeats. Nil means DefaultBackoff; entries must not be
	// negative. BackoffFunc, if set, is used instead.
	Backoff []time.Duration
	// BackoffFunc returns the delay before a root whose attempt failed is
	// delivered again. A negative delay counts as 0.
	BackoffFunc func(attempt int32) time.Duration
	// Decode turns a message's data into a root's payload. An error makes the
	// message a *BadRecord, which the spout dead-letters. Nil accepts valid
	// UTF-8 only.
	Decode func(data []byte) (string, error)
	// StopAtEnd makes Next return io.EOF once no message that was in the
	// stream at open is left for the consumer: all of them acked (or
	// dead-lettered), over all tasks. It is meant for tests, benchmarks and
	// batch runs over a stream nobody writes to meanwhile; messages written
	// after open may or may not be read before EOF. Without it the source
	// never ends.
	StopAtEnd bool
	// Fetch is how many messages the client library asks for ahead, from 1
	// to 65536; 0 means DefaultFetch. A task reads up to 2×Fetch
	// messages ahead of its spout (3×Fetch for a moment when it pauses).
	Fetch int
	// Options are extra options of the connection (credentials, TLS, ...).
	// They come after the source's own nats.Name, so they may replace it.
	Options []nats.Option
}

// validate reports the first invalid field of c.
func (c Config) validate() error {
	switch {
	case c.URL == "":
		return errors.New("URL is empty")
	case c.Stream == "":
		return errors.New("Stream is empty")
	case strings.ContainsAny(c.Stream, ". *>\t\r\n"):
		return fmt.Errorf("Stream is %q, want a name without '.', '*', '>' or whitespace", c.Stream)
	case c.Consumer == "":
		return errors.New("Consumer is empty")
	case strings.ContainsAny(c.Consumer, ". *>\t\r\n"):
		return fmt.Errorf("Consumer is %q, want a name without '.', '*', '>' or whitespace", c.Consumer)
	case c.AckWait < 0 || (c.AckWait > 0 && c.AckWait < MinAckWait):
		return fmt.Errorf("AckWait is %v, want 0 or >= %v", c.AckWait, MinAckWait)
	case c.MaxAckPending < 0:
		return fmt.Errorf("MaxAckPending is %d, want >= 0", c.MaxAckPending)
	case c.Fetch < 0 || c.Fetch > maxJetStreamFetch:
		return fmt.Errorf("Fetch is %d, want 0 to %d", c.Fetch, maxJetStreamFetch)
	}
	for i, d := range c.Backoff {
		if d < 0 {
			return fmt.Errorf("Backoff[%d] is %v, want >= 0", i, d)
		}
	}
	return nil
}

// withDefaults fills the zero fields of a valid c.
func (c Config) withDefaults() Config {
	if c.AckWait == 0 {
		c.AckWait = DefaultAckWait
	}
	if c.MaxAckPending == 0 {
		c.MaxAckPending = DefaultMaxAckPending
	}
	if c.Fetch == 0 {
		c.Fetch = DefaultFetch
	}
	if c.BackoffFunc == nil {
		delays := c.Backoff
		if delays == nil {
			delays = DefaultBackoff
		}
		delays = append([]time.Duration(nil), delays...)
		c.BackoffFunc = func(attempt int32) time.Duration {
			if len(delays) == 0 {
				return 0
			}
			return delays[min(max(int(attempt), 0), len(delays)-1)]
		}
	}
	if c.Decode == nil {
		c.Decode = source.DecodeUTF8
	}
	return c
}

// JetStream returns a Factory for a NATS JetStream stream read through the
// durable pull consumer cfg.Consumer, which the factory creates or updates
// (explicit acks, cfg's ack wait, max ack pending and filter) each time it
// opens a task's source. All tasks share the consumer, so each message goes
// to one task at a time. Opening returns an error naming the first invalid
// field of cfg, or the connection's or the server's.
//
// Each task's source has its own connection, and a goroutine that takes
// messages from the consumer (the client library asking for up to cfg.Fetch
// ahead) into a read-ahead buffer of 2×cfg.Fetch; when the buffer is full it
// waits for the spout, and after AckWait/10 of waiting it also takes what the
// library still holds. Next takes one message without blocking and answers
// ErrNotReady while none is buffered. Root.ID is the message's stream
// sequence, Root.Time its timestamp in the stream (unix ns) and Root.Attempt
// its delivery count minus one. A message whose data cfg.Decode rejects comes
// out of Next as a *BadRecord whose Reason names the stream and the sequence.
// With one task, roots come in stream order, redeliveries aside.
//
// The source keeps every message it fetched until the spout is done with
// it, and while it does, it tells the server the message is in progress
// every AckWait/2, so the server does not deliver it again however long its
// tree takes. What it keeps is bounded by the consumer's MaxAckPending.
//
//   - Done(id) acks the message. A root the spout dead-letters (a bad record,
//     or one whose payload Replay was asked for, which the spout does only
//     for a dead letter) is terminated instead, so the server never delivers
//     it again and reports the termination in an advisory.
//   - Redeliver(id, attempt) naks the message with the backoff delay of the
//     failed attempt and forgets it; the server delivers it again, to any
//     task, with a delivery count one higher.
//   - Replay(id) returns the kept payload of a message not yet Done or
//     redelivered, else an error wrapping ErrUnknownRoot.
//
// Total is -1. Close stops the goroutines, naks the fetched messages Next
// has not handed out (so other tasks get them now, one delivery further),
// sends the acks still buffered and closes the connection. Messages handed
// out and not yet Done are left to the server, which delivers them again
// after AckWait, as after a crash.
func New(cfg Config) source.Factory {
	return func(task, tasks int) (source.Source, error) {
		name := cfg.Stream + "/" + cfg.Consumer
		if err := source.CheckTask(task, tasks); err != nil {
			return nil, fmt.Errorf("source: jetstream %s: %w", name, err)
		}
		if err := cfg.validate(); err != nil {
			return nil, fmt.Errorf("source: jetstream %s: %w", name, err)
		}
		return openJetStream(cfg.withDefaults(), name, task, tasks)
	}
}

// jsHeld is a message the source fetched and the spout is not done with.
type jsHeld struct {
	msg     jetstream.Msg
	payload string
	touched time.Duration // since the source's epoch: fetched or last in progress
	dead    bool          // a bad record, or Replay was asked: terminate at Done
}

// jsItem is a fetched message waiting for Next.
type jsItem struct {
	root source.Root
	bad  *source.BadRecord
}

// errAtEnd stops consuming when StopAtEnd found the end.
var errAtEnd = errors.New("at the end")

// errNoMetadata is wrapped by the error of a message that is no JetStream
// delivery, which cannot be acked either; consuming stops.
var errNoMetadata = errors.New("message without JetStream metadata")

// jetStreamSource is the Source of one task of JetStream.
type jetStreamSource struct {
	cfg    Config
	name   string // stream/consumer, for errors
	nc     *nats.Conn
	cons   jetstream.Consumer
	last   uint64    // the stream's last sequence at open, for StopAtEnd
	epoch  time.Time // of jsHeld.touched
	buffer int       // messages read ahead of the spout before consuming pauses

	ready  chan jsItem   // fetched, not handed out; closed when consume returns
	space  chan struct{} // a token from Next when a paused consume may go on
	paused atomic.Bool   // consume waits for space
	ctx    context.Context
	cancel context.CancelFunc // stops the goroutines
	wg     sync.WaitGroup

	mu   sync.Mutex
	held map[uint64]*jsHeld // by stream sequence
	err  error              // why consume stopped, if not at the end
	// pending is the consumer's messages not yet delivered, as the last
	// delivery's metadata said; inHand those fetched and not yet handed
	// out. Both change together, so that Backlog never sees a message
	// counted twice or not at all.
	pending, inHand int64

	closed bool // set by Close; Next, Done, ... run on the spout's goroutine

	// termReason says the server honours a termination that gives a
	// reason (2.10.4 on); older servers ignore it, and the message came
	// back every AckWait.
	termReason bool
}

func openJetStream(cfg Config, name string, task, tasks int) (*jetStreamSource, error) {
	opts := append([]nats.Option{nats.Name(fmt.Sprintf("acktor jetstream %s task %d/%d", name, task, tasks))}, cfg.Options...)
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("source: jetstream %s: connecting to %s: %w", name, cfg.URL, err)
	}
	s, err := newJetStreamSource(cfg, name, nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("source: jetstream %s: %w", name, err)
	}
	return s, nil
}

func newJetStreamSource(cfg Config, name string, nc *nats.Conn) (*jetStreamSource, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), jetStreamOpenTimeout)
	defer cancel()
	stream, err := js.Stream(ctx, cfg.Stream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", cfg.Stream, err)
	}
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       cfg.Consumer,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxAckPending: cfg.MaxAckPending,
		FilterSubject: cfg.Subject,
	})
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", cfg.Consumer, err)
	}
	buffer := jetStreamReadAhead * cfg.Fetch
	s := &jetStreamSource{
		termReason: versionAtLeast(nc.ConnectedServerVersion(), 2, 10, 4),
		cfg:        cfg,
		name:       name,
		nc:         nc,
		cons:       cons,
		last:       stream.CachedInfo().State.LastSeq,
		epoch:      time.Now(),
		buffer:     buffer,
		// What the client library holds when consuming pauses comes on top.
		ready: make(chan jsItem, buffer+cfg.Fetch),
		space: make(chan struct{}, 1),
		held:  make(map[uint64]*jsHeld, buffer+cfg.Fetch),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(2)
	go s.consume()
	go s.keepInProgress()
	return s, nil
}

// consume runs in its own goroutine: it takes messages from the consumer
// into ready, pausing while ready holds the read-ahead, until the source
// closes, the end is reached (StopAtEnd) or an error that will not go away.
func (s *jetStreamSource) consume() {
	defer s.wg.Done()
	defer close(s.ready)
	var pause time.Duration
	for {
		if pause > 0 && !s.sleep(pause) {
			return
		}
		if !s.waitForSpace(0) {
			return
		}
		err := s.consumeSome()
		switch {
		case s.ctx.Err() != nil:
			return
		case errors.Is(err, errAtEnd):
			return
		case fatalConsumeError(err):
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
			return
		case err != nil:
			pause = min(max(2*pause, 50*time.Millisecond), jetStreamMaxPause)
		default:
			pause = 0
		}
	}
}

// fatalConsumeError tells the errors after which consuming again is
// pointless.
func fatalConsumeError(err error) bool {
	return errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, jetstream.ErrConsumerDeleted) ||
		errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrBadRequest) ||
		errors.Is(err, errNoMetadata)
}

// sleep waits for d unless the source closes first.
func (s *jetStreamSource) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// waitForSpace waits until ready holds at most half the read-ahead, for up
// to limit if it is positive. It returns false if the limit passed or the
// source closed.
func (s *jetStreamSource) waitForSpace(limit time.Duration) bool {
	if len(s.ready) <= s.buffer/2 {
		return true
	}
	var expired <-chan time.Time
	if limit > 0 {
		t := time.NewTimer(limit)
		defer t.Stop()
		expired = t.C
	}
	s.paused.Store(true)
	defer s.paused.Store(false)
	for len(s.ready) > s.buffer/2 {
		select {
		case <-s.space:
		case <-expired:
			return false
		case <-s.ctx.Done():
			return false
		}
	}
	return true
}

// consumeSome pulls messages through one iterator of the consumer, the
// client library asking for up to Fetch of them ahead. When ready holds the
// read-ahead it waits for Next to take half of it; if that takes longer than
// AckWait/10 it drains the iterator into ready, so that no message waits long
// where keepInProgress cannot see it, and returns nil. It returns errAtEnd
// when StopAtEnd found the end, or the iterator's error.
func (s *jetStreamSource) consumeSome() error {
	it, err := s.cons.Messages(jetstream.PullMaxMessages(s.cfg.Fetch))
	if err != nil {
		return err
	}
	for {
		var m jetstream.Msg
		if s.cfg.StopAtEnd {
			m, err = it.Next(jetstream.NextMaxWait(jetStreamEndPoll))
		} else {
			m, err = it.Next(jetstream.NextContext(s.ctx))
		}
		switch {
		case err == nil:
			if err := s.accept(m); err != nil {
				s.drain(it)
				return err
			}
			if len(s.ready) >= s.buffer && !s.waitForSpace(s.cfg.AckWait/10) {
				s.drain(it)
				return nil
			}
		case s.ctx.Err() != nil:
			s.drain(it)
			return s.ctx.Err()
		case errors.Is(err, nats.ErrTimeout): // StopAtEnd and nothing came
			if s.atEnd() {
				s.drain(it)
				return errAtEnd
			}
		case errors.Is(err, jetstream.ErrNoHeartbeat): // the iterator asks again
		default:
			it.Stop()
			return err
		}
	}
}

// drain stops the iterator and takes the messages it still has into ready.
func (s *jetStreamSource) drain(it jetstream.MessagesContext) {
	it.Drain()
	deadline := time.Now().Add(jetStreamDrainTimeout)
	for {
		wait := time.Until(deadline)
		if wait <= 0 {
			break
		}
		m, err := it.Next(jetstream.NextMaxWait(wait))
		if err != nil {
			break
		}
		if err := s.accept(m); err != nil {
			break
		}
	}
	it.Stop()
}

// accept keeps a fetched message and queues it for Next. Should ready be
// full (the client library held more than it should), the message is naked
// for another delivery.
func (s *jetStreamSource) accept(m jetstream.Msg) error {
	md, err := m.Metadata()
	if err != nil {
		return fmt.Errorf("%w on %s: %v", errNoMetadata, m.Subject(), err)
	}
	seq := md.Sequence.Stream
	h := &jsHeld{msg: m, touched: time.Since(s.epoch)}
	it := jsItem{root: source.Root{ID: seq, Time: md.Timestamp.UnixNano(),
		Attempt: int32(min(md.NumDelivered-1, math.MaxInt32))}}
	if payload, err := s.decode(m.Data()); err != nil {
		h.payload, h.dead = string(m.Data()), true
		it.bad = &source.BadRecord{ID: seq, Payload: h.payload,
			Reason: fmt.Sprintf("stream %s sequence %d: %v", md.Stream, seq, err)}
	} else {
		h.payload, it.root.Payload = payload, payload
	}
	s.mu.Lock()
	prev := s.held[seq]
	s.held[seq] = h // a redelivery of one held replaces it: its ack is the one that counts
	s.pending, s.inHand = int64(min(md.NumPending, math.MaxInt64/2)), s.inHand+1
	s.mu.Unlock()
	select {
	case s.ready <- it:
	default:
		s.mu.Lock()
		s.inHand--
		if s.held[seq] == h { // give the earlier delivery, if any, its entry back
			if prev != nil {
				s.held[seq] = prev
			} else {
				delete(s.held, seq)
			}
		}
		s.mu.Unlock()
		_ = m.Nak()
	}
	return nil
}

// decode runs cfg.Decode, turning a panic into an error: it runs on the
// source's goroutine, where nothing else would recover it.
func (s *jetStreamSource) decode(data []byte) (payload string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decoder panicked: %v", r)
		}
	}()
	return s.cfg.Decode(data)
}

// atEnd tells whether no message the stream had at open is left for the
// consumer: all acked (the ack floor passed them), or none pending at all.
func (s *jetStreamSource) atEnd() bool {
	ctx, cancel := context.WithTimeout(s.ctx, jetStreamInfoTimeout)
	defer cancel()
	info, err := s.cons.Info(ctx)
	if err != nil {
		return false
	}
	return info.AckFloor.Stream >= s.last || (info.NumPending == 0 && info.NumAckPending == 0)
}

// keepInProgress runs in its own goroutine: every AckWait/5 it tells the
// server that the messages held for more than AckWait/2 are in progress. A
// message may have waited up to AckWait/10 in the client library before the
// source took it (consumeSome), so the server hears at most 0.8×AckWait after
// the delivery.
func (s *jetStreamSource) keepInProgress() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.AckWait / 5)
	defer t.Stop()
	var msgs []jetstream.Msg
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		now := time.Since(s.epoch)
		old := now - s.cfg.AckWait/2
		msgs = msgs[:0]
		s.mu.Lock()
		for _, h := range s.held {
			if h.touched < old {
				h.touched = now
				msgs = append(msgs, h.msg)
			}
		}
		s.mu.Unlock()
		for _, m := range msgs {
			_ = m.InProgress() // fails only once acked, or without a connection
		}
		clear(msgs)
	}
}

// Next returns the next fetched message without blocking, or ErrNotReady if
// none is there yet.
func (s *jetStreamSource) Next() (source.Root, error) {
	if s.closed {
		return source.Root{}, fmt.Errorf("source: jetstream %s: %w", s.name, os.ErrClosed)
	}
	select {
	case it, ok := <-s.ready:
		if !ok {
			return source.Root{}, s.end()
		}
		s.mu.Lock()
		s.inHand--
		s.mu.Unlock()
		if s.paused.Load() && len(s.ready) <= s.buffer/2 {
			select {
			case s.space <- struct{}{}:
			default:
			}
		}
		if it.bad != nil {
			return source.Root{}, it.bad
		}
		return it.root, nil
	default:
		return source.Root{}, source.ErrNotReady
	}
}

// end is what Next returns once consuming stopped and ready is empty.
func (s *jetStreamSource) end() error {
	s.mu.Lock()
	err := s.err
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("source: jetstream %s: %w", s.name, err)
	}
	return io.EOF
}

// take removes and returns the held message id.
func (s *jetStreamSource) take(id uint64) (*jsHeld, bool) {
	s.mu.Lock()
	h, ok := s.held[id]
	delete(s.held, id)
	s.mu.Unlock()
	return h, ok
}

// Replay returns the kept payload of a message not yet Done or redelivered,
// and marks it dead-lettered: Done will terminate it.
func (s *jetStreamSource) Replay(id uint64) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.held[id]
	if !ok {
		return "", fmt.Errorf("source: jetstream %s: sequence %d is not held: %w", s.name, id, source.ErrUnknownRoot)
	}
	h.dead = true
	return h.payload, nil
}

// Done acks message id, or terminates it if it was dead-lettered, and
// forgets it. Failures are not reported: the server then delivers the
// message again after AckWait.
func (s *jetStreamSource) Done(id uint64) {
	h, ok := s.take(id)
	if !ok {
		return
	}
	if h.dead {
		if s.termReason {
			_ = h.msg.TermWithReason("dead-lettered")
		} else {
			_ = h.msg.Term()
		}
		return
	}
	_ = h.msg.Ack()
}

// Redeliver naks message id with the backoff delay of the failed attempt and
// forgets it.
func (s *jetStreamSource) Redeliver(id uint64, attempt int32) error {
	h, ok := s.take(id)
	if !ok {
		return fmt.Errorf("source: jetstream %s: redeliver sequence %d: %w", s.name, id, source.ErrUnknownRoot)
	}
	if err := h.msg.NakWithDelay(max(s.cfg.BackoffFunc(attempt), 0)); err != nil {
		return fmt.Errorf("source: jetstream %s: nak of sequence %d: %w", s.name, id, err)
	}
	return nil
}

// Backlog is the messages of the consumer still to come: those the server
// had not delivered at the last delivery, and those fetched here and not
// handed out yet (Backlogger).
func (s *jetStreamSource) Backlog() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending + s.inHand
}

// Total is -1: a stream has no known end.
func (s *jetStreamSource) Total() int64 { return -1 }

// GlobalIDs: a stream sequence names one message for every task of the consumer, and a Nak or an ack wait hands it to any of them.
func (s *jetStreamSource) GlobalIDs() {}

var _ source.GlobalIDs = (*jetStreamSource)(nil)

// Close stops the goroutines, naks the messages fetched but not handed out,
// flushes the acks and closes the connection. Calling it again does nothing.
func (s *jetStreamSource) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.cancel()
	s.wg.Wait()
	for more := true; more; {
		select {
		case it, ok := <-s.ready:
			if !ok {
				more = false
				break
			}
			if h, ok := s.take(it.root.ID); ok {
				_ = h.msg.Nak()
			}
		default:
			more = false
		}
	}
	s.mu.Lock()
	s.held = nil
	s.mu.Unlock()
	err := s.nc.FlushTimeout(jetStreamFlushTimeout)
	s.nc.Close()
	if err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		return fmt.Errorf("source: jetstream %s: sending acks at close: %w", s.name, err)
	}
	return nil
}

// versionAtLeast says whether a server version such as "2.9.10" or
// "2.11.0-beta.2" is major.minor.patch or later; an unreadable one is not.
func versionAtLeast(version string, major, minor, patch int) bool {
	version, _, _ = strings.Cut(version, "-")
	var v [3]int
	parts := strings.Split(version, ".")
	if len(parts) != 3 {
		return false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return false
		}
		v[i] = n
	}
	return slices.Compare(v[:], []int{major, minor, patch}) >= 0
}
