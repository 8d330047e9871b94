package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// BenchmarkCounterRead is the latency of GET /api/counters over loopback:
// a point read of two keys and a top-10, each a query of every counter task.
func BenchmarkCounterRead(b *testing.B) {
	srv := running(b, "")
	for _, q := range []string{"key=a&key=b", "top=10"} {
		b.Run(q, func(b *testing.B) {
			url := srv.URL + "/api/counters/words?" + q
			for b.Loop() {
				res, err := http.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				res.Body.Close()
				if res.StatusCode != 200 {
					b.Fatalf("status %d", res.StatusCode)
				}
			}
		})
	}
}

// BenchmarkPushFanout pushes b.N changes of one stream to 1000 WebSocket
// subscribers on loopback and waits, for each, until every subscriber has
// it: one poll per change, whatever the number of subscribers.
func BenchmarkPushFanout(b *testing.B) {
	const subs = 1000
	s := &Server{log: quiet(), hub: newHub(subs, DefaultMaxTopics, subBuffer), closing: make(chan struct{})}
	ticks := make(chan time.Time)
	s.hub.tick = func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} }
	var val atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.stream(w, r, "t", time.Second, func(context.Context) ([]byte, error) {
			return strconv.AppendInt(nil, val.Load(), 10), nil
		})
	}))
	defer srv.Close()
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	got := map[int64]int{}
	var wg sync.WaitGroup
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	for range subs {
		c, _, err := websocket.Dial(ctx, url, nil)
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.CloseNow()
			for {
				_, m, err := c.Read(ctx)
				if err != nil {
					return
				}
				v, _ := strconv.ParseInt(string(m), 10, 64)
				mu.Lock()
				got[v]++
				cond.Broadcast()
				mu.Unlock()
			}
		}()
	}
	wait := func(v int64) {
		mu.Lock()
		for got[v] < subs {
			cond.Wait()
		}
		mu.Unlock()
	}
	wait(0)
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		val.Store(int64(i + 1))
		ticks <- time.Time{}
		wait(int64(i + 1))
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(subs*b.N)/el.Seconds(), "deliveries/s")
	b.ReportMetric(float64(el.Microseconds())/float64(b.N)/1000, "ms/fanout")
	cancel()
	wg.Wait()
}
