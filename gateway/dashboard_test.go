package gateway

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/acktor/acktor/source"
)

// endless yields a root a millisecond until the run ends.
type endless struct {
	n    uint64
	next time.Time
}

func (e *endless) Next() (source.Root, error) {
	now := time.Now()
	if now.Before(e.next) {
		return source.Root{}, source.ErrNotReady
	}
	e.next = now.Add(time.Millisecond)
	e.n++
	return source.Root{ID: e.n, Payload: words(e.n)}, nil
}

func words(n uint64) string                         { return fmt.Sprintf("a%d b%d", n%7, n%5) }
func (e *endless) Replay(id uint64) (string, error) { return words(id), nil }
func (e *endless) Done(uint64)                      {}
func (e *endless) Total() int64                     { return -1 }
func (e *endless) Close() error                     { return nil }

// flowing serves a gateway over a word count that never ends.
func flowing(t *testing.T) *httptest.Server {
	t.Helper()
	srv, _ := wordsOver(t, &endless{}, "", nil)
	return srv
}

// chromium finds a Chromium to drive, or skips (fails when .ci/run asks
// for it with ACKTOR_REQUIRE_CHROMIUM=1).
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("ACKTOR_REQUIRE_CHROMIUM") == "1" {
		t.Fatal("chromium not found, and ACKTOR_REQUIRE_CHROMIUM=1")
	}
	t.Skip("chromium not found: install Debian's chromium package to run the dashboard test")
	return ""
}

// TestDashboardInChromium loads the dashboard in headless Chromium and
// checks that live numbers appear over WebSocket and change.
func TestDashboardInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	exe := chromium(t)
	srv := flowing(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	defer cancelTimeout()

	var mu sync.Mutex
	var pageErrors []string // script exceptions and console errors
	listen := func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *cdpruntime.EventExceptionThrown:
			pageErrors = append(pageErrors, fmt.Sprintf("exception at %s:%d: %s", ev.ExceptionDetails.URL, ev.ExceptionDetails.LineNumber, ev.ExceptionDetails.Text))
		case *cdpruntime.EventConsoleAPICalled:
			if ev.Type == cdpruntime.ConsoleAPICalledTypeError {
				pageErrors = append(pageErrors, fmt.Sprintf("console.error: %v", ev.Args))
			}
		}
	}
	if err := chromedp.Listen(ctx, listen); err != nil {
		t.Fatalf("listening to the page: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL)); err != nil {
		t.Fatalf("loading the dashboard: %v", err)
	}
	type page struct {
		Completed string `json:"completed"`
		Conn      string `json:"conn"`
		Ackers    int    `json:"ackers"`
		Top       int    `json:"top"`
		Stages    int    `json:"stages"`
		Members   int    `json:"members"`
	}
	read := func() (page, int) {
		p, err := chromedp.Run(ctx, chromedp.Evaluate[page](`({
			completed: document.getElementById("completed").textContent,
			conn: document.getElementById("conn").textContent,
			ackers: document.querySelectorAll("#ackers .bar").length,
			top: document.querySelectorAll("#top tr:not(.head)").length,
			stages: document.querySelectorAll("#stages tbody tr").length,
			members: document.querySelectorAll("#members tr").length})`))
		if err != nil {
			t.Fatalf("reading the dashboard: %v", err)
		}
		n, err := strconv.Atoi(strings.ReplaceAll(p.Completed, ",", ""))
		if err != nil {
			n = -1 // not there yet: "–"
		}
		return p, n
	}
	// until polls the page until ok says it is done.
	until := func(what string, ok func(page, int) bool) (page, int) {
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			p, n := read()
			if ok(p, n) {
				return p, n
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the dashboard shows %+v", what, p)
			}
		}
	}
	_, first := until("no completed count appeared", func(_ page, n int) bool { return n > 0 })
	_, second := until("the completed count did not change", func(_ page, n int) bool { return n > first })
	p, _ := until("no acker bars, stages and top words appeared", func(p page, _ int) bool {
		return p.Top == 10 && p.Ackers == 2 && p.Stages == 4 && p.Members == 1
	})
	if p.Conn != "live" {
		t.Fatalf("connection %q, want live", p.Conn)
	}
	// The time charts (the embedded uPlot) hold the stream's updates:
	// throughput, failures, latency, and a series per acker and per stage
	// (ρ, λ, μ).
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		points, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`charts.map(c => c.data[0].length)`))
		if err != nil {
			t.Fatalf("reading the charts: %v", err)
		}
		if len(points) == 7 && !slices.ContainsFunc(points, func(n int) bool { return n <= 2 }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the charts hold %v points, want 7 charts with data", points)
		}
	}
	t.Logf("completed went from %d to %d", first, second)
	// At a laptop's, a desktop's and a wide screen's width, no card cuts
	// its content off: what does not fit scrolls inside the card.
	shots := os.Getenv("ACKTOR_DASHBOARD_SHOTS") // a directory for screenshots, to look at
	for _, width := range []int64{800, 1400, 1920} {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, 1000)); err != nil {
			t.Fatalf("at %d px: %v", width, err)
		}
		time.Sleep(300 * time.Millisecond) // a layout and an update
		cut, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("section")].filter(s =>
			s.scrollWidth > s.clientWidth + 1 && getComputedStyle(s).overflowX !== "auto").map(s => s.querySelector("h2").textContent)`))
		if err != nil {
			t.Fatalf("at %d px: %v", width, err)
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("at %d px: %v", width, err)
		}
		if len(cut) > 0 {
			t.Errorf("at %d px these cards cut their content off: %q", width, cut)
		}
		if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(".chart canvas").length`)); err != nil || n != 7 {
			t.Errorf("at %d px: %d charts drawn (%v), want 7", width, n, err)
		}
		if shots != "" {
			if err := os.WriteFile(filepath.Join(shots, fmt.Sprintf("dashboard-%d.png", width)), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(pageErrors) > 0 {
		t.Fatalf("the page reported errors: %q", pageErrors)
	}
}
