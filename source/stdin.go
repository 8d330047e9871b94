package source

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"unicode/utf8"
)

// ReaderBuffer is how many lines a Reader source reads ahead of its spout:
// the capacity of the channel between its reading goroutine and Next. When
// it is full the goroutine stops reading until Next takes a line.
const ReaderBuffer = 1024

// Reader returns a Factory for a stream of lines read from r, such as
// os.Stdin; name (e.g. "stdin") appears in errors. Lines are split and
// cleaned as by File: one trailing "\r" is stripped and empty lines are
// skipped. A stream cannot be split, so the factory accepts only tasks == 1,
// and it can be opened only once, since lines read ahead by one source would
// be lost to a second.
//
// A goroutine reads lines into a channel of ReaderBuffer lines; Next takes
// one without blocking and answers ErrNotReady while none has arrived, io.EOF
// once r reached EOF and every line was handed out, or the read error,
// wrapped, if reading failed. Root.ID is a sequence number from 0.
//
// A line longer than MaxLineBytes is read past, holding no more than
// MaxLineBytes of it, and handed out in its turn as a *BadRecord: its ID is
// the next sequence number, its Payload the line's first BadLinePrefixBytes,
// its Reason the line's number in the stream and its length. The lines after
// it follow, so one bad line does not end the run. Replay of its ID returns
// an error wrapping ErrLineTooLong until Done.
//
// A stream cannot be re-read, so the source keeps the payload of every root
// handed out until Done is called for it; Replay looks it up there. Memory is
// thus bounded by the spout's max pending roots (plus ReaderBuffer lines read
// ahead), each line at most MaxLineBytes.
//
// Close stops the goroutine as soon as it is not inside r.Read. It does not
// close r and does not wait: a goroutine blocked in Read on a pipe or
// terminal stays there until that Read returns (data, EOF or an error), then
// exits without reading further.
func Reader(r io.Reader, name string) Factory {
	return readerFactory(r, name, MaxLineBytes)
}

// readerFactory is Reader with the longest line accepted as a parameter, so
// that tests can exercise over-long lines without writing 16 MiB ones.
func readerFactory(r io.Reader, name string, maxLine int) Factory {
	var opened atomic.Bool
	return func(task, tasks int) (Source, error) {
		if tasks != 1 {
			return nil, fmt.Errorf("source: %s: the stdin source cannot be split: tasks is %d, want 1", name, tasks)
		}
		if task != 0 {
			return nil, fmt.Errorf("source: %s: task is %d, want 0", name, task)
		}
		if !opened.CompareAndSwap(false, true) {
			return nil, fmt.Errorf("source: %s: already opened; a stream can be read by one source only", name)
		}
		s := &readerSource{
			name:    name,
			lines:   make(chan readerLine, ReaderBuffer),
			stop:    make(chan struct{}),
			pending: make(map[uint64]string),
			bad:     make(map[uint64]error),
		}
		go s.read(r, maxLine)
		return s, nil
	}
}

// readerSource is the Source of Reader.
type readerSource struct {
	name    string
	lines   chan readerLine // closed by read when it returns
	stop    chan struct{}   // closed by Close
	readErr error           // set by read before it closes lines
	seq     uint64          // ID of the next root or bad record
	pending map[uint64]string
	bad     map[uint64]error // IDs of bad records handed out (over-long, not UTF-8), until Done
	closed  bool
	eof     bool
}

// readerLine is what the reading goroutine sends Next: a non-empty line, or
// the description of an over-long one it skipped.
type readerLine struct {
	line string
	long *longLineError // not nil for an over-long line; line is empty then
	num  int64          // the line's number in the stream, from 1
}

// read runs in its own goroutine and sends the non-empty lines of r.
func (s *readerSource) read(r io.Reader, maxLine int) {
	defer close(s.lines)
	lr := lineReader{br: bufio.NewReaderSize(r, fileBufSize), max: maxLine}
	for n := int64(1); ; n++ {
		select {
		case <-s.stop:
			return
		default:
		}
		line, _, err := lr.next()
		if errors.Is(err, io.EOF) {
			return
		}
		long, _ := errors.AsType[*longLineError](err)
		switch {
		case long != nil:
		case err != nil:
			s.readErr = fmt.Errorf("line %d: %w", n, err)
			return
		case len(line) == 0:
			continue
		}
		select {
		case s.lines <- readerLine{line: string(line), long: long, num: n}:
		case <-s.stop:
			return
		}
	}
}

// Next returns the next line without blocking, a *BadRecord for an
// over-long line, or ErrNotReady if none has been read yet.
func (s *readerSource) Next() (Root, error) {
	if s.closed {
		return Root{}, fmt.Errorf("source: %s: %w", s.name, os.ErrClosed)
	}
	if s.eof {
		return s.end()
	}
	select {
	case l, ok := <-s.lines:
		if !ok {
			s.eof = true
			return s.end()
		}
		id := s.seq
		s.seq++
		if l.long != nil {
			s.bad[id] = ErrLineTooLong
			return Root{}, &BadRecord{ID: id, Payload: l.long.prefix,
				Reason: fmt.Sprintf("%s: line %d %s", s.name, l.num, l.long.what())}
		}
		if !utf8.ValidString(l.line) {
			s.bad[id] = ErrNotUTF8
			return Root{}, notUTF8(id, []byte(l.line), fmt.Sprintf("%s: line %d", s.name, l.num))
		}
		s.pending[id] = l.line
		return Root{ID: id, Payload: l.line}, nil
	default:
		return Root{}, ErrNotReady
	}
}

// end is what Next returns once the reading goroutine finished.
func (s *readerSource) end() (Root, error) {
	if s.readErr != nil {
		return Root{}, fmt.Errorf("source: %s: %w", s.name, s.readErr)
	}
	return Root{}, io.EOF
}

// Replay returns the kept payload of a root not yet Done.
func (s *readerSource) Replay(id uint64) (string, error) {
	line, ok := s.pending[id]
	if _, bad := s.bad[id]; bad {
		// Handed out as a bad record, whose line was never kept.
		return "", fmt.Errorf("source: %s: root %d is a bad record: %w", s.name, id, s.bad[id])
	}
	if !ok {
		return "", fmt.Errorf("source: %s: root %d was never handed out or is done: %w", s.name, id, ErrUnknownRoot)
	}
	return line, nil
}

// Done forgets the payload of root id, or that it was a bad record.
func (s *readerSource) Done(id uint64) {
	delete(s.pending, id)
	delete(s.bad, id)
}

// Total is -1: the length of a stream is unknown.
func (s *readerSource) Total() int64 { return -1 }

// Close stops the reading goroutine without waiting for it and forgets all
// payloads. Calling it again does nothing.
func (s *readerSource) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	close(s.stop)
	s.pending, s.bad = nil, nil
	return nil
}
