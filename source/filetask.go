package source

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
)

// fileTask is the Source of one task of File: it reads the file's splits
// one at a time, its share of them or those granted to it (Splits).
type fileTask struct {
	path   string
	f      *os.File
	size   int64
	max    int // longest line accepted (MaxLineBytes but in tests)
	task   int
	tasks  int
	splits int

	cur     *fileSource   // the split being read
	br      *bufio.Reader // its reader, reused from split to split
	split   int           // its number
	reserve int           // the split granted after it, -1 if none
	last    int           // the newest split held: split or reserve
	shared  bool          // Share: the splits after the first come from Grant
	none    bool          // Grant said no split is left
	total   int64
	err     error // sticky: why Next reads no more
}

func openFileTask(path string, task, tasks, maxLine int) (Source, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("source: file %s: %w", path, err)
	}
	t, err := newFileTask(path, f, task, tasks, maxLine)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("source: file %s: %w", path, err)
	}
	return t, nil
}

func newFileTask(path string, f *os.File, task, tasks, maxLine int) (*fileTask, error) {
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (mode %s); byte-range splits need one", info.Mode())
	}
	t := &fileTask{path: path, f: f, size: info.Size(), max: maxLine, task: task, tasks: tasks,
		splits: tasks * SplitsPerTask, split: task, reserve: -1, last: task, br: bufio.NewReaderSize(nil, fileBufSize)}
	for k := task; k < t.splits; k += tasks {
		s, err := newFileSource(path, f, t.size, k, t.splits, maxLine, t.br, true)
		if err != nil {
			return nil, err
		}
		t.total += s.total
	}
	if t.cur, err = t.open(task); err != nil {
		return nil, err
	}
	return t, nil
}

// open opens split k for reading.
func (t *fileTask) open(k int) (*fileSource, error) {
	return newFileSource(t.path, t.f, t.size, k, t.splits, t.max, t.br, false)
}

// Next returns the next non-empty line of the split being read, going on to
// the next split it holds when that one is done; ErrNotReady while it
// waits for a grant.
func (t *fileTask) Next() (Root, error) {
	for {
		if t.err != nil {
			return Root{}, t.err
		}
		r, err := t.cur.Next()
		if !errors.Is(err, io.EOF) {
			return r, err
		}
		k, err := t.following()
		if err != nil {
			return Root{}, err
		}
		cur, err := t.open(k)
		if err != nil {
			t.err = fmt.Errorf("source: file %s: split %d: %w", t.path, k, err)
			return Root{}, t.err
		}
		t.cur, t.split = cur, k
	}
}

// following takes the split to read after the current one: the next of
// the task's share, or the one granted; io.EOF if there is none,
// ErrNotReady if a grant is still to come.
func (t *fileTask) following() (int, error) {
	switch {
	case !t.shared:
		if k := t.split + t.tasks; k < t.splits {
			t.last = k
			return k, nil
		}
		return 0, io.EOF
	case t.reserve >= 0:
		k := t.reserve
		t.reserve = -1
		return k, nil
	case t.none:
		return 0, io.EOF
	}
	return 0, ErrNotReady
}

// Share makes the task read, after its first split, only the splits that
// Grant hands it.
func (t *fileTask) Share() { t.shared = true }

// Wants says whether the task, sharing, holds no split beyond the one it
// reads and may still get one; last is the newest split it holds.
func (t *fileTask) Wants() (last int, ok bool) {
	return t.last, t.shared && t.reserve < 0 && !t.none
}

// Grant hands the task split k to read after the current one, or none
// (k < 0), in answer to a request after last. It is ignored unless the
// task Wants one after last: a grant repeated, out of date or meant for
// another activation of the task changes nothing.
func (t *fileTask) Grant(last, k int) {
	if held, ok := t.Wants(); !ok || held != last {
		return
	}
	switch {
	case k < 0:
		t.none = true
	case k > t.last && k < t.splits:
		t.reserve, t.last = k, k
	}
}

// NumSplits is how many splits the file is cut into: SplitsPerTask for
// each task.
func (t *fileTask) NumSplits() int { return t.splits }

// Held is the split being read and the one granted after it, -1 if none.
func (t *fileTask) Held() (split, reserve int) { return t.split, t.reserve }

// SeekSplit makes a sharing task read split from pos (a Position of it),
// then reserve if it is not -1, as a task that held them did.
func (t *fileTask) SeekSplit(split, reserve int, pos uint64) error {
	if split < 0 || split >= t.splits || reserve >= t.splits || (reserve >= 0 && reserve <= split) {
		return fmt.Errorf("source: file %s: split %d then %d of %d", t.path, split, reserve, t.splits)
	}
	if err := t.seek(split, pos); err != nil {
		return err
	}
	t.reserve, t.last = reserve, max(split, reserve)
	return nil
}

// seek opens split k and continues it at pos. It reads through a reader
// of its own until it succeeds: the current split's stays as it was.
func (t *fileTask) seek(k int, pos uint64) error {
	if t.err != nil {
		return t.err
	}
	cur, err := newFileSource(t.path, t.f, t.size, k, t.splits, t.max, nil, false)
	if err != nil {
		return fmt.Errorf("source: file %s: split %d: %w", t.path, k, err)
	}
	if err := cur.Seek(pos); err != nil {
		return err
	}
	t.cur, t.br, t.split, t.last = cur, cur.lines.br, k, max(t.last, k)
	return nil
}

// Position is the offset of the next line to read in the current split.
func (t *fileTask) Position() uint64 { return t.cur.Position() }

// Seek continues reading the task's share at offset pos, a Position of a
// task that read its share: pos falls in the last split of the share that
// starts at or before it.
func (t *fileTask) Seek(pos uint64) error {
	k := -1
	for i := t.task; i < t.splits && splitPoint(t.size, i, t.splits) <= int64(min(pos, 1<<62)); i += t.tasks {
		k = i
	}
	if k < 0 {
		return fmt.Errorf("source: file %s: seek to %d before the task's first split", t.path, pos)
	}
	return t.seek(k, pos)
}

// Replay re-reads the line starting at byte offset id, which must be the
// start of a non-empty line of the file: a root of any split, for a task
// may have been granted any.
func (t *fileTask) Replay(id uint64) (string, error) {
	if t.cur == nil {
		return "", fmt.Errorf("source: file %s: %w", t.path, os.ErrClosed)
	}
	line, err := t.cur.replay(id, t.size)
	if err != nil {
		return "", fmt.Errorf("source: file %s: %w", t.path, err)
	}
	return line, nil
}

// Done does nothing: a file source keeps no payloads.
func (t *fileTask) Done(uint64) {}

// Total is the number of non-empty lines in the task's share of splits.
func (t *fileTask) Total() int64 { return t.total }

// Close closes the file. Calling it again does nothing.
func (t *fileTask) Close() error {
	if t.f == nil {
		return nil
	}
	err := t.f.Close()
	t.f = nil
	t.err = fmt.Errorf("source: file %s: %w", t.path, os.ErrClosed)
	if t.cur != nil {
		t.cur.f = nil
	}
	if err != nil {
		return fmt.Errorf("source: file %s: %w", t.path, err)
	}
	return nil
}
