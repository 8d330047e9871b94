package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
)

// HeaderSize is the size of a record's frame header:
//
//	bytes 0:4   CRC-32C (Castagnoli) of bytes 4 to the end of the frame
//	bytes 4:8   n, the payload length, little endian
//	bytes 8:16  the record's time, unix nanoseconds, little endian
//	bytes 16:   the payload, n bytes
//
// The checksum covers the length and the time as well as the payload, so a
// frame whose length field was torn is caught like one whose payload was.
// A record's offset is not stored: it is the segment's base offset (its file
// name) plus the number of frames before it.
const HeaderSize = 16

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors of a frame that does not decode. DecodeFrame and the segment scan
// return them (wrapped in a *CorruptError once a segment and a position are
// known).
var (
	// ErrIncomplete means the bytes end inside a frame: its header or its
	// payload is cut short. At the end of the last segment this is a torn
	// write.
	ErrIncomplete = errors.New("incomplete record")
	// ErrChecksum means a whole frame is there but its CRC does not match.
	ErrChecksum = errors.New("checksum mismatch")
)

// ErrCorrupt is matched (errors.Is) by every *CorruptError.
var ErrCorrupt = errors.New("wal: corrupt segment")

// CorruptError is a frame that does not decode, with where it is: the
// segment file, the byte position in it and the offset the record would
// have. Err is ErrIncomplete or ErrChecksum (or a read error).
type CorruptError struct {
	Segment string
	Pos     int64
	Offset  uint64
	Err     error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("wal: segment %s: bad record at byte %d (offset %d): %v", e.Segment, e.Pos, e.Offset, e.Err)
}

func (e *CorruptError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// AppendFrame appends the frame of one record to dst and returns the
// extended slice. len(payload) must fit in 32 bits.
func AppendFrame(dst []byte, time int64, payload []byte) []byte {
	n := len(dst)
	dst = slices.Grow(dst, HeaderSize+len(payload))
	dst = dst[:n+HeaderSize]
	binary.LittleEndian.PutUint32(dst[n+4:], uint32(len(payload)))
	binary.LittleEndian.PutUint64(dst[n+8:], uint64(time))
	dst = append(dst, payload...)
	binary.LittleEndian.PutUint32(dst[n:], crc32.Checksum(dst[n+4:], castagnoli))
	return dst
}

// FrameSize is the size of the frame that starts with header h (at least
// HeaderSize bytes), as its length field says; it is not checked.
func FrameSize(h []byte) int64 {
	return HeaderSize + int64(binary.LittleEndian.Uint32(h[4:8]))
}

// DecodeFrame decodes the frame at the start of b: the record's time, its
// payload (a sub-slice of b) and the frame's size. It returns ErrIncomplete
// when b ends inside the frame and ErrChecksum when the CRC does not match.
func DecodeFrame(b []byte) (time int64, payload []byte, size int, err error) {
	if len(b) < HeaderSize {
		return 0, nil, 0, ErrIncomplete
	}
	fs := FrameSize(b)
	if int64(len(b)) < fs {
		return 0, nil, 0, ErrIncomplete
	}
	size = int(fs)
	if crc32.Checksum(b[4:size], castagnoli) != binary.LittleEndian.Uint32(b) {
		return 0, nil, 0, ErrChecksum
	}
	return int64(binary.LittleEndian.Uint64(b[8:16])), b[HeaderSize:size], size, nil
}

// indexInterval is the spacing in bytes of a segment's sparse index: one
// entry for the first record at or after every indexInterval bytes, so a
// read skips at most about this many bytes to find its record, and the
// index costs 16 bytes per indexInterval of log.
const indexInterval = 4096

// indexEntry says that the record with offset off starts at byte pos.
type indexEntry struct {
	off uint64
	pos int64
}

// index is the sparse index of a segment. Its first entry is always the
// segment's base offset at byte 0.
type index struct {
	entries []indexEntry
	nextPos int64 // the next entry is for the first record at or after it
}

func newIndex(base uint64) index {
	return index{entries: []indexEntry{{off: base, pos: 0}}, nextPos: indexInterval}
}

// add notes the record off at byte pos; records must come in order.
func (x *index) add(off uint64, pos int64) {
	if pos >= x.nextPos {
		x.entries = append(x.entries, indexEntry{off: off, pos: pos})
		x.nextPos = pos + indexInterval
	}
}

// lookup returns the last entry at or before offset off.
func (x *index) lookup(off uint64) indexEntry {
	i, _ := slices.BinarySearchFunc(x.entries, off, func(e indexEntry, t uint64) int {
		switch {
		case e.off < t:
			return -1
		case e.off > t:
			return 1
		}
		return 0
	})
	if i < len(x.entries) && x.entries[i].off == off {
		return x.entries[i]
	}
	return x.entries[max(i-1, 0)]
}

// scanChunk is how much the segment scan reads at a time.
const scanChunk = 1 << 20

// scanResult is what a scan found in a segment: the valid prefix and why it
// ends where it does.
type scanResult struct {
	count uint64 // records in the valid prefix
	valid int64  // bytes of the valid prefix
	index index  // sparse index of the valid prefix
	// err is nil if the valid prefix is the whole size, else a *CorruptError
	// (with an empty Segment) for the first frame that does not decode, or
	// the read error.
	err error
}

// scan reads the frames of a segment of size bytes whose first record has
// offset base, verifying each checksum, and stops at the first frame that
// does not decode. It allocates at most max(scanChunk, largest valid frame)
// bytes: a length field that points past size is ErrIncomplete, not an
// allocation.
func scan(r io.ReaderAt, size int64, base uint64) scanResult {
	res := scanResult{index: newIndex(base)}
	var buf []byte
	bufStart := int64(0) // position of buf[0]
	pos, off := int64(0), base
	for pos < size {
		rel := pos - bufStart
		need := int64(HeaderSize)
		if rel+HeaderSize <= int64(len(buf)) {
			need = FrameSize(buf[rel:])
		}
		if need > size-pos {
			res.err = &CorruptError{Pos: pos, Offset: off, Err: ErrIncomplete}
			break
		}
		if rel+need > int64(len(buf)) { // read a new chunk starting at pos
			n := min(max(need, scanChunk), size-pos)
			if int64(cap(buf)) < n {
				buf = make([]byte, n)
			}
			buf = buf[:n]
			if k, err := r.ReadAt(buf, pos); int64(k) < n {
				if err == nil || errors.Is(err, io.EOF) {
					err = ErrIncomplete // the file shrank under us
				}
				res.err = &CorruptError{Pos: pos, Offset: off, Err: err}
				break
			}
			bufStart, rel = pos, 0
			continue // now the header is there: look at its length again
		}
		_, _, fs, err := DecodeFrame(buf[rel:])
		if err != nil {
			res.err = &CorruptError{Pos: pos, Offset: off, Err: err}
			break
		}
		res.index.add(off, pos)
		pos += int64(fs)
		off++
		res.count++
	}
	res.valid = pos
	return res
}
