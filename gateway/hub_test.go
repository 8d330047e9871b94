package gateway

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeTicks drives a hub's pollers by hand: every poller shares one
// channel, and a test sends a tick for each poller it wants to run.
type fakeTicks struct{ c chan time.Time }

func (f *fakeTicks) tick(time.Duration) (<-chan time.Time, func()) { return f.c, func() {} }

// counterFetch returns values from a shared variable and counts its calls.
type counterFetch struct {
	mu    sync.Mutex
	v     string
	calls int
	seen  chan struct{}
}

func (f *counterFetch) fetch(context.Context) ([]byte, error) {
	f.mu.Lock()
	f.calls++
	v := f.v
	f.mu.Unlock()
	defer func() { f.seen <- struct{}{} }()
	if v == "err" {
		return nil, errors.New("boom")
	}
	return []byte(v), nil
}

func (f *counterFetch) set(v string) {
	f.mu.Lock()
	f.v = v
	f.mu.Unlock()
}

func recv(t *testing.T, s *subscriber) string {
	t.Helper()
	select {
	case v := <-s.updates:
		return string(v)
	case <-time.After(5 * time.Second):
		t.Fatal("no update")
		return ""
	}
}

func none(t *testing.T, s *subscriber) {
	t.Helper()
	select {
	case v := <-s.updates:
		t.Fatalf("unexpected update %s", v)
	default:
	}
}

// pollersGone fails unless every poller of h has ended: the hub's own
// goroutine leak check (goleak would see the Proto.Actor goroutines that
// other tests of the package leave behind).
func pollersGone(t *testing.T, h *hub) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		h.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a poller goroutine is still running")
	}
}

func newTestHub(max, buffer int) (*hub, *fakeTicks) {
	h := newHub(max, max, buffer)
	ft := &fakeTicks{c: make(chan time.Time)}
	h.tick = ft.tick
	return h, ft
}

// TestHubSharesOnePollerAndSendsChanges: subscribers of one topic share a
// poller; a value goes out only when it changed; a late subscriber gets the
// last one at once; the poller stops with its last subscriber.
func TestHubSharesOnePollerAndSendsChanges(t *testing.T) {
	h, ft := newTestHub(10, 4)
	f := &counterFetch{v: "1", seen: make(chan struct{}, 10)}
	a, err := h.subscribe("k", time.Second, f.fetch)
	if err != nil {
		t.Fatal(err)
	}
	<-f.seen
	if got := recv(t, a); got != "1" {
		t.Fatalf("first update %q", got)
	}
	b, _ := h.subscribe("k", time.Second, f.fetch)
	if got := recv(t, b); got != "1" {
		t.Fatalf("late subscriber got %q, want the last value", got)
	}
	ft.c <- time.Time{} // same value: nothing sent
	<-f.seen
	ft.c <- time.Time{} // a change goes to both
	f.set("2")
	<-f.seen
	ft.c <- time.Time{}
	<-f.seen
	if got := recv(t, a) + recv(t, b); got != "22" {
		t.Fatalf("after a change: %q", got)
	}
	none(t, a)
	f.set("err")
	ft.c <- time.Time{}
	<-f.seen
	if got := recv(t, a); !strings.Contains(got, `"error":"boom"`) {
		t.Fatalf("a failed fetch sends its error: %q", got)
	}
	if topics, subs := h.stats(); topics != 1 || subs != 2 {
		t.Fatalf("stats %d topics %d subs", topics, subs)
	}
	h.unsubscribe(a)
	h.unsubscribe(b)
	h.unsubscribe(b) // twice is harmless
	if topics, subs := h.stats(); topics != 0 || subs != 0 {
		t.Fatalf("after unsubscribing: %d topics %d subs", topics, subs)
	}
	pollersGone(t, h) // the last subscriber stopped its poller
	h.close()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls != 5 {
		t.Fatalf("%d fetches, want 5 (one poller)", f.calls)
	}
}

// TestHubDropsSlowConsumers: a subscriber that leaves its buffer full is
// dropped with a reason; the others keep getting updates.
func TestHubDropsSlowConsumers(t *testing.T) {
	h, ft := newTestHub(10, 2)
	defer pollersGone(t, h)
	defer h.close()
	f := &counterFetch{v: "0", seen: make(chan struct{}, 10)}
	slow, _ := h.subscribe("k", time.Second, f.fetch)
	fast, _ := h.subscribe("k", time.Second, f.fetch)
	<-f.seen
	recv(t, fast)
	for i := 1; i <= 2; i++ {
		f.set(string(rune('0' + i)))
		ft.c <- time.Time{}
		<-f.seen
		if got := recv(t, fast); got != string(rune('0'+i)) {
			t.Fatalf("fast got %q", got)
		}
	}
	select {
	case <-slow.gone:
		if !strings.Contains(slow.reason, "slow consumer: 2 updates unread") {
			t.Fatalf("reason %q", slow.reason)
		}
	default:
		t.Fatal("the slow subscriber was kept")
	}
	if _, subs := h.stats(); subs != 1 {
		t.Fatalf("%d subscribers, want 1", subs)
	}
	h.unsubscribe(slow) // the handler still unsubscribes: harmless
}

// TestHubBounds: subscriptions over the bound are refused; closing drops
// every subscriber with a reason and refuses new ones.
func TestHubBounds(t *testing.T) {
	h, _ := newTestHub(2, 1)
	defer pollersGone(t, h)
	f := &counterFetch{v: "x", seen: make(chan struct{}, 10)}
	a, _ := h.subscribe("a", time.Second, f.fetch)
	b, _ := h.subscribe("b", time.Second, f.fetch)
	if _, err := h.subscribe("c", time.Second, f.fetch); !errors.Is(err, errTooMany) || !strings.Contains(err.Error(), "at most 2") {
		t.Fatalf("third subscriber: %v", err)
	}
	h.close()
	for _, s := range []*subscriber{a, b} {
		<-s.gone
		if s.reason != "gateway is shutting down" {
			t.Fatalf("reason %q", s.reason)
		}
	}
	if _, err := h.subscribe("a", time.Second, f.fetch); err == nil {
		t.Fatal("a closed hub took a subscriber")
	}
}

// TestHubTopicBound: past maxTopics a subscription that would start a
// poller is refused, one that joins a topic is not, and a topic that ends
// frees its place.
func TestHubTopicBound(t *testing.T) {
	h := newHub(10, 2, 1)
	ft := &fakeTicks{c: make(chan time.Time)}
	h.tick = ft.tick
	defer pollersGone(t, h)
	defer h.close()
	f := &counterFetch{v: "x", seen: make(chan struct{}, 10)}
	subs := map[string][]*subscriber{}
	for _, tc := range []struct {
		key          string
		ok           bool
		topics, subs int // after it
	}{
		{"a", true, 1, 1},
		{"b", true, 2, 2},
		{"c", false, 2, 2}, // a third topic
		{"a", true, 2, 3},  // joins one
		{"b", true, 2, 4},
		{"d", false, 2, 4},
	} {
		sub, err := h.subscribe(tc.key, time.Second, f.fetch)
		if err == nil {
			subs[tc.key] = append(subs[tc.key], sub)
		}
		switch {
		case tc.ok && err != nil:
			t.Fatalf("subscribe %s: %v", tc.key, err)
		case !tc.ok && (!errors.Is(err, errTooManyTopics) || !strings.Contains(err.Error(), "2 polled, at most 2")):
			t.Fatalf("subscribe %s: %v, want too many topics", tc.key, err)
		}
		if topics, subs := h.stats(); topics != tc.topics || subs != tc.subs {
			t.Fatalf("after %s: %d topics, %d subscribers; want %d, %d", tc.key, topics, subs, tc.topics, tc.subs)
		}
	}
	for _, s := range subs["b"] {
		h.unsubscribe(s)
	}
	if _, err := h.subscribe("c", time.Second, f.fetch); err != nil {
		t.Fatalf("subscribe c once b ended: %v", err)
	}
}
