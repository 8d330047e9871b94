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
	"unicode/utf8"
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
		for _, r := range roots {
			seen[r.ID]++
			if k := splitOf(int64(len(content)), r.ID, tasks*SplitsPerTask); k%tasks != task {
				t.Errorf("tasks=%d task=%d: root at %d is in split %d, not of the task's share", tasks, task, r.ID, k)
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
	// Every task replays every line: a run may grant it any split.
	for task, src := range sources {
		for id, line := range want {
			if got, err := src.Replay(id); err != nil || got != line {
				t.Errorf("tasks=%d task=%d: Replay(%d) = %.40q, %v; want %.40q", tasks, task, id, got, err, line)
			}
		}
	}
}

// splitOf is the split of splits whose byte range holds offset id.
func splitOf(size int64, id uint64, splits int) int {
	k := 0
	for k+1 < splits && splitPoint(size, k+1, splits) <= int64(id) {
		k++
	}
	return k
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

// TestFileLineTooLong: at the real MaxLineBytes, an over-long line is a
// BadRecord and the lines after it are still read.
func TestFileLineTooLong(t *testing.T) {
	content := "ok\n" + strings.Repeat("z", MaxLineBytes+1) + "\nafter\n"
	path := writeFile(t, content)
	src, err := File(path)(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if got := src.Total(); got != 3 {
		t.Errorf("Total() = %d, want 3 (the over-long line counts)", got)
	}
	if r, err := src.Next(); err != nil || r.Payload != "ok" {
		t.Fatalf("first Next = %v, %v", r, err)
	}
	_, err = src.Next()
	var bad *BadRecord
	if !errors.As(err, &bad) {
		t.Fatalf("Next on the over-long line = %v, want a *BadRecord", err)
	}
	if bad.ID != 3 || bad.Payload != strings.Repeat("z", BadLinePrefixBytes) ||
		!strings.Contains(bad.Reason, path) || !strings.Contains(bad.Reason, fmt.Sprintf("offset 3 is %d bytes", MaxLineBytes+1)) {
		t.Fatalf("bad record %d, payload of %d bytes, reason %q", bad.ID, len(bad.Payload), bad.Reason)
	}
	if r, err := src.Next(); err != nil || r.Payload != "after" || r.ID != uint64(3+MaxLineBytes+2) {
		t.Fatalf("Next after the over-long line = %d %q, %v; want %d \"after\"", r.ID, r.Payload, err, 3+MaxLineBytes+2)
	}
	if _, err := src.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("Next at the end = %v, want io.EOF", err)
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

// longLineCases are inputs with lines over testLineLimit: first, in the
// middle, last (with and without a terminator), in a row, at the limit, and
// spanning several buffers of the line reader.
func longLineCases() []struct{ name, content string } {
	mid := strings.Repeat("0123456789", 30)                  // over the limit, within one buffer
	huge := strings.Repeat("abcdefghij", 3*fileBufSize/10+7) // over several buffer fills
	at := strings.Repeat("k", testLineLimit)
	return []struct{ name, content string }{
		{"long first", huge + "\nnext\nlast\n"},
		{"long first within a buffer", mid + "\nnext\n"},
		{"long in the middle", "first\n" + huge + "\nlast\n"},
		{"long in the middle within a buffer", "first\n\n" + mid + "\n\nlast"},
		{"long last without newline", "first\nsecond\n" + huge},
		{"long last within a buffer without newline", "first\n" + mid},
		{"long last with CRLF", "first\n" + huge + "\r\n"},
		{"long last with a lone CR", "first\n" + huge + "\r"},
		{"long lines in a row", "a\n" + huge + "\n" + mid + "\r\n" + huge + "\nb"},
		{"only a long line", huge},
		{"at the limit and one over", at + "\r\n" + at + "k\n" + at + "\n"},
		{"a CR past the limit", at + "\r\r\n" + "tail"},
		{"long UTF-8 line", "x\n" + "a" + strings.Repeat("é", 3000) + "\ny"},
		{"random", randomContent(4, 60)},
	}
}

// testLineLimit is the line limit of the tests of over-long lines.
const testLineLimit = 100

// badPrefix is the Payload a BadRecord must carry for an over-long line:
// its longest valid UTF-8 prefix of at most BadLinePrefixBytes.
func badPrefix(line string) string {
	p := line[:min(len(line), BadLinePrefixBytes)]
	for !utf8.ValidString(p) {
		p = p[:len(p)-1]
	}
	return p
}

// TestFileLongLines: a line over the limit is a BadRecord with its offset,
// a bounded prefix and its length, and reading goes on after it, for every
// split of the file (so also when a split boundary falls inside it).
func TestFileLongLines(t *testing.T) {
	for _, tc := range longLineCases() {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, tc.content)
			for tasks := 1; tasks <= 7; tasks++ {
				checkLongSplit(t, path, tc.content, tasks)
			}
		})
	}
}

// TestFileLongLineAcrossSplits: a split boundary inside an over-long line
// gives it to the task it starts in, as a bad record, and the next task
// starts after it.
func TestFileLongLineAcrossSplits(t *testing.T) {
	huge := strings.Repeat("x", 3*fileBufSize)
	content := "a\n" + huge + "\nb\n"
	path := writeFile(t, content)
	if mid := splitPoint(int64(len(content)), 1, 2); mid <= 2 || mid >= int64(2+len(huge)) {
		t.Fatalf("the boundary %d is not inside the long line", mid)
	}
	want := [][]string{{"root 0 a", "bad 2"}, {fmt.Sprintf("root %d b", 3+len(huge))}}
	for task := range 2 {
		src, err := fileFactory(path, testLineLimit)(task, 2)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		var got []string
		for {
			r, err := src.Next()
			var bad *BadRecord
			if errors.Is(err, io.EOF) {
				break
			} else if errors.As(err, &bad) {
				got = append(got, fmt.Sprintf("bad %d", bad.ID))
				if want := fmt.Sprintf("is %d bytes", len(huge)); !strings.Contains(bad.Reason, want) || len(bad.Payload) != BadLinePrefixBytes {
					t.Errorf("task %d: bad record with %d bytes of payload and reason %q, want %d bytes and %q", task, len(bad.Payload), bad.Reason, BadLinePrefixBytes, want)
				}
			} else if err != nil {
				t.Fatalf("task %d: Next: %v", task, err)
			} else {
				got = append(got, fmt.Sprintf("root %d %s", r.ID, r.Payload))
			}
		}
		if !slices.Equal(got, want[task]) {
			t.Errorf("task %d of 2 read %q, want %q", task, got, want[task])
		}
		if src.Total() != int64(len(want[task])) {
			t.Errorf("task %d of 2: Total() = %d, want %d", task, src.Total(), len(want[task]))
		}
	}
}

// checkLongSplit opens all tasks of a file with testLineLimit and checks
// that together they hand out every non-empty line exactly once: as a root
// if it fits the limit, as a BadRecord if not, with Total counting both,
// Replay of a bad record's ID failing with ErrLineTooLong, and Position
// after a bad record being where a fresh source seeks to read on.
func checkLongSplit(t *testing.T, path, content string, tasks int) {
	t.Helper()
	want := wantLines(content)
	seen := make(map[uint64]int)
	size := int64(len(content))
	for task := range tasks {
		open := fileFactory(path, testLineLimit)
		src, err := open(task, tasks)
		if err != nil {
			t.Fatalf("tasks=%d task=%d: open: %v", tasks, task, err)
		}
		defer src.Close()
		var ids []uint64 // of the roots and bad records, in order
		type resume struct {
			pos  uint64 // Position after a bad record
			next int    // index in ids of what follows it
		}
		var resumes []resume
		for {
			r, err := src.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			var bad *BadRecord
			id := r.ID
			switch {
			case errors.As(err, &bad):
				id = bad.ID
				line, ok := want[id]
				if !ok || len(line) <= testLineLimit {
					t.Errorf("tasks=%d task=%d: bad record at %d for a line of %d bytes (present %v): %v", tasks, task, id, len(line), ok, bad)
				}
				if bad.Payload != badPrefix(line) {
					t.Errorf("tasks=%d task=%d: bad record at %d carries %.40q (%d bytes), want the first %d bytes", tasks, task, id, bad.Payload, len(bad.Payload), len(badPrefix(line)))
				}
				if w := fmt.Sprintf("file %s: line at offset %d is %d bytes, over the limit of %d bytes", path, id, len(line), testLineLimit); !strings.Contains(bad.Reason, w) {
					t.Errorf("tasks=%d task=%d: reason %q, want it to contain %q", tasks, task, bad.Reason, w)
				}
				if _, err := src.Replay(id); !errors.Is(err, ErrLineTooLong) {
					t.Errorf("tasks=%d task=%d: Replay(%d) of a bad record = %v, want ErrLineTooLong", tasks, task, id, err)
				}
				src.Done(id)
				resumes = append(resumes, resume{src.(Seeker).Position(), len(ids) + 1})
			case err != nil:
				t.Fatalf("tasks=%d task=%d: Next: %v", tasks, task, err)
			default:
				if line, ok := want[id]; !ok || len(line) > testLineLimit || line != r.Payload {
					t.Errorf("tasks=%d task=%d: root %d = %.40q, want %.40q (present %v)", tasks, task, id, r.Payload, line, ok)
				}
				if got, err := src.Replay(id); err != nil || got != r.Payload {
					t.Errorf("tasks=%d task=%d: Replay(%d) = %.40q, %v; want %.40q", tasks, task, id, got, err, r.Payload)
				}
			}
			ids = append(ids, id)
			seen[id]++
			if k := splitOf(size, id, tasks*SplitsPerTask); k%tasks != task {
				t.Errorf("tasks=%d task=%d: line at %d is in split %d, not of the task's share", tasks, task, id, k)
			}
		}
		if got := src.Total(); got != int64(len(ids)) {
			t.Errorf("tasks=%d task=%d: Total() = %d, Next handed out %d roots and bad records", tasks, task, got, len(ids))
		}
		const eof = 1 << 63
		ids = append(ids, eof)
		if _, err := src.Next(); !errors.Is(err, io.EOF) {
			t.Errorf("tasks=%d task=%d: Next after EOF: %v, want io.EOF", tasks, task, err)
		}
		for _, re := range resumes {
			pos := re.pos
			again, err := open(task, tasks)
			if err != nil {
				t.Fatal(err)
			}
			if err := again.(Seeker).Seek(pos); err != nil {
				t.Errorf("tasks=%d task=%d: Seek(%d) after a bad record: %v", tasks, task, pos, err)
			}
			r, err := again.Next()
			var bad *BadRecord
			got := r.ID
			switch {
			case errors.Is(err, io.EOF):
				got = eof
			case errors.As(err, &bad):
				got = bad.ID
			case err != nil:
				t.Errorf("tasks=%d task=%d: Next after Seek(%d): %v", tasks, task, pos, err)
			}
			if got != ids[re.next] {
				t.Errorf("tasks=%d task=%d: Next after Seek(%d) gave %d, want %d", tasks, task, pos, got, ids[re.next])
			}
			again.Close()
		}
	}
	for id, line := range want {
		if seen[id] != 1 {
			t.Errorf("tasks=%d: line at %d (%d bytes) handed out %d times, want once", tasks, id, len(line), seen[id])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("tasks=%d: handed out %d distinct lines, want %d", tasks, len(seen), len(want))
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

// TestNotUTF8: a line that is not UTF-8 (a binary file, another encoding)
// is a BadRecord naming where it is, its payload made valid; the lines
// around it are read. Tuple values are strings, which the wire requires to
// be UTF-8.
func TestNotUTF8(t *testing.T) {
	const content = "ok\nbad \xff\xfe line\nafter é\n"
	check := func(t *testing.T, src Source, next func() (Root, error), badID uint64, where string) {
		t.Helper()
		defer src.Close()
		if r, err := next(); err != nil || r.Payload != "ok" {
			t.Fatalf("first Next = %+v, %v", r, err)
		}
		_, err := next()
		bad, ok := errors.AsType[*BadRecord](err)
		if !ok || bad.ID != badID || bad.Payload != "bad \uFFFD line" || bad.Reason != where+" is not valid UTF-8" {
			t.Fatalf("Next on the bad line = %v (%+v), want a BadRecord %d at %q", err, bad, badID, where)
		}
		if r, err := next(); err != nil || r.Payload != "after é" {
			t.Fatalf("Next after the bad line = %+v, %v", r, err)
		}
		if _, err := src.Replay(badID); !errors.Is(err, ErrNotUTF8) {
			t.Fatalf("Replay of the bad line: %v, want ErrNotUTF8", err)
		}
	}
	t.Run("file", func(t *testing.T) {
		path := writeFile(t, content)
		src, err := File(path)(0, 1)
		if err != nil {
			t.Fatal(err)
		}
		check(t, src, src.Next, 3, "file "+path+": line at offset 3")
	})
	t.Run("stdin", func(t *testing.T) {
		src := openReader(t, strings.NewReader(content))
		check(t, src, func() (Root, error) { return nextReady(t, src) }, 1, "stdin: line 2")
	})
}

// TestFileSharedSplits: tasks that share a file's splits read their first
// split and then what they are granted, in whatever order the grants come;
// together they read every line exactly once. A task that waits for a
// grant says ErrNotReady, one told none is left says io.EOF after what it
// holds, and grants it did not ask for, or of splits it has held, change
// nothing. At each point, a task opened afresh from Held and Position
// reads on the same.
func TestFileSharedSplits(t *testing.T) {
	content := randomContent(5, 400)
	path := writeFile(t, content)
	want := wantLines(content)
	for _, tc := range []struct {
		tasks int
		seed  uint64
	}{{1, 1}, {2, 2}, {3, 3}, {3, 4}, {5, 5}} {
		t.Run(fmt.Sprintf("tasks=%d/seed=%d", tc.tasks, tc.seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(tc.seed, 9))
			tasks := make([]*fileTask, tc.tasks)
			for i := range tasks {
				tasks[i] = must(t, File(path), i, tc.tasks).(*fileTask)
				tasks[i].Share()
			}
			splits := tasks[0].NumSplits()
			next := tc.tasks // splits 0..tasks-1 are the tasks' first
			seen := map[uint64]int{}
			done := make([]bool, len(tasks))
			for left := len(tasks); left > 0; {
				i := rng.IntN(len(tasks))
				src := tasks[i]
				if done[i] {
					continue
				}
				if last, ok := src.Wants(); ok && rng.IntN(3) == 0 {
					src.Grant(last, last) // stale: changes nothing
					if next < splits {
						src.Grant(last-1, next+1) // answers another request
						src.Grant(last, next)
						next++
					} else {
						src.Grant(last, -1)
					}
					src.Grant(last, last+1000) // unwanted now
				}
				if rng.IntN(4) == 0 { // a fresh task resumes where this one is
					split, reserve := src.Held()
					again := must(t, File(path), i, tc.tasks).(*fileTask)
					again.Share()
					if err := again.SeekSplit(split, reserve, src.Position()); err != nil {
						t.Fatalf("task %d: SeekSplit(%d, %d, %d): %v", i, split, reserve, src.Position(), err)
					}
					again.none = src.none
					tasks[i], src = again, again
				}
				for range rng.IntN(20) {
					r, err := src.Next()
					if errors.Is(err, ErrNotReady) {
						if _, ok := src.Wants(); !ok {
							t.Fatalf("task %d: not ready but wants no split", i)
						}
						break
					}
					if errors.Is(err, io.EOF) {
						done[i] = true
						left--
						break
					}
					if err != nil {
						t.Fatalf("task %d: Next: %v", i, err)
					}
					seen[r.ID]++
					if want[r.ID] != r.Payload {
						t.Errorf("task %d: root %d = %q, want %q", i, r.ID, r.Payload, want[r.ID])
					}
				}
			}
			for id := range want {
				if seen[id] != 1 {
					t.Errorf("line at %d read %d times, want once", id, seen[id])
				}
			}
			if len(seen) != len(want) {
				t.Errorf("read %d distinct lines, want %d", len(seen), len(want))
			}
			var total int64
			for _, src := range tasks {
				total += src.Total()
			}
			if total != int64(len(want)) {
				t.Errorf("Totals add up to %d, want the file's %d lines", total, len(want))
			}
		})
	}
}

func TestFileSeekSplitErrors(t *testing.T) {
	path := writeFile(t, randomContent(6, 100))
	src := must(t, File(path), 0, 2).(*fileTask)
	src.Share()
	for _, c := range [][2]int{{-1, -1}, {32, -1}, {3, 3}, {3, 2}, {3, 32}} {
		if err := src.SeekSplit(c[0], c[1], 0); err == nil {
			t.Errorf("SeekSplit(%d, %d, 0) accepted", c[0], c[1])
		}
	}
}
