package member

import (
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

// TestTuneGC: the tuner raises the percentage over a small live heap, puts
// the old one back when stopped, leaves no goroutine, and keeps off when
// the environment sets GOGC.
func TestTuneGC(t *testing.T) {
	tunerTest(t)
	stop := tuneGC(1 << 40)
	if p := percent(); p <= 100 {
		t.Errorf("percentage %d under the tuner, want more than 100", p)
	}
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
		if p := percent(); (p > 100) != tc.tuned {
			t.Errorf("provider %s: percentage %d, want tuned (over 100) %v", tc.provider, p, tc.tuned)
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

// TestTuneGCAfterCollection: after each collection the percentage is the
// one for the live heap that collection measured, a live heap that grew
// and one that shrank.
func TestTuneGCAfterCollection(t *testing.T) {
	tunerTest(t)
	const floor = 64 << 20
	defer tuneGC(floor)()
	var ballast []byte
	for _, size := range []int{48 << 20, 0} {
		ballast = make([]byte, size)
		runtime.GC()
		deadline := time.Now().Add(10 * time.Second)
		for { // want follows the last collection: another may come while it waits
			p, want := percent(), gcPercent(liveHeap(), floor, 100)
			if p == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("live heap with %d MB held: percentage %d 10 s after a collection, want %d", size>>20, p, want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	runtime.KeepAlive(ballast)
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
