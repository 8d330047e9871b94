package source

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"go.uber.org/goleak"
)

// nextReady calls Next until it returns something other than ErrNotReady.
func nextReady(t *testing.T, src Source) (Root, error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := src.Next()
		if !errors.Is(err, ErrNotReady) {
			return r, err
		}
		if time.Now().After(deadline) {
			t.Fatal("Next stayed ErrNotReady for 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

func openReader(t *testing.T, r io.Reader) Source {
	t.Helper()
	src, err := Reader(r, "stdin")(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func TestReaderCannotBeSplit(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, tc := range []struct {
		task, tasks int
		want        string
	}{
		{0, 2, "cannot be split"},
		{1, 3, "cannot be split"},
		{0, 0, "cannot be split"},
		{1, 1, "task is 1"},
	} {
		src, err := Reader(strings.NewReader("a\n"), "stdin")(tc.task, tc.tasks)
		if err == nil {
			src.Close()
			t.Fatalf("task %d of %d: no error", tc.task, tc.tasks)
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "stdin") {
			t.Errorf("task %d of %d: error %q, want it to contain %q", tc.task, tc.tasks, err, tc.want)
		}
	}
}

func TestReaderOpensOnce(t *testing.T) {
	defer goleak.VerifyNone(t)
	factory := Reader(strings.NewReader("a\n"), "stdin")
	src, err := factory(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if again, err := factory(0, 1); err == nil {
		again.Close()
		t.Fatal("second open succeeded")
	}
}

func TestReaderPipe(t *testing.T) {
	defer goleak.VerifyNone(t)
	pr, pw := io.Pipe()
	src := openReader(t, pr)
	defer src.Close()
	if src.Total() != -1 {
		t.Errorf("Total() = %d, want -1", src.Total())
	}
	if _, err := src.Next(); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Next before any input: %v, want ErrNotReady", err)
	}

	write := func(s string) {
		t.Helper()
		if _, err := io.WriteString(pw, s); err != nil {
			t.Fatal(err)
		}
	}
	want := func(id uint64, payload string) {
		t.Helper()
		r, err := nextReady(t, src)
		if err != nil || r.ID != id || r.Payload != payload {
			t.Fatalf("Next = %+v, %v; want {%d %q}", r, err, id, payload)
		}
	}
	write("one\r\n\n\r\ntwo\n") // returns once the goroutine consumed it
	want(0, "one")
	want(1, "two")
	if _, err := src.Next(); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Next with the pipe open and drained: %v, want ErrNotReady", err)
	}
	write("thr")
	write("ee") // a line split over two writes, with no final newline
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	want(2, "three")
	for range 2 {
		if _, err := nextReady(t, src); !errors.Is(err, io.EOF) {
			t.Fatalf("Next at the end: %v, want io.EOF", err)
		}
	}

	for id, payload := range []string{"one", "two", "three"} {
		if got, err := src.Replay(uint64(id)); err != nil || got != payload {
			t.Errorf("Replay(%d) = %q, %v; want %q", id, got, err, payload)
		}
	}
	src.Done(1)
	if _, err := src.Replay(1); !errors.Is(err, ErrUnknownRoot) {
		t.Errorf("Replay after Done: %v, want ErrUnknownRoot", err)
	}
	if _, err := src.Replay(3); !errors.Is(err, ErrUnknownRoot) {
		t.Errorf("Replay of an ID never handed out: %v, want ErrUnknownRoot", err)
	}
	if got, err := src.Replay(2); err != nil || got != "three" {
		t.Errorf("Replay(2) after Done(1) = %q, %v", got, err)
	}
}

func TestReaderReadError(t *testing.T) {
	defer goleak.VerifyNone(t)
	pr, pw := io.Pipe()
	src := openReader(t, pr)
	defer src.Close()
	boom := errors.New("boom")
	if _, err := io.WriteString(pw, "last\n"); err != nil {
		t.Fatal(err)
	}
	pw.CloseWithError(boom)
	if r, err := nextReady(t, src); err != nil || r.Payload != "last" {
		t.Fatalf("Next = %+v, %v; want the line before the error", r, err)
	}
	for range 2 {
		_, err := nextReady(t, src)
		if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "source: stdin: ") {
			t.Fatalf("Next after a read error: %v, want it wrapped", err)
		}
	}
}

func TestReaderManyLines(t *testing.T) {
	defer goleak.VerifyNone(t)
	const n = 3*ReaderBuffer + 5
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	src := openReader(t, strings.NewReader(b.String()))
	defer src.Close()
	for i := range n {
		r, err := nextReady(t, src)
		if err != nil || r.ID != uint64(i) || r.Payload != fmt.Sprintf("line %d", i) {
			t.Fatalf("Next #%d = %+v, %v", i, r, err)
		}
	}
	if _, err := nextReady(t, src); !errors.Is(err, io.EOF) {
		t.Fatalf("Next at the end: %v, want io.EOF", err)
	}
	if got := len(src.(*readerSource).pending); got != n {
		t.Errorf("%d payloads kept, want %d", got, n)
	}
	for i := range n {
		src.Done(uint64(i))
	}
	if got := len(src.(*readerSource).pending); got != 0 {
		t.Errorf("%d payloads kept after Done, want 0", got)
	}
}

// TestReaderLineTooLong: at the real MaxLineBytes, an over-long line is a
// BadRecord numbered in sequence, and the lines after it are still read.
func TestReaderLineTooLong(t *testing.T) {
	defer goleak.VerifyNone(t)
	src := openReader(t, strings.NewReader("ok\n\n"+strings.Repeat("x", MaxLineBytes+1)+"\nafter\n"))
	defer src.Close()
	if r, err := nextReady(t, src); err != nil || r.Payload != "ok" {
		t.Fatalf("Next = %+v, %v", r, err)
	}
	_, err := nextReady(t, src)
	var bad *BadRecord
	if !errors.As(err, &bad) {
		t.Fatalf("Next on the over-long line = %v, want a *BadRecord", err)
	}
	if bad.ID != 1 || bad.Payload != strings.Repeat("x", BadLinePrefixBytes) ||
		!strings.Contains(bad.Reason, fmt.Sprintf("stdin: line 3 is %d bytes", MaxLineBytes+1)) {
		t.Fatalf("bad record %d, payload of %d bytes, reason %q", bad.ID, len(bad.Payload), bad.Reason)
	}
	if r, err := nextReady(t, src); err != nil || r.ID != 2 || r.Payload != "after" {
		t.Fatalf("Next after the over-long line = %+v, %v; want root 2 \"after\"", r, err)
	}
	if _, err := nextReady(t, src); !errors.Is(err, io.EOF) {
		t.Fatalf("Next at the end = %v, want io.EOF", err)
	}
}

// readerWant is what a Reader must hand out for content, in order: the
// non-empty lines with their line numbers from 1.
func readerWant(content string) (lines []string, nums []int) {
	for i, line := range strings.Split(content, "\n") {
		if line = strings.TrimSuffix(line, "\r"); line != "" {
			lines, nums = append(lines, line), append(nums, i+1)
		}
	}
	return lines, nums
}

// TestReaderLongLines: a line over the limit is a BadRecord with the next
// sequence number, a bounded prefix, its line number and length, and the
// lines after it follow; Replay of its ID fails with ErrLineTooLong until
// Done.
func TestReaderLongLines(t *testing.T) {
	for _, tc := range longLineCases() {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			src, err := readerFactory(strings.NewReader(tc.content), "stdin", testLineLimit)(0, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			lines, nums := readerWant(tc.content)
			for i, line := range lines {
				id := uint64(i)
				r, err := nextReady(t, src)
				var bad *BadRecord
				switch {
				case len(line) > testLineLimit:
					if !errors.As(err, &bad) {
						t.Fatalf("Next #%d on a line of %d bytes = %+v, %v; want a *BadRecord", i, len(line), r, err)
					}
					if bad.ID != id || bad.Payload != badPrefix(line) {
						t.Errorf("bad record %d carries %.40q (%d bytes), want ID %d and the first %d bytes", bad.ID, bad.Payload, len(bad.Payload), id, len(badPrefix(line)))
					}
					if w := fmt.Sprintf("stdin: line %d is %d bytes, over the limit of %d bytes", nums[i], len(line), testLineLimit); !strings.Contains(bad.Reason, w) {
						t.Errorf("reason %q, want it to contain %q", bad.Reason, w)
					}
					if _, err := src.Replay(id); !errors.Is(err, ErrLineTooLong) {
						t.Errorf("Replay(%d) of a bad record = %v, want ErrLineTooLong", id, err)
					}
					src.Done(id)
					if _, err := src.Replay(id); !errors.Is(err, ErrUnknownRoot) {
						t.Errorf("Replay(%d) of a bad record after Done = %v, want ErrUnknownRoot", id, err)
					}
				case err != nil || r.ID != id || r.Payload != line:
					t.Fatalf("Next #%d = %d %.40q, %v; want %d %.40q", i, r.ID, r.Payload, err, id, line)
				default:
					if got, err := src.Replay(id); err != nil || got != line {
						t.Errorf("Replay(%d) = %.40q, %v; want %.40q", id, got, err, line)
					}
				}
			}
			if _, err := nextReady(t, src); !errors.Is(err, io.EOF) {
				t.Fatalf("Next at the end = %v, want io.EOF", err)
			}
			if n := len(src.(*readerSource).bad); n != 0 {
				t.Errorf("%d bad records remembered after Done, want 0", n)
			}
		})
	}
}

// TestReaderErrorInLongLine: a read error while skipping an over-long line
// is the error of the source, as anywhere else.
func TestReaderErrorInLongLine(t *testing.T) {
	defer goleak.VerifyNone(t)
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("a\n"+strings.Repeat("y", 3*fileBufSize)), iotest.ErrReader(boom))
	src, err := readerFactory(r, "stdin", testLineLimit)(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if r, err := nextReady(t, src); err != nil || r.Payload != "a" {
		t.Fatalf("Next = %+v, %v", r, err)
	}
	if _, err := nextReady(t, src); !errors.Is(err, boom) || !strings.Contains(err.Error(), "stdin: line 2") {
		t.Fatalf("Next = %v, want boom at line 2", err)
	}
}

func TestReaderCloseStopsGoroutine(t *testing.T) {
	t.Run("blocked on a full buffer", func(t *testing.T) {
		defer goleak.VerifyNone(t)
		src := openReader(t, strings.NewReader(strings.Repeat("x\n", 2*ReaderBuffer)))
		deadline := time.Now().Add(10 * time.Second)
		for len(src.(*readerSource).lines) < ReaderBuffer {
			if time.Now().After(deadline) {
				t.Fatal("the buffer never filled")
			}
			time.Sleep(time.Millisecond)
		}
		if err := src.Close(); err != nil {
			t.Fatal(err)
		}
		if err := src.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if _, err := src.Next(); !errors.Is(err, os.ErrClosed) {
			t.Errorf("Next after Close: %v, want os.ErrClosed", err)
		}
		if _, err := src.Replay(0); !errors.Is(err, ErrUnknownRoot) {
			t.Errorf("Replay after Close: %v, want ErrUnknownRoot", err)
		}
	})
	t.Run("blocked in Read until the writer closes", func(t *testing.T) {
		defer goleak.VerifyNone(t)
		pr, pw := io.Pipe()
		src := openReader(t, pr)
		if err := src.Close(); err != nil {
			t.Fatal(err)
		}
		pw.Close()
	})
	t.Run("blocked in Read until data arrives", func(t *testing.T) {
		defer goleak.VerifyNone(t)
		pr, pw := io.Pipe()
		r := &enteredReader{r: pr, entered: make(chan struct{})}
		src := openReader(t, r)
		<-r.entered // the goroutine is in Read
		if err := src.Close(); err != nil {
			t.Fatal(err)
		}
		// The pending Read takes this line; the goroutine then sees Close and
		// exits without reading again.
		if _, err := io.WriteString(pw, "late\n"); err != nil {
			t.Fatal(err)
		}
	})
}

// enteredReader closes entered when Read is first called.
type enteredReader struct {
	r       io.Reader
	entered chan struct{}
	once    sync.Once
}

func (e *enteredReader) Read(p []byte) (int, error) {
	e.once.Do(func() { close(e.entered) })
	return e.r.Read(p)
}
