package source

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"unicode/utf8"
)

// MaxLineBytes is the longest line, without its "\n" or "\r\n", that the
// file and reader sources accept. A longer line is not held in memory
// beyond that: the rest is read past in buffer-sized chunks, and the line is
// handed out as a *BadRecord carrying its first BadLinePrefixBytes, so the
// spout dead-letters it and the source goes on with the next line: one bad
// line must not cost the rest of the input.
const MaxLineBytes = 16 << 20

// BadLinePrefixBytes bounds the Payload of the *BadRecord a file or reader
// source hands out for a line longer than MaxLineBytes: enough for a dead
// letter to show what the line was, not the megabytes that made it bad.
const BadLinePrefixBytes = 1 << 10

// ErrLineTooLong is wrapped by the error Replay returns for the ID of a line
// longer than MaxLineBytes (which Next handed out as a *BadRecord).
var ErrLineTooLong = errors.New("line too long")

// ErrUnknownRoot is wrapped by the error Replay returns for an ID the source
// never handed out, or one it has already forgotten.
var ErrUnknownRoot = errors.New("unknown root")

// fileBufSize is the size of the buffered reader of a file or reader source
// and of the chunks read by the line count at open.
const fileBufSize = 64 << 10

// File returns a Factory for the file at path, in which each non-empty line
// is one root. Lines end in "\n"; one trailing "\r" is stripped, so CRLF files
// work; empty lines are skipped; the last line needs no terminator.
//
// The file is cut by byte ranges into SplitsPerTask splits for each of the
// tasks, like Hadoop input splits: split k of K covers bytes
// [k*size/K, (k+1)*size/K), and a line belongs to the split whose range
// contains the line's first byte. Task i of n reads its share, splits i,
// i+n, i+2n, …, unless a run hands the splits out (Splits): then every line
// is still read by exactly one task, the one that holds its split.
//
// Root.ID is the byte offset of the line's start. Replay re-reads the line at
// that offset, so no payload is kept in memory. Total is the number of
// non-empty lines in the task's share, counted by a scan of it at open: the
// tasks' Totals add up to the file's lines, whoever reads which split.
//
// A line longer than MaxLineBytes is a *BadRecord from Next, with the line's
// offset as its ID, its first BadLinePrefixBytes as Payload and its length in
// Reason; Next then goes on with the line after it. It still counts in Total
// (Next hands out exactly Total roots and bad records together, as the spout
// counts them), and Replay of its offset returns an error wrapping
// ErrLineTooLong. So is a line that is not UTF-8 (tuple values are strings,
// which the wire requires to be UTF-8), its Replay wrapping ErrNotUTF8.
func File(path string) Factory {
	return fileFactory(path, MaxLineBytes)
}

// SplitsPerTask is how many splits File cuts a file into for each task.
// A run that hands them out to the tasks that ask first (Splits) keeps
// every task busy until about the last split: on three members of which
// one had less to do, a task each, its task had read its third of a file
// in half the time of the others, which then read alone.
const SplitsPerTask = 16

// fileFactory is File with the longest line accepted as a parameter, so
// that tests can exercise over-long lines without writing 16 MiB ones.
func fileFactory(path string, maxLine int) Factory {
	return func(task, tasks int) (Source, error) {
		if err := CheckTask(task, tasks); err != nil {
			return nil, fmt.Errorf("source: file %s: %w", path, err)
		}
		return openFileTask(path, task, tasks, maxLine)
	}
}

// CheckTask validates the task numbers a Factory receives, for the
// connectors in packages of their own as for the sources here.
func CheckTask(task, tasks int) error {
	if tasks < 1 {
		return fmt.Errorf("tasks is %d, want at least 1", tasks)
	}
	if task < 0 || task >= tasks {
		return fmt.Errorf("task is %d, want 0 <= task < %d", task, tasks)
	}
	return nil
}

// splitPoint returns i*size/tasks rounded down, without overflowing.
func splitPoint(size int64, i, tasks int) int64 {
	n, k := int64(i), int64(tasks)
	return n*(size/k) + n*(size%k)/k
}

// fileSource reads one split of a file (a fileTask reads several).
type fileSource struct {
	path  string
	f     *os.File
	start int64 // first byte of the split's range
	end   int64 // first byte after the split's range
	pos   int64 // offset of the next line to read
	total int64
	max   int // longest line accepted (MaxLineBytes but in tests)
	lines lineReader
	rbuf  []byte // scratch of Replay
	err   error  // sticky error of Next
}

// newFileSource opens split k of splits of the file f of size bytes,
// reading through br (nil: a new reader), and counts its lines if count is
// set.
func newFileSource(path string, f *os.File, size int64, k, splits, maxLine int, br *bufio.Reader, count bool) (*fileSource, error) {
	s := &fileSource{
		path:  path,
		f:     f,
		start: splitPoint(size, k, splits),
		end:   splitPoint(size, k+1, splits),
		max:   maxLine,
	}
	// Find the first line that starts in [start, end): the line containing
	// byte start-1 belongs to an earlier split, so skip through its '\n'.
	from := s.start
	if from > 0 {
		from--
	}
	if br == nil {
		br = bufio.NewReaderSize(nil, fileBufSize)
	}
	br.Reset(io.NewSectionReader(f, from, size-from))
	s.pos = from
	if s.start > 0 {
		n, err := skipLine(br, s.end-from)
		s.pos += n
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
	}
	s.lines = lineReader{br: br, max: maxLine}
	if count {
		var err error
		if s.total, err = countLines(f, s.pos, s.end, size); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// skipLine discards bytes through the next '\n' and returns how many. It
// gives up once it has discarded limit bytes: no line of the split starts
// before the '\n' then, and the caller only compares the count with limit.
func skipLine(br *bufio.Reader, limit int64) (int64, error) {
	var n int64
	for n < limit {
		chunk, err := br.ReadSlice('\n')
		n += int64(len(chunk))
		if !errors.Is(err, bufio.ErrBufferFull) {
			return n, err
		}
	}
	return n, nil
}

// countLines counts the non-empty lines that start in [from, end), given that
// from is the start of a line (or >= end). It reads at most up to end+1,
// enough to tell whether a line starting at end-1 is "\r\n".
func countLines(f io.ReaderAt, from, end, size int64) (int64, error) {
	limit := min(end+1, size)
	buf := make([]byte, min(fileBufSize, max(limit-from, 0)))
	var n int64
	atStart := true    // offset pos+i starts a line
	pendingCR := false // a line started with '\r'; its emptiness depends on the next byte
	for pos := from; pos < limit; {
		k, err := f.ReadAt(buf[:min(int64(len(buf)), limit-pos)], pos)
		chunk := buf[:k]
		for i := 0; i < len(chunk); {
			if pendingCR {
				pendingCR = false
				if chunk[i] != '\n' {
					n++ // "\r" followed by more text
				}
			} else if atStart {
				if pos+int64(i) >= end {
					return n, nil
				}
				switch chunk[i] {
				case '\n':
					i++ // an empty line
					continue
				case '\r':
					pendingCR = true
					atStart = false
					i++
					continue
				default:
					n++
				}
			}
			atStart = false
			j := bytes.IndexByte(chunk[i:], '\n')
			if j < 0 {
				break
			}
			i += j + 1
			atStart = true
		}
		pos += int64(k)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	// A pending "\r" here is the last byte of the file: an empty line.
	return n, nil
}

// Position is the offset of the next line to read.
func (s *fileSource) Position() uint64 { return uint64(s.pos) }

// Seek continues reading at offset pos, which must start a line of the
// split (or be its end).
func (s *fileSource) Seek(pos uint64) error {
	if s.f == nil {
		return fmt.Errorf("source: file %s: %w", s.path, os.ErrClosed)
	}
	off := int64(pos)
	info, err := s.f.Stat()
	if err != nil {
		return fmt.Errorf("source: file %s: %w", s.path, err)
	}
	if off < s.pos || off > info.Size() { // before the split's first line, or past the file
		return fmt.Errorf("source: file %s: seek to %d outside [%d, %d]", s.path, pos, s.pos, info.Size())
	}
	if off >= s.end { // the split is done (its last line may end past it)
		s.pos = off
		return nil
	}
	if off > 0 {
		var prev [1]byte
		if _, err := s.f.ReadAt(prev[:], off-1); err != nil || prev[0] != '\n' {
			return fmt.Errorf("source: file %s: seek to %d: not the start of a line", s.path, pos)
		}
	}
	s.lines.br.Reset(io.NewSectionReader(s.f, off, info.Size()-off))
	s.pos = off
	return nil
}

// Next returns the next non-empty line of the split, or a *BadRecord for
// a line longer than the limit, which it has skipped, or not UTF-8.
func (s *fileSource) Next() (Root, error) {
	if s.err != nil {
		return Root{}, s.err
	}
	for s.pos < s.end {
		off := s.pos
		line, n, err := s.lines.next()
		s.pos += n
		if errors.Is(err, io.EOF) {
			break // the file shrank since open
		}
		if err != nil {
			if long, ok := errors.AsType[*longLineError](err); ok {
				return Root{}, &BadRecord{ID: uint64(off), Payload: long.prefix,
					Reason: fmt.Sprintf("file %s: line at offset %d %s", s.path, off, long.what())}
			}
			s.err = fmt.Errorf("source: file %s: line at offset %d: %w", s.path, off, err)
			return Root{}, s.err
		}
		if len(line) == 0 {
			continue
		}
		if !utf8.Valid(line) {
			return Root{}, notUTF8(uint64(off), line, fmt.Sprintf("file %s: line at offset %d", s.path, off))
		}
		return Root{ID: uint64(off), Payload: string(line)}, nil
	}
	return Root{}, io.EOF
}

// replay re-reads the line starting at byte offset id, which must be the
// start of a non-empty line of the file, shorter than s.max.
func (s *fileSource) replay(id uint64, size int64) (string, error) {
	if s.f == nil {
		return "", os.ErrClosed
	}
	if id >= uint64(size) {
		return "", fmt.Errorf("offset %d is past the end of the file (%d bytes): %w", id, size, ErrUnknownRoot)
	}
	off := int64(id)
	if off > 0 {
		var prev [1]byte
		if _, err := s.f.ReadAt(prev[:], off-1); err != nil {
			return "", fmt.Errorf("offset %d: %w", off, err)
		}
		if prev[0] != '\n' {
			return "", fmt.Errorf("offset %d does not start a line: %w", off, ErrUnknownRoot)
		}
	}
	const chunk = 4096
	buf := s.rbuf[:0]
	for pos := off; ; {
		buf = slices.Grow(buf, chunk)
		k, err := s.f.ReadAt(buf[len(buf):len(buf)+chunk], pos)
		read := buf[len(buf) : len(buf)+k]
		if j := bytes.IndexByte(read, '\n'); j >= 0 {
			buf = buf[:len(buf)+j]
			break
		}
		buf = buf[:len(buf)+k]
		pos += int64(k)
		if len(buf) > s.max+1 || errors.Is(err, io.EOF) { // +1 for a '\r'
			break
		}
		if err != nil {
			return "", fmt.Errorf("offset %d: %w", off, err)
		}
	}
	if cap(buf) <= fileBufSize {
		s.rbuf = buf[:0] // reuse small buffers only
	}
	line := trimCR(buf)
	if len(line) > s.max {
		// Next handed it out as a bad record: there is no root to replay.
		return "", fmt.Errorf("line at offset %d is longer than the limit of %d bytes, a bad record: %w", off, s.max, ErrLineTooLong)
	}
	if len(line) == 0 {
		return "", fmt.Errorf("offset %d starts an empty line, not a root: %w", off, ErrUnknownRoot)
	}
	if !utf8.Valid(line) {
		return "", fmt.Errorf("line at offset %d is not valid UTF-8, a bad record: %w", off, ErrNotUTF8)
	}
	return string(line), nil
}

// lineReader reads lines from a bufio.Reader. Lines that fit its buffer are
// returned as slices of it; longer ones are joined in a reused scratch buffer.
type lineReader struct {
	br      *bufio.Reader
	scratch []byte
	max     int // longest line accepted; 0 means MaxLineBytes
}

// longLineError is the error lineReader.next returns for a line longer than
// its limit, which it skipped without holding more than the limit in memory.
type longLineError struct {
	length int64  // the line's bytes, without "\n" or "\r\n"
	limit  int    // the limit it exceeds
	prefix string // its first BadLinePrefixBytes (fewer to end on a whole rune)
}

// what describes the line's length against the limit, for a BadRecord's
// Reason.
func (e *longLineError) what() string {
	return fmt.Sprintf("is %d bytes, over the limit of %d bytes (source.MaxLineBytes)", e.length, e.limit)
}

func (e *longLineError) Error() string { return "line " + e.what() }

func (e *longLineError) Unwrap() error { return ErrLineTooLong }

func (l *lineReader) limit() int {
	if l.max > 0 {
		return l.max
	}
	return MaxLineBytes
}

// next returns the next line without its "\n" and with one trailing "\r"
// removed, valid until the next call, and the number of bytes consumed. It
// returns io.EOF only when no bytes are left. A line longer than the limit
// is consumed whole (its "\n" included) and returned as a *longLineError, so
// the next call reads the line after it.
func (l *lineReader) next() ([]byte, int64, error) {
	if cap(l.scratch) > fileBufSize {
		l.scratch = nil // do not keep a huge line's buffer around
	}
	l.scratch = l.scratch[:0]
	limit := l.limit()
	var n int64
	for {
		chunk, err := l.br.ReadSlice('\n')
		n += int64(len(chunk))
		switch {
		case err == nil:
			return l.finish(chunk[:len(chunk)-1], n, limit)
		case errors.Is(err, bufio.ErrBufferFull):
			if len(l.scratch)+len(chunk) > limit+1 { // +1 for a '\r'
				return l.skip(chunk, n, limit)
			}
			l.scratch = append(l.scratch, chunk...)
		case errors.Is(err, io.EOF):
			if n == 0 {
				return nil, 0, io.EOF
			}
			return l.finish(chunk, n, limit)
		default:
			return nil, n, err
		}
	}
}

// finish joins the last chunk of a line to the ones in scratch, strips a
// "\r" and checks the length.
func (l *lineReader) finish(chunk []byte, n int64, limit int) ([]byte, int64, error) {
	line := chunk
	if len(l.scratch) > 0 {
		l.scratch = append(l.scratch, chunk...)
		line = l.scratch
	}
	line = trimCR(line)
	if len(line) > limit {
		return nil, n, &longLineError{length: int64(len(line)), limit: limit, prefix: string(runePrefix(line, BadLinePrefixBytes))}
	}
	return line, n, nil
}

// skip is next for a line found to be over the limit after the n bytes
// in scratch and chunk (the buffer's worth just read, without a '\n'): it
// keeps the line's prefix, then reads the rest of the line a buffer at a
// time, keeping nothing, through its "\n" or to the end of the input.
func (l *lineReader) skip(chunk []byte, n int64, limit int) ([]byte, int64, error) {
	head := make([]byte, 0, BadLinePrefixBytes+utf8.UTFMax)
	head = append(head, l.scratch[:min(len(l.scratch), cap(head))]...)
	head = append(head, chunk[:min(len(chunk), cap(head)-len(head))]...)
	long := &longLineError{limit: limit, prefix: string(runePrefix(head, BadLinePrefixBytes))}
	l.scratch = l.scratch[:0]
	last := chunk[len(chunk)-1] // a '\r' here may be the one before "\n"
	for {
		chunk, err := l.br.ReadSlice('\n')
		n += int64(len(chunk))
		switch {
		case err == nil: // chunk ends the line with its '\n'
			long.length = n - 1
			if len(chunk) >= 2 {
				last = chunk[len(chunk)-2]
			}
			if last == '\r' {
				long.length--
			}
			return nil, n, long
		case errors.Is(err, bufio.ErrBufferFull):
			last = chunk[len(chunk)-1]
		case errors.Is(err, io.EOF): // the last line, without a '\n'
			if len(chunk) > 0 {
				last = chunk[len(chunk)-1]
			}
			long.length = n
			if last == '\r' {
				long.length--
			}
			return nil, n, long
		default:
			return nil, n, err
		}
	}
}

// runePrefix returns the first max bytes of b, fewer if a rune crosses that
// point, so that a prefix of UTF-8 text stays valid UTF-8.
func runePrefix(b []byte, max int) []byte {
	if len(b) <= max {
		return b
	}
	for k := max; k > 0 && k > max-utf8.UTFMax; k-- {
		if utf8.RuneStart(b[k]) {
			return b[:k]
		}
	}
	return b[:max] // not UTF-8 there anyway
}

// trimCR removes one trailing '\r'.
func trimCR(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] == '\r' {
		return b[:len(b)-1]
	}
	return b
}
