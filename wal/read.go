package wal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
)

// MaxReadBytes bounds the payload bytes one Read returns; a Read returns at
// least one record however large.
const MaxReadBytes = 4 << 20

// readChunk is the size of the reads of Read (more for a larger record).
const readChunk = 64 << 10

// Read returns up to max durable records from offset from on, in order and
// densely: records[i].Offset == from+i. It may return fewer, and never more
// than MaxReadBytes of payload or past the end of a segment, so read on from
// from+len(records). It returns no records and no error at End (see
// Changed), and an error wrapping ErrOutOfRange before Start (the records
// were deleted by retention) or past End. Payloads are not shared with the
// log or with other calls. Reading is safe concurrently with appends.
//
// A frame that does not decode is a *CorruptError naming the segment file
// and the byte position; the first read of a segment that was sealed before
// Open verifies the whole segment.
func (l *Log) Read(from uint64, max int) ([]Record, error) {
	if max <= 0 {
		return nil, nil
	}
	c, err := l.locate(from)
	if err != nil || c.s == nil {
		return nil, err
	}
	defer l.unref(c.s)
	recs, err := readFrames(c.f, c.s.path, c.entry, from, c.end, c.limit, max)
	if len(recs) > 0 {
		return recs, nil // an error comes back on the next read, from the bad record
	}
	return nil, err
}

// cursor is where a Read starts: a segment (referenced), its file, the
// index entry before from, the offset to stop before and the bytes written.
type cursor struct {
	s     *segment
	f     file
	entry indexEntry
	end   uint64
	limit int64
}

// locate finds the segment holding from, indexing it first if needed, and
// takes a reference to it. A zero cursor (nil s) means from is End.
func (l *Log) locate(from uint64) (cursor, error) {
	for {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return cursor{}, ErrClosed
		}
		start := l.segs[0].base
		if from < start || from > l.durable {
			l.mu.Unlock()
			return cursor{}, fmt.Errorf("%w: %d is not in [%d, %d]", ErrOutOfRange, from, start, l.durable)
		}
		if from == l.durable {
			l.mu.Unlock()
			return cursor{}, nil
		}
		i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > from }) - 1
		s := l.segs[i]
		s.refs++
		if !s.indexed {
			f, size := s.f, s.size
			l.mu.Unlock()
			if err := l.indexSegment(s, f, size); err != nil {
				return cursor{}, err
			}
			continue
		}
		c := cursor{s: s, f: s.f, entry: s.idx.lookup(from), end: min(l.durable, s.base+s.count), limit: s.size}
		l.mu.Unlock()
		return c, nil
	}
}

// unref drops a reference taken by locate.
func (l *Log) unref(s *segment) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.release(s)
}

// indexSegment scans a sealed segment (referenced by the caller; the
// reference is dropped), verifying it, and installs its index.
func (l *Log) indexSegment(s *segment, f file, size int64) error {
	var res scanResult
	if f == nil {
		res.err = os.ErrClosed
	} else {
		res = scan(f, size, s.base)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.release(s)
	var ce *CorruptError
	switch {
	case errors.As(res.err, &ce):
		ce.Segment = s.path
		return ce
	case res.err != nil:
		return fmt.Errorf("wal: reading segment %s: %w", s.path, res.err)
	case res.count != s.count:
		return &CorruptError{Segment: s.path, Pos: res.valid, Offset: s.base + res.count,
			Err: fmt.Errorf("the segment holds %d records, but the next one starts at offset %d", res.count, s.base+s.count)}
	}
	s.idx, s.indexed = res.index, true
	return nil
}

// Verify reads every segment sealed before Open that has not been read yet,
// checking every frame, and returns the first *CorruptError. (Open checks
// the last segment; sealed segments are otherwise checked on first read.)
func (l *Log) Verify() error {
	l.mu.Lock()
	segs := append([]*segment(nil), l.segs...)
	l.mu.Unlock()
	for _, s := range segs {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return ErrClosed
		}
		if s.indexed || s.deleted {
			l.mu.Unlock()
			continue
		}
		s.refs++
		f, size := s.f, s.size
		l.mu.Unlock()
		if err := l.indexSegment(s, f, size); err != nil {
			return err
		}
	}
	return nil
}

// readFrames decodes the records [from, end) of a segment, starting at
// index entry e (at or before from) and reading no byte at or past limit,
// until it has max records or MaxReadBytes of payload.
func readFrames(r io.ReaderAt, path string, e indexEntry, from, end uint64, limit int64, max int) ([]Record, error) {
	var recs []Record
	var buf []byte
	bufStart := e.pos
	pos, off := e.pos, e.off
	payload := 0
	for off < end && len(recs) < max && payload < MaxReadBytes {
		rel := pos - bufStart
		need := int64(HeaderSize)
		if rel+HeaderSize <= int64(len(buf)) {
			need = FrameSize(buf[rel:])
		}
		if need > limit-pos {
			return recs, &CorruptError{Segment: path, Pos: pos, Offset: off, Err: ErrIncomplete}
		}
		if rel+need > int64(len(buf)) {
			// A fresh buffer: the payloads handed out alias the old one.
			buf = make([]byte, min(limit-pos, readChunk+need))
			if k, err := r.ReadAt(buf, pos); k < len(buf) {
				if err == nil || errors.Is(err, io.EOF) {
					return recs, &CorruptError{Segment: path, Pos: pos, Offset: off, Err: ErrIncomplete}
				}
				return recs, fmt.Errorf("wal: reading %s at byte %d: %w", path, pos, err)
			}
			bufStart = pos
			continue
		}
		t, p, fs, err := DecodeFrame(buf[rel:])
		if err != nil {
			return recs, &CorruptError{Segment: path, Pos: pos, Offset: off, Err: err}
		}
		if off >= from {
			recs = append(recs, Record{Offset: off, Time: t, Payload: p[:len(p):len(p)]})
			payload += len(p)
		}
		pos += int64(fs)
		off++
	}
	return recs, nil
}
