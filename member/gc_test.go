package member

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/acktor/acktor/cluster"
)

func TestGCPercent(t *testing.T) {
	cases := []struct {
		live, floor uint64
		base, want  int
	}{
		{live: 8 << 20, floor: 64 << 20, base: 100, want: 800},
		{live: 64 << 20, floor: 64 << 20, base: 100, want: 100},
		{live: 1 << 30, floor: 64 << 20, base: 100, want: 100},
		{live: 16 << 20, floor: 64 << 20, base: 300, want: 400},
		{live: 0, floor: 64 << 20, base: 100, want: 1600}, // the runtime's 4 MB minimum heap, scaled: 64 MB
		{live: 2 << 20, floor: 64 << 20, base: 100, want: 1600},
		{live: 8 << 20, floor: 0, base: 100, want: 100},
	}
	for _, tc := range cases {
		if got := gcPercent(tc.live, tc.floor, tc.base); got != tc.want {
			t.Errorf("gcPercent(%d, %d, %d) = %d, want %d", tc.live, tc.floor, tc.base, got, tc.want)
		}
	}
}

// TestNextPercent: the percentage doubles while collections come more
// often than gcEvery, halves once they come four times as seldom, and
// stays within the base and the limit.
func TestNextPercent(t *testing.T) {
	for _, tc := range []struct {
		cur, base, limit int
		interval         time.Duration
		want             int
	}{
		{cur: 100, base: 100, limit: 1600, interval: 10 * time.Millisecond, want: 200},
		{cur: 1200, base: 100, limit: 1600, interval: 10 * time.Millisecond, want: 1600},
		{cur: 1600, base: 100, limit: 1600, interval: 0, want: 1600},
		{cur: 400, base: 100, limit: 1600, interval: gcEvery, want: 400},
		{cur: 400, base: 100, limit: 1600, interval: 4 * gcEvery, want: 400},
		{cur: 400, base: 100, limit: 1600, interval: time.Second, want: 200},
		{cur: 150, base: 100, limit: 1600, interval: time.Second, want: 100},
		{cur: 800, base: 100, limit: 300, interval: 2 * gcEvery, want: 300},      // the live heap grew
		{cur: 100, base: 100, limit: 100, interval: time.Millisecond, want: 100}, // a large live heap
		{cur: 300, base: 300, limit: 100, interval: time.Second, want: 300},      // the user's GOGC is the least
	} {
		if got := nextPercent(tc.cur, tc.base, tc.limit, tc.interval); got != tc.want {
			t.Errorf("nextPercent(%d, %d, %d, %v) = %d, want %d", tc.cur, tc.base, tc.limit, tc.interval, got, tc.want)
		}
	}
}

// TestTuneGC: the tuner raises the percentage over a small live heap that
// is collected often, puts the old one back when stopped, leaves no
// goroutine, and keeps off when the environment sets GOGC.
func TestTuneGC(t *testing.T) {
	tunerTest(t)
	stop := tuneGC(1 << 40)
	if p := percent(); p != 100 {
		t.Errorf("percentage %d before a collection, want 100", p)
	}
	collectUntil(t, func(p int) bool { return p > 100 }, "more than 100")
	stop()
	if p := percent(); p != 100 {
		t.Errorf("percentage %d after the tuner stopped, want 100", p)
	}
}

// TestPaceGC: a member of a cluster of processes runs under the tuner; an
// embedded member leaves the collector at its percentage.
func TestPaceGC(t *testing.T) {
	tunerTest(t)
	for _, tc := range []struct {
		provider string
		tuned    bool
	}{
		{"embedded", false},
		{"automanaged", true},
		{"etcd", true},
	} {
		stop := paceGC(cluster.Config{Provider: tc.provider})
		if tc.tuned {
			collectUntil(t, func(p int) bool { return p > 100 }, "more than 100")
		} else {
			for range 5 {
				runtime.GC()
			}
			time.Sleep(10 * time.Millisecond) // time for a tuner, if there were one
			if p := percent(); p != 100 {
				t.Errorf("provider %s: percentage %d, want GOGC's 100", tc.provider, p)
			}
		}
		stop()
		if p := percent(); p != 100 {
			t.Errorf("provider %s: percentage %d after the member ended, want 100", tc.provider, p)
		}
	}
}

func TestTuneGCKeepsOff(t *testing.T) {
	t.Setenv("GOGC", "150")
	old := debug.SetGCPercent(150)
	defer debug.SetGCPercent(old)
	tuneGC(1 << 40)()
	if p := percent(); p != 150 {
		t.Errorf("percentage %d with GOGC=150 set, want 150", p)
	}
}

// TestTuneGCAfterCollection: collections in quick succession take the
// percentage to the limit for the live heap the last collection measured,
// a live heap that grew and one that shrank, and keep it there.
func TestTuneGCAfterCollection(t *testing.T) {
	tunerTest(t)
	const floor = 64 << 20
	defer tuneGC(floor)()
	var ballast []byte
	for _, size := range []int{48 << 20, 0} {
		ballast = make([]byte, size)
		atLimit := func(p int) bool { return p == gcPercent(liveHeap(), floor, 100) } // the limit follows the last collection
		collectUntil(t, atLimit, fmt.Sprintf("the limit for %d MB held", size>>20))
		for range 3 { // doubled again, it stays at the limit
			collectUntil(t, atLimit, fmt.Sprintf("the limit for %d MB held, collected again", size>>20))
		}
	}
	runtime.KeepAlive(ballast)
}

// TestTuneGCLowersWhenSeldom: a collection that comes more than four times
// gcEvery after the one before halves the percentage, and the next ones,
// which follow at once, double it again.
func TestTuneGCLowersWhenSeldom(t *testing.T) {
	tunerTest(t)
	defer tuneGC(1 << 40)()
	collectUntil(t, func(p int) bool { return p >= 400 }, "400 or more")
	const seldom = 4*gcEvery + 50*time.Millisecond
	time.Sleep(seldom) // the tuner's work for the collections before is done (it may lag collectUntil's read)
	before := percent()
	time.Sleep(seldom) // nothing allocates: no collection comes by itself
	runtime.GC()
	deadline := time.Now().Add(10 * time.Second)
	for percent() == before && time.Now().Before(deadline) { // the tuner runs once the collection has ended
		time.Sleep(time.Millisecond)
	}
	if p := percent(); p != before/2 {
		t.Fatalf("percentage %d after a collection %v after the one before, want %d (half of %d)", p, seldom, before/2, before)
	}
	collectUntil(t, func(p int) bool { return p >= before }, fmt.Sprintf("%d or more again, doubled by collections that follow at once", before))
}

// collectUntil collects until the percentage the tuner set after a
// collection meets done, for at most 10 s; want says what done wants.
func collectUntil(t *testing.T, done func(p int) bool, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		time.Sleep(time.Millisecond) // the tuner runs once the collection has ended
		p := percent()
		if done(p) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("percentage %d after 10 s of collections, want %s", p, want)
		}
	}
}

// TestTuneGCStops: once stopped, the tuner leaves the percentage it put
// back alone, whatever collections come after.
func TestTuneGCStops(t *testing.T) {
	tunerTest(t)
	tuneGC(64 << 20)()
	for range 5 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // time for a cleanup still armed to run, if it would tune
		if p := percent(); p != 100 {
			t.Fatalf("percentage %d after the tuner stopped and the heap was collected, want 100", p)
		}
	}
}

// liveHeap is the live heap the last collection measured.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestTuneGCOverlapping: members run in one process share the tuner; the
// percentage the first found comes back when the last stops, whichever
// order they stop in, and a stop called twice counts once.
func TestTuneGCOverlapping(t *testing.T) {
	tunerTest(t)
	for _, order := range []string{"first ends first", "last ends first"} {
		t.Run(order, func(t *testing.T) {
			stop1 := tuneGC(1 << 40)
			stop2 := tuneGC(1 << 40)
			collectUntil(t, func(p int) bool { return p > 100 }, "more than 100")
			if order == "first ends first" {
				stop1()
				stop1()
			} else {
				stop2()
				stop2()
			}
			if p := percent(); p <= 100 {
				t.Errorf("percentage %d while a tuner runs, want more than 100", p)
			}
			stop1()
			stop2()
			if p := percent(); p != 100 {
				t.Errorf("percentage %d after both tuners stopped, want 100", p)
			}
		})
	}
}

// tunerTest skips a test of the tuner when GOGC is set, checks that it
// leaves no goroutine, and starts it at GOGC 100, putting the percentage
// back afterwards.
func tunerTest(t *testing.T) {
	t.Helper()
	if os.Getenv("GOGC") != "" {
		t.Skip("GOGC is set: the tuner keeps off, as TestTuneGCKeepsOff checks")
	}
	ignore := goleak.IgnoreCurrent()
	old := debug.SetGCPercent(100)
	t.Cleanup(func() {
		debug.SetGCPercent(old)
		goleak.VerifyNone(t, ignore)
	})
}

// percent reads the collector's percentage (without setting it, which
// could undo a tuner's setting made in between).
func percent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}
