package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// A hub fans a polled value out to its subscribers. Each distinct stream
// (a counter query, the tracker's status) is one topic with one poller, however
// many clients watch it: the pipeline is asked once per interval, never
// pushed into, so clients cannot back-pressure it. A value is sent only when
// it changed. A subscriber whose buffer is full is dropped with a reason, so
// a slow client costs at most its buffer.
type hub struct {
	mu        sync.Mutex
	topics    map[string]*topic
	subs      int
	max       int // subscribers at most, over every topic
	maxTopics int // topics (pollers) at most
	buffer    int // updates a subscriber may have unread
	tick      func(d time.Duration) (<-chan time.Time, func())
	wg        sync.WaitGroup
	closed    bool
	dropped   uint64 // slow consumers dropped
}

// fetchFunc produces a topic's current value, JSON.
type fetchFunc func(ctx context.Context) ([]byte, error)

type topic struct {
	key    string
	every  time.Duration
	fetch  fetchFunc
	subs   map[*subscriber]struct{}
	last   []byte
	cancel context.CancelFunc
}

// subscriber is one client's end of a topic.
type subscriber struct {
	updates chan []byte
	gone    chan struct{} // closed when the hub dropped the subscriber
	reason  string        // why, once gone is closed
	closing bool          // ... because the gateway shuts down, not for the subscriber's fault
	t       *topic
}

// errTooMany refuses a subscription over the hub's bound of subscribers;
// errTooManyTopics one that would start a poller over its bound of topics.
var (
	errTooMany       = errors.New("too many subscribers")
	errTooManyTopics = errors.New("too many distinct streams")
)

func newHub(maxSubs, maxTopics, buffer int) *hub {
	return &hub{topics: map[string]*topic{}, max: maxSubs, maxTopics: maxTopics, buffer: buffer,
		tick: func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(d)
			return t.C, t.Stop
		}}
}

// subscribe adds a subscriber to the topic key, starting its poller (fetch
// every `every`) if it is the first. A late subscriber gets the last value
// at once. Topics are bounded apart from subscribers: each is a poller
// that queries the actors, and distinct queries are cheap for a client to
// make, so a subscriber that would start a topic over maxTopics is refused
// (errTooManyTopics) while one that joins a topic is not.
func (h *hub) subscribe(key string, every time.Duration, fetch fetchFunc) (*subscriber, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, errors.New("gateway is shutting down")
	}
	if h.subs >= h.max {
		return nil, fmt.Errorf("%w: %d, at most %d", errTooMany, h.subs, h.max)
	}
	t := h.topics[key]
	if t == nil && len(h.topics) >= h.maxTopics {
		return nil, fmt.Errorf("%w: %d polled, at most %d; ask for one that is open (the same query and every) or retry later",
			errTooManyTopics, len(h.topics), h.maxTopics)
	}
	if t == nil {
		ctx, cancel := context.WithCancel(context.Background())
		t = &topic{key: key, every: every, fetch: fetch, subs: map[*subscriber]struct{}{}, cancel: cancel}
		h.topics[key] = t
		h.wg.Add(1)
		go h.poll(ctx, t)
	}
	s := &subscriber{updates: make(chan []byte, h.buffer), gone: make(chan struct{}), t: t}
	t.subs[s] = struct{}{}
	h.subs++
	if t.last != nil {
		s.updates <- t.last
	}
	return s, nil
}

// unsubscribe removes s (if the hub has not dropped it already) and stops
// its topic's poller when it was the last.
func (h *hub) unsubscribe(s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.remove(s)
}

func (h *hub) remove(s *subscriber) {
	t := s.t
	if _, ok := t.subs[s]; !ok {
		return
	}
	delete(t.subs, s)
	h.subs--
	if len(t.subs) == 0 {
		t.cancel()
		delete(h.topics, t.key)
	}
}

// poll fetches t's value every interval and publishes it when it changed.
func (h *hub) poll(ctx context.Context, t *topic) {
	defer h.wg.Done()
	c, stop := h.tick(t.every)
	defer stop()
	for {
		v, err := t.fetch(ctx)
		if err != nil {
			v = errorJSON(err.Error())
		}
		if ctx.Err() == nil {
			h.publish(t, v)
		}
		select {
		case <-ctx.Done():
			return
		case <-c:
		}
	}
}

// publish sends v to every subscriber of t if it differs from the last
// value, dropping subscribers that have a full buffer.
func (h *hub) publish(t *topic, v []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if bytes.Equal(v, t.last) {
		return
	}
	t.last = v
	for s := range t.subs {
		select {
		case s.updates <- v:
		default:
			s.reason = fmt.Sprintf("slow consumer: %d updates unread", cap(s.updates))
			h.dropped++
			close(s.gone)
			h.remove(s)
		}
	}
}

// close drops every subscriber and waits for the pollers.
func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	for _, t := range h.topics {
		for s := range t.subs {
			s.reason, s.closing = "gateway is shutting down", true
			close(s.gone)
			h.remove(s)
		}
	}
	h.mu.Unlock()
	h.wg.Wait()
}

// stats is the number of topics and subscribers.
func (h *hub) stats() (topics, subs int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.topics), h.subs
}

// droppedTotal is the number of slow consumers dropped so far.
func (h *hub) droppedTotal() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dropped
}
