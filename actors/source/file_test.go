package source

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// wantLines parses content the way File must: one root per non-empty line,
// keyed by the offset of the line's start, one trailing "\r" stripped.
func wantLines(content string) map[uint64]string {
	want := make(map[uint64]string)
	off := 0
	for off < len(content) {
		end := strings.IndexByte(content[off:], '\n')
		if end < 0 {
			end = len(content)
		} else {
			end += off
		}
		line := strings.TrimSuffix(content[off:end], "\r")
		if line != "" {
			want[uint64(off)] = line
		}
		off = end + 1
	}
	return want
}

func writeFile(t testing.TB, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "input.txt")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// readAll drains src and fails on any error but io.EOF.
func readAll(t testing.TB, src Source) []Root {
	t.Helper()
	var roots []Root
	for {
		r, err := src.Next()
		if errors.Is(err, io.EOF) {
			return roots
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		roots = append(roots, r)
	}
}

// randomContent builds a deterministic file mixing long and short lines,
// empty lines, CRLF and lone "\r".
func randomContent(seed uint64, lines int) string {
	rng := rand.New(rand.NewPCG(seed, 0))
	var b strings.Builder
	for i := range lines {
		switch rng.IntN(8) {
		case 0: // empty line
		case 1:
			b.WriteString("\r") // empty CRLF line
		case 2:
			b.WriteString(strings.Repeat("x", rng.IntN(3*fileBufSize)))
		default:
			for range rng.IntN(12) + 1 {
				b.WriteByte(byte('a' + rng.IntN(26)))
			}
			if rng.IntN(4) == 0 {
				b.WriteString("\r")
			}
		}
		if i < lines-1 || rng.IntN(2) == 0 {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func TestFileSplits(t *testing.T) {
	cases := []struct {
		name    string
		content string
	}{
		{"empty file", ""},
		{"one line with newline", "hello\n"},
		{"one line without newline", "hello"},
		{"trailing newline", "alpha\nbeta\ngamma\n"},
		{"no trailing newline", "alpha\nbeta\ngamma"},
		{"crlf", "alpha\r\nbeta\r\n\r\ngamma\r\n"},
		{"crlf no trailing newline", "alpha\r\nbeta\r\ngamma\r"},
		{"empty lines", "\n\nalpha\n\n\nbeta\n\n"},
		{"only newlines", "\n\n\n\n\n\n\n\n"},
		{"only crlf", "\r\n\r\n\r\n\r"},
		{"inner carriage returns", "\r\rx\n\ra\r\n\r\r\n"},
		{"single characters", "a\nb\nc\nd\ne\nf\ng\nh\ni\n"},
		{"huge single line", strings.Repeat("h", 5*fileBufSize+17)},
		{"huge single line with newline", strings.Repeat("h", 5*fileBufSize+17) + "\n"},
		{"huge line among short ones", "a\nb\n" + strings.Repeat("h", 3*fileBufSize) + "\nc\nd"},
		{"random 1", randomContent(1, 50)},
		{"random 2", randomContent(2, 200)},
		{"random 3", randomContent(3, 7)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, tc.content)
			want := wantLines(tc.content)
			for tasks := 1; tasks <= 7; tasks++ {
				checkSplit(t, path, tc.content, want, tasks)
			}
		})
	}
}

// checkSplit opens all tasks of a file and checks that together they yield
// every wanted line exactly once, with Total, Replay and IDs right.
func checkSplit(t *testing.T, path, content string, want map[uint64]string, tasks int) {
	t.Helper()
	seen := make(map[uint64]int)
	sources := make([]Source, tasks)
	for task := range tasks {
		src, err := File(path)(task, tasks)
		if err != nil {
			t.Fatalf("tasks=%d task=%d: open: %v", tasks, task, err)
		}
		defer src.Close()
		sources[task] = src
		roots := readAll(t, src)
		if got := src.Total(); got != int64(len(roots)) {
			t.Errorf("tasks=%d task=%d: Total()=%d, Next yielded %d", tasks, task, got, len(roots))
		}
		lo, hi := splitPoint(int64(len(content)), task, tasks), splitPoint(int64(len(content)), task+1, tasks)
		for _, r := range roots {
			seen[r.ID]++
			if r.ID < uint64(lo) || r.ID >= uint64(hi) {
				t.Errorf("tasks=%d task=%d: root at %d outside [%d, %d)", tasks, task, r.ID, lo, hi)
			}
			if w, ok := want[r.ID]; !ok || w != r.Payload {
				t.Errorf("tasks=%d task=%d: root %d = %.40q, want %.40q (present %v)", tasks, task, r.ID, r.Payload, w, ok)
			}
			got, err := src.Replay(r.ID)
			if err != nil || got != r.Payload {
				t.Errorf("tasks=%d task=%d: Replay(%d) = %.40q, %v; want %.40q", tasks, task, r.ID, got, err, r.Payload)
			}
		}
		if _, err := src.Next(); !errors.Is(err, io.EOF) {
			t.Errorf("tasks=%d task=%d: Next after EOF: %v, want io.EOF", tasks, task, err)
		}
	}
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("tasks=%d: line at %d read %d times, want once", tasks, id, seen[id])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("tasks=%d: read %d distinct lines, want %d", tasks, len(seen), len(want))
	}
	// Every task refuses the lines of the other tasks.
	for task, src := range sources {
		for id := range want {
			lo, hi := splitPoint(int64(len(content)), task, tasks), splitPoint(int64(len(content)), task+1, tasks)
			if id >= uint64(lo) && id < uint64(hi) {
				continue
			}
			if _, err := src.Replay(id); !errors.Is(err, ErrUnknownRoot) {
				t.Errorf("tasks=%d task=%d: Replay(%d) of another task: %v, want ErrUnknownRoot", tasks, task, id, err)
			}
		}
	}
}

func TestFileReplayBadOffset(t *testing.T) {
	content := "alpha\n\nbeta\r\ngamma"
	path := writeFile(t, content)
	src, err := File(path)(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for _, off := range []uint64{1, 5, 6, 8, 11, 12, 15, uint64(len(content)), 1 << 40} {
		t.Run(fmt.Sprint(off), func(t *testing.T) {
			_, err := src.Replay(off)
			if !errors.Is(err, ErrUnknownRoot) {
				t.Fatalf("Replay(%d) = %v, want ErrUnknownRoot", off, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, path) || !strings.Contains(msg, fmt.Sprint(off)) {
				t.Errorf("error %q does not name the file and offset %d", msg, off)
			}
		})
	}
	for off, line := range map[uint64]string{0: "alpha", 7: "beta", 13: "gamma"} {
		if got, err := src.Replay(off); err != nil || got != line {
			t.Errorf("Replay(%d) = %q, %v; want %q", off, got, err, line)
		}
	}
}

func TestFileLineTooLong(t *testing.T) {
	content := "ok\n" + strings.Repeat("z", MaxLineBytes+1) + "\nafter\n"
	path := writeFile(t, content)
	src, err := File(path)(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if r, err := src.Next(); err != nil || r.Payload != "ok" {
		t.Fatalf("first Next = %v, %v", r, err)
	}
	for range 2 { // the error is sticky
		_, err = src.Next()
		if !errors.Is(err, ErrLineTooLong) || !strings.Contains(err.Error(), "offset 3") || !strings.Contains(err.Error(), path) {
			t.Fatalf("Next = %v, want ErrLineTooLong at offset 3 of %s", err, path)
		}
	}
	if _, err := src.Replay(3); !errors.Is(err, ErrLineTooLong) {
		t.Errorf("Replay(3) = %v, want ErrLineTooLong", err)
	}

	// A line of exactly MaxLineBytes is fine.
	path = writeFile(t, strings.Repeat("y", MaxLineBytes)+"\r\n")
	src2, err := File(path)(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer src2.Close()
	r, err := src2.Next()
	if err != nil || len(r.Payload) != MaxLineBytes {
		t.Fatalf("Next on a line of MaxLineBytes: len %d, %v", len(r.Payload), err)
	}
	if got, err := src2.Replay(0); err != nil || got != r.Payload {
		t.Fatalf("Replay on a line of MaxLineBytes: len %d, %v", len(got), err)
	}
}

func TestFileOpenErrors(t *testing.T) {
	path := writeFile(t, "a\n")
	cases := []struct {
		name        string
		path        string
		task, tasks int
		want        string
		is          error
	}{
		{"zero tasks", path, 0, 0, "tasks is 0", nil},
		{"negative task", path, -1, 2, "task is -1", nil},
		{"task out of range", path, 2, 2, "task is 2", nil},
		{"missing file", filepath.Join(t.TempDir(), "missing"), 0, 1, "missing", os.ErrNotExist},
		{"directory", t.TempDir(), 0, 1, "not a regular file", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src, err := File(tc.path)(tc.task, tc.tasks)
			if err == nil {
				src.Close()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "source: file "+tc.path+": ") {
				t.Errorf("error %q, want it to name %q and contain %q", err, tc.path, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v does not wrap %v", err, tc.is)
			}
		})
	}
}

func TestFileClose(t *testing.T) {
	src, err := File(writeFile(t, "a\nb\n"))(0, 1)
	if err != nil {
		t.Fatal(err)
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
	if _, err := src.Replay(0); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Replay after Close: %v, want os.ErrClosed", err)
	}
}

func TestFileNextAllocs(t *testing.T) {
	var b bytes.Buffer
	for i := range 5000 {
		fmt.Fprintf(&b, "line number %d of the allocation test\n", i)
	}
	src, err := File(writeFile(t, b.String()))(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := src.Next(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Errorf("Next allocates %v times per line, want at most 1 (the payload)", allocs)
	}
}

// FuzzFileSplit checks the split invariants on arbitrary content; `go test`
// runs the seed corpus only.
func FuzzFileSplit(f *testing.F) {
	for _, s := range []string{"", "\n", "a", "a\r\n\r\nb", "\r", "ab\ncd\n\nef\r"} {
		f.Add(s, uint8(3))
	}
	f.Fuzz(func(t *testing.T, content string, tasks uint8) {
		path := writeFile(t, content)
		checkSplit(t, path, content, wantLines(content), int(tasks%9)+1)
	})
}

func BenchmarkFileNext(b *testing.B) {
	var buf bytes.Buffer
	for i := range 100000 {
		fmt.Fprintf(&buf, "ka lomi nu perasoti vu ze ba do fi gu %d\n", i)
	}
	path := writeFile(b, buf.String())
	src, err := File(path)(0, 1)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(buf.Len() / 100000))
	// Reopening at EOF is timed too, amortized over the 100000 lines:
	// stopping the timer inside the loop makes allocations misreported.
	for b.Loop() {
		_, err := src.Next()
		if errors.Is(err, io.EOF) {
			src.Close()
			if src, err = File(path)(0, 1); err != nil {
				b.Fatal(err)
			}
			continue
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	src.Close()
}

// TestSeek: a source opened afresh and sought to where another stopped
// yields exactly the rest, for files and generators.
func TestSeek(t *testing.T) {
	text := "one\n\ntwo\r\nthree four\nfive\n\nsix"
	path := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	gen, err := Generator(GeneratorConfig{Lines: 50, WordsPerLine: 3, Vocabulary: 20, Skew: 1.5, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		name string
		make Factory
	}{{"file", File(path)}, {"generator", gen}} {
		for tasks := 1; tasks <= 3; tasks++ {
			for task := range tasks {
				var all []Root
				src := must(t, f.make, task, tasks)
				for r, err := src.Next(); err == nil; r, err = src.Next() {
					all = append(all, r)
				}
				for stop := range len(all) + 1 {
					first := must(t, f.make, task, tasks)
					for range stop {
						if _, err := first.Next(); err != nil {
							t.Fatal(err)
						}
					}
					pos := first.(Seeker).Position()
					second := must(t, f.make, task, tasks)
					if err := second.(Seeker).Seek(pos); err != nil {
						t.Fatalf("%s %d/%d: seek %d: %v", f.name, task, tasks, pos, err)
					}
					var rest []Root
					for r, err := second.Next(); err == nil; r, err = second.Next() {
						rest = append(rest, r)
					}
					if !slices.Equal(rest, all[stop:]) {
						t.Fatalf("%s %d/%d: after %d roots the rest is %v, want %v", f.name, task, tasks, stop, rest, all[stop:])
					}
				}
			}
		}
	}
	src := must(t, File(path), 0, 1)
	for _, bad := range []uint64{2, 1000} { // mid-line; past the end
		if err := src.(Seeker).Seek(bad); err == nil {
			t.Errorf("file Seek(%d) accepted", bad)
		}
	}
	if err := must(t, gen, 1, 3).(Seeker).Seek(3); err == nil {
		t.Error("generator Seek to another task's line accepted")
	}
}

func must(t *testing.T, f Factory, task, tasks int) Source {
	t.Helper()
	s, err := f(task, tasks)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
