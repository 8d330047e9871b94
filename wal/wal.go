// Package wal is a local, segmented, checksummed write-ahead log of records,
// read like a Kafka partition: records get dense offsets from 0, readers
// read from any offset still kept, and named readers commit how far they
// got, which lets the log delete what every reader has finished.
//
// # Files
//
// A log is a directory:
//
//	00000000000000000000.log   segments, each named by the offset of its first record
//	00000000000000081920.log
//	readers.json               the committed offset of each named reader
//	lock                       flock'ed while the log is open, so one process has it
//
// Each record is one frame (see HeaderSize): CRC-32C, payload length, time
// (unix ns), payload. Segments are filled up to Options.SegmentBytes; the
// records of one Append call always go to one segment, so a call is all or
// nothing: one that fails leaves none of its records. An append that a
// crash cut short, before it was answered, may leave the whole records it
// starts with (recovery cuts only the torn one), as an unanswered append
// may leave all of them: a client that retries it may duplicate them.
//
// # Durability
//
// Append returns once its records are durable under Options.Sync:
// EveryAppend fsyncs before it returns (concurrent appenders share an fsync
// when they can), Grouped(d) lets concurrent appenders share a few large
// writes and one fsync, at most one every d, done by one goroutine, NoSync
// never waits (tests and benchmarks; the data are fsynced on Close and on
// segment rolls only).
// Readers see a record only once it is durable (End), so nothing a reader
// processed can vanish in a crash. A process that dies without the machine
// (kill -9) loses nothing it wrote: Open finds it in the page cache and
// fsyncs it, with the directory (and its parent): what Open finds survives
// a power cut. Files are created, renamed and deleted durably: the log
// fsyncs their directory, and Open fsyncs the parent of each directory it
// creates.
//
// # Limits
//
// A record's payload is at most Options.MaxRecordBytes, one Append's frames
// at most Options.SegmentBytes (else a *TooLargeError, nothing written); a
// Read returns at most MaxReadBytes; at most MaxReaders named readers. The
// bytes waiting for a grouped fsync (held in memory until they are
// written) are bounded by the appenders, each of which waits for its own.
// The log keeps one open file per segment. Without
// readers or retention limits the log grows until the device is full, and
// Append then fails with ErrNoSpace.
//
// # Recovery
//
// Open scans the last segment, verifying every checksum. A frame that is cut
// short or does not match its checksum ends the segment: Open truncates it
// there, fsyncs, reports it in Recovered and through Options.Logf ("wal:
// truncated torn tail of N bytes in segment X at offset Y"). This is the
// torn tail of a crash; those records had not been acknowledged, since an
// append returns only after an fsync that covered them. A frame that fails
// its checksum with a whole, valid frame after it is no torn tail but
// damage to records already acknowledged: Open refuses the log with a
// *CorruptError naming the file and the byte, and truncates nothing (move
// the segment aside to open the log without it). Sealed segments were fsynced before the next one was created, so a
// bad frame in one is corruption: reading it, or Verify, returns a
// *CorruptError naming the file and the byte position, and nothing is
// truncated.
//
// # Retention
//
// A sealed segment (never the active one) is deleted when
//   - every named reader has committed an offset at or past its end (with no
//     reader registered nothing is deleted for this reason: records are kept
//     for a reader that has not come yet), or
//   - the log is larger than Options.MaxBytes, oldest segment first, or
//   - it was last written more than Options.MaxAge ago (a segment sealed
//     before Open is dated by its file's modification time).
//
// MaxBytes and MaxAge are hard limits, as in Kafka: they delete records that
// readers have not committed, and such a reader gets ErrOutOfRange for them
// and must go on from Start. Retention runs when a segment is sealed, on
// Commit, on Open, and when Retain is called (call it periodically for
// MaxAge on a log that gets no appends).
package wal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Defaults and limits of Options.
const (
	DefaultSegmentBytes   = 64 << 20
	DefaultMaxRecordBytes = 1 << 20
	// MinSegmentBytes is the smallest Options.SegmentBytes.
	MinSegmentBytes = 4 << 10
	// MaxSegmentBytes is the largest Options.SegmentBytes.
	MaxSegmentBytes = 1 << 30
)

// Errors of the log.
var (
	// ErrNoSpace is wrapped by the error of an append (or a commit) that
	// failed because the device is full (ENOSPC) or the quota is exhausted
	// (EDQUOT). The failed records are not in the log; reads go on; an
	// append may succeed once space is freed (unless the failure came from
	// an fsync, which leaves the log failed: see Append).
	ErrNoSpace = errors.New("wal: no space left for the log")
	// ErrClosed is returned by calls on a closed log. An append that
	// returns it wrote nothing.
	ErrClosed = errors.New("wal: log is closed")
	// ErrOutOfRange is wrapped by the error of a read before Start (deleted
	// by retention) or past End.
	ErrOutOfRange = errors.New("wal: offset out of range")
	// ErrTooLarge is matched (errors.Is) by every *TooLargeError.
	ErrTooLarge = errors.New("wal: record too large")
)

// TooLargeError rejects an append whose record Index is larger than
// Options.MaxRecordBytes, or, with Index -1, whose records do not fit
// together in one segment (their frames exceed Options.SegmentBytes).
// Nothing of the call was written.
type TooLargeError struct {
	Index int
	Size  int64
	Max   int64
}

func (e *TooLargeError) Error() string {
	if e.Index < 0 {
		return fmt.Sprintf("wal: records of one append take %d bytes, more than a segment (SegmentBytes %d)", e.Size, e.Max)
	}
	return fmt.Sprintf("wal: record %d has %d bytes, more than MaxRecordBytes %d", e.Index, e.Size, e.Max)
}

// Is makes errors.Is(err, ErrTooLarge) true.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// SyncPolicy says when appended records are fsynced. The zero value is
// EveryAppend.
type SyncPolicy struct {
	mode     syncMode
	interval time.Duration
}

type syncMode uint8

const (
	syncEvery syncMode = iota
	syncGrouped
	syncNone
)

var (
	// EveryAppend fsyncs before Append returns. Appenders that wrote while
	// another one's fsync was running share the next fsync.
	EveryAppend = SyncPolicy{mode: syncEvery}
	// NoSync never fsyncs on Append: records are visible and Append returns
	// once they are written to the file. A crash of the machine (not of the
	// process) can lose them. For tests and benchmarks.
	NoSync = SyncPolicy{mode: syncNone}
)

// Grouped fsyncs from one goroutine, at most once per interval. Append
// copies its frames into the group of appends waiting for the next fsync
// and waits for that fsync. A group is written in a few large writes: by
// an appender once 256 KiB of it wait (the disk gets them while the fsync
// before runs), and the rest by the syncing goroutine just before its
// fsync, which covers the whole group.
//
// An fsync is due interval after the one before. Once due, it starts as
// soon as the appenders the last fsync answered have all appended again
// (counted: as many appends wait as it answered, plus those that were
// waiting when it ended), so that under a steady load their appends share
// one fsync rather than being split over two; or when the first waiting
// append has waited interval; or at once if the log was quiet (the first
// append came interval or more after the last fsync ended). So an
// append waits at most interval plus an fsync, or, if the fsync under way
// takes longer, until it ends plus an fsync. The schedule is kept even
// when the timer wakes late (Go's timers can be a millisecond late on an
// idle process), so fsyncs are interval apart on average, a little less
// after a late one. Grouped(0) syncs whenever there is something to sync,
// one fsync at a time.
//
// An appender that waits for each append before the next (an HTTP handler
// answering once its records are durable) appends at most once per
// interval: N of them append at most N times per interval whatever the
// disk. For a few such appenders, a small interval or Grouped(0) is faster.
func Grouped(interval time.Duration) SyncPolicy {
	return SyncPolicy{mode: syncGrouped, interval: interval}
}

func (p SyncPolicy) String() string {
	switch p.mode {
	case syncGrouped:
		return "grouped every " + p.interval.String()
	case syncNone:
		return "none"
	}
	return "every append"
}

// Options configure a Log. The zero value is valid: fsync every append,
// 64 MiB segments, 1 MiB records, no retention limit.
type Options struct {
	// Sync is the fsync policy of Append; the zero value is EveryAppend.
	Sync SyncPolicy
	// SegmentBytes is the size at which a segment is sealed and the next
	// one started, from MinSegmentBytes to MaxSegmentBytes; 0 means
	// DefaultSegmentBytes. A segment never grows past it: an append that
	// does not fit starts a new segment first.
	SegmentBytes int64
	// MaxRecordBytes is the largest payload Append accepts, at most
	// SegmentBytes-HeaderSize; 0 means DefaultMaxRecordBytes (or less if
	// SegmentBytes is smaller). A larger one is a *TooLargeError.
	MaxRecordBytes int
	// MaxBytes bounds the size of the log's segments: beyond it the oldest
	// sealed segments are deleted, read or not. 0 means no bound. The
	// active segment is never deleted, so the log can exceed MaxBytes by
	// up to one segment.
	MaxBytes int64
	// MaxAge deletes sealed segments last written longer ago, read or not.
	// 0 means no bound.
	MaxAge time.Duration
	// Now is the clock of record times and of MaxAge; nil means time.Now.
	Now func() time.Time
	// Logf, if set, is told of recoveries and deletions.
	Logf func(format string, args ...any)

	hooks *hooks // tests: injected faults
}

// hooks let tests inject I/O faults and order goroutines.
type hooks struct {
	// fs is the file layer under the log; nil means osFS.
	fs      fileSystem
	writeAt func(f file, b []byte, off int64) (int, error)
	sync    func(f file) error
	// closing runs in Close once the log is marked closed, before Close
	// waits for the fsyncs under way.
	closing func()
	// closeWait runs in an EveryAppend append that wrote before Close and
	// is about to wait for Close's fsync.
	closeWait func()
}

// normalized returns o with defaults filled in, or an error naming the
// first invalid field.
func (o Options) normalized() (Options, error) {
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.SegmentBytes < MinSegmentBytes || o.SegmentBytes > MaxSegmentBytes {
		return o, fmt.Errorf("wal: Options.SegmentBytes is %d, want %d to %d", o.SegmentBytes, MinSegmentBytes, MaxSegmentBytes)
	}
	if o.MaxRecordBytes == 0 {
		o.MaxRecordBytes = int(min(DefaultMaxRecordBytes, o.SegmentBytes-HeaderSize))
	}
	if o.MaxRecordBytes < 0 || int64(o.MaxRecordBytes) > o.SegmentBytes-HeaderSize {
		return o, fmt.Errorf("wal: Options.MaxRecordBytes is %d, want 1 to SegmentBytes-%d (%d)", o.MaxRecordBytes, HeaderSize, o.SegmentBytes-HeaderSize)
	}
	if o.MaxBytes < 0 {
		return o, fmt.Errorf("wal: Options.MaxBytes is %d, want >= 0", o.MaxBytes)
	}
	if o.MaxAge < 0 {
		return o, fmt.Errorf("wal: Options.MaxAge is %v, want >= 0", o.MaxAge)
	}
	if o.Sync.mode == syncGrouped && o.Sync.interval < 0 {
		return o, fmt.Errorf("wal: Options.Sync is Grouped(%v), want an interval >= 0", o.Sync.interval)
	}
	if o.Sync.mode > syncNone {
		return o, fmt.Errorf("wal: Options.Sync is invalid")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.hooks == nil {
		o.hooks = &hooks{}
	}
	if o.hooks.fs == nil {
		o.hooks.fs = osFS{}
	}
	if o.hooks.writeAt == nil {
		o.hooks.writeAt = file.WriteAt
	}
	if o.hooks.sync == nil {
		o.hooks.sync = file.Sync
	}
	if o.hooks.closing == nil {
		o.hooks.closing = func() {}
	}
	if o.hooks.closeWait == nil {
		o.hooks.closeWait = func() {}
	}
	return o, nil
}

// Record is one record read from the log.
type Record struct {
	Offset  uint64
	Time    int64 // unix nanoseconds: when it was appended, or as given to AppendEntries
	Payload []byte
}

// Entry is a record to append with its own time.
type Entry struct {
	Time    int64 // unix nanoseconds; 0 means the time of the append
	Payload []byte
}

// Recovery describes what Open truncated: the torn tail of the last
// segment. The zero value means nothing was truncated.
type Recovery struct {
	Segment        string // path of the segment
	Offset         uint64 // offset the first dropped record would have had: the next offset
	Pos            int64  // byte position where the segment was cut
	TruncatedBytes int64
	Reason         error // ErrIncomplete or ErrChecksum
}

// Stats are counters of a log.
type Stats struct {
	Start    uint64 // oldest record kept
	End      uint64 // one past the last durable record
	Written  uint64 // one past the last written record, durable or not
	Segments int
	Bytes    int64 // size of all segments

	Appends  uint64 // successful Append calls since Open
	Records  uint64 // records they appended
	Appended int64  // bytes of their frames
	Syncs    uint64 // fsyncs of segment data (appends, rolls, Close)
	Deleted  uint64 // segments deleted
}

// segment is one file of the log.
type segment struct {
	base      uint64
	path      string
	f         file
	size      int64     // bytes of whole frames written
	count     uint64    // records in it
	lastWrite time.Time // for MaxAge
	idx       index     // valid if indexed
	indexed   bool      // sealed segments from before Open are indexed on first read
	refs      int       // readers and syncs using f, under Log.mu
	deleted   bool      // removed from the log; f is closed when refs drops to 0
}

// group is the appends that one grouped fsync covers. Appenders copy their
// frames into buf under l.mu, without writing; they are written in a few
// large writes: by an appender once writeBehind bytes wait (while the
// syncer is busy, usually fsyncing the group before), and by the syncer,
// the rest, just before the fsync.
type group struct {
	buf     []byte   // the frames of its appends, one after another
	appends []staged // its appends, in order
	records int      // records in it
	since   time.Time
	now     time.Time // the latest append's time: the segment's lastWrite
	done    chan struct{}

	// Under l.mu: appends [0, wi) are written (or failed), the next one
	// starts at buf[wpos] and has wrec records before it in the group.
	wi   int
	wpos int64
	wrec int
	// The writes of its appends, in order; with err, when it is closed,
	// the result of each append (see result).
	chunks  []chunk
	written bool  // a chunk was written
	err     error // of the fsync
}

// staged is one append in a group.
type staged struct {
	bytes int64 // of its frames
	n     int   // records
}

// chunk is the result of the appends from the end of the chunk before to
// end: written with their first record at offset first (rec records of the
// group before it), or failed with err and not in the log.
type chunk struct {
	end   int
	rec   int
	first uint64
	err   error
}

// result is what Append returns for the append i of g with before records
// before it in g, once g.done is closed.
func (g *group) result(i, before int) (uint64, error) {
	for _, c := range g.chunks {
		if i < c.end {
			if c.err != nil {
				return 0, c.err
			}
			return c.first + uint64(before-c.rec), g.err
		}
	}
	return 0, fmt.Errorf("wal: append %d of a group of %d was not written", i, len(g.appends)) // a bug
}

// writeBehind is how many bytes of a group may wait unwritten before the
// appender that brings it there writes them: the disk gets them while the
// fsync before runs, and the writes stay large (a write costs about 10 µs
// besides its bytes on ext4, as much as 30 KiB of copying).
const writeBehind = 256 << 10

// maxSpareBuf is the largest group buffer kept for the next group.
const maxSpareBuf = 8 << 20

// Log is an open write-ahead log. Its methods are safe for concurrent use.
type Log struct {
	dir    string
	opts   Options
	fs     fileSystem // opts.hooks.fs
	unlock func()     // releases the lock on dir

	mu       sync.Mutex
	segs     []*segment // oldest first; the last is active
	next     uint64     // offset of the next record written
	durable  uint64     // records below it are durable and readable
	bytes    int64      // size of all segments
	changed  chan struct{}
	pending  *group     // grouped: appends staged since the last fsync began
	target   int        // grouped: appends waiting when all that the last fsync answered are back
	writing  bool       // grouped: someone writes a group's appends (the only writer)
	flushing bool       // grouped: the syncer waits for writing to end: appenders leave it the writing
	wrote    *sync.Cond // grouped: on mu, writing ended
	spare    []byte     // grouped: the buffer of a written group, for the next
	spareAs  []staged   // grouped: and its appends
	err      error      // sticky: the log failed and refuses appends
	closed   bool
	commits  map[string]uint64
	stats    Stats
	recovery Recovery

	syncMu   sync.Mutex // one fsync of the active segment at a time (EveryAppend)
	commitMu sync.Mutex // one write of readers.json at a time

	kick     chan struct{} // grouped: an append waits for a sync
	stop     chan struct{} // grouped: Close
	syncDone chan struct{} // grouped: the syncer returned

	// closeSynced is made under mu when closed is set, and closed once
	// Close's final fsync has made every record written durable (or the
	// log has failed): EveryAppend appenders that wrote before Close wait
	// for it.
	closeSynced chan struct{}
}

const segmentSuffix = ".log"

func segmentName(base uint64) string { return fmt.Sprintf("%020d%s", base, segmentSuffix) }

// parseSegmentName returns the base offset of a segment file name.
func parseSegmentName(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	base, err := strconv.ParseUint(digits, 10, 64)
	return base, err == nil
}

// Open opens the log in dir, creating dir and an empty log if needed, and
// recovers it: the last segment is scanned and a torn tail truncated (see
// Recovered). Only one Log may have a directory open at a time, in any
// process.
func Open(dir string, opts Options) (*Log, error) {
	opts, err := opts.normalized()
	if err != nil {
		return nil, err
	}
	fsys := opts.hooks.fs
	if err := makeDir(fsys, dir); err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	unlock, err := fsys.Lock(dir)
	if err != nil {
		return nil, err
	}
	l := &Log{dir: dir, opts: opts, fs: fsys, unlock: unlock, changed: make(chan struct{})}
	if err := l.load(); err != nil {
		l.closeFiles()
		unlock()
		return nil, err
	}
	if opts.Sync.mode == syncGrouped {
		l.kick = make(chan struct{}, 1)
		l.wrote = sync.NewCond(&l.mu)
		l.stop = make(chan struct{})
		l.syncDone = make(chan struct{})
		go l.syncLoop(opts.Sync.interval)
	}
	return l, nil
}

// load reads the directory: commits, segments, recovery of the last one.
func (l *Log) load() error {
	var err error
	if l.commits, err = loadCommits(l.fs, l.dir); err != nil {
		return err
	}
	entries, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	var bases []uint64
	for _, e := range entries {
		if base, ok := parseSegmentName(e.Name()); ok && e.Type().IsRegular() {
			bases = append(bases, base)
		}
	}
	slices.Sort(bases)
	if len(bases) == 0 {
		return l.createSegment(0, l.opts.Now())
	}
	for i, base := range bases {
		path := filepath.Join(l.dir, segmentName(base))
		last := i == len(bases)-1
		flag := os.O_RDONLY
		if last {
			flag = os.O_RDWR
		}
		f, err := l.fs.OpenFile(path, flag, 0)
		if err != nil {
			return fmt.Errorf("wal: %w", err)
		}
		info, err := f.Stat()
		if err != nil {
			_ = f.Close()
			return fmt.Errorf("wal: %w", err)
		}
		s := &segment{base: base, path: path, f: f, size: info.Size(), lastWrite: info.ModTime()}
		l.segs = append(l.segs, s)
		l.bytes += s.size
		if !last && s.size == 0 {
			return fmt.Errorf("wal: sealed segment %s is empty", path)
		}
	}
	for i, s := range l.segs[:len(l.segs)-1] {
		next := l.segs[i+1].base
		if next <= s.base {
			return fmt.Errorf("wal: segments %s and %s overlap", s.path, l.segs[i+1].path)
		}
		s.count = next - s.base
	}
	act := l.active()
	if err := l.recover(act); err != nil {
		return err
	}
	// Entries that a process killed before its fsync of the directory
	// left (a segment created, readers.json renamed) are in the log now:
	// they must survive a power cut, as the data recover fsyncs must.
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("wal: fsync %s: %w", l.dir, err)
	}
	l.next = act.base + act.count
	l.durable = l.next
	l.mu.Lock()
	l.retain()
	l.mu.Unlock()
	return nil
}

// recover scans the last segment and truncates a torn tail.
func (l *Log) recover(s *segment) error {
	res := scan(s.f, s.size, s.base)
	if res.err != nil {
		var ce *CorruptError
		if !errors.As(res.err, &ce) {
			return fmt.Errorf("wal: segment %s: %w", s.path, res.err)
		}
		if !errors.Is(ce.Err, ErrIncomplete) && !errors.Is(ce.Err, ErrChecksum) {
			return fmt.Errorf("wal: segment %s: reading byte %d: %w", s.path, ce.Pos, ce.Err) // an I/O error: truncate nothing
		}
		if errors.Is(ce.Err, ErrChecksum) {
			next, err := wholeFrameAfter(s.f, ce.Pos, s.size)
			if err != nil {
				return fmt.Errorf("wal: segment %s: %w", s.path, err)
			}
			if next >= 0 { // the appends after it were answered: not a torn tail
				ce.Segment = s.path
				return fmt.Errorf("%w, and a whole record follows at byte %d: records already acknowledged are damaged; "+
					"the log is left as it is (move the segment aside to open the log without it)", ce, next)
			}
		}
		if err := s.f.Truncate(res.valid); err != nil {
			return fmt.Errorf("wal: truncating the torn tail of %s: %w", s.path, err)
		}
		l.recovery = Recovery{Segment: s.path, Offset: s.base + res.count, Pos: res.valid,
			TruncatedBytes: s.size - res.valid, Reason: ce.Err}
		l.opts.Logf("wal: truncated torn tail of %d bytes in segment %s at offset %d (byte %d): %v",
			s.size-res.valid, s.path, s.base+res.count, res.valid, ce.Err)
		l.bytes -= s.size - res.valid
		s.size = res.valid
	}
	// What the crashed process wrote may still be only in the page cache.
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("wal: fsync %s: %w", s.path, err)
	}
	s.idx, s.indexed, s.count = res.index, true, res.count
	return nil
}

// wholeFrameAfter is the position of the first whole, valid frame after
// the bad frame at pos (up to size), or -1. The bad frame's own length is
// tried first (a flipped payload bit keeps it right); then every position,
// for a length field that was damaged too.
func wholeFrameAfter(r io.ReaderAt, pos, size int64) (int64, error) {
	if size-pos <= HeaderSize {
		return -1, nil
	}
	b := make([]byte, size-pos)
	if _, err := r.ReadAt(b, pos); err != nil && !errors.Is(err, io.EOF) {
		return -1, fmt.Errorf("reading byte %d: %w", pos, err)
	}
	whole := func(q int64) bool {
		_, _, _, err := DecodeFrame(b[q:])
		return err == nil
	}
	if q := FrameSize(b); q < int64(len(b)) && whole(q) {
		return pos + q, nil
	}
	for q := int64(1); q+HeaderSize <= int64(len(b)); q++ {
		if FrameSize(b[q:]) <= int64(len(b))-q && whole(q) {
			return pos + q, nil
		}
	}
	return -1, nil
}

// createSegment creates and registers the segment with the given base as
// the active one, and fsyncs the directory.
func (l *Log) createSegment(base uint64, now time.Time) error {
	path := filepath.Join(l.dir, segmentName(base))
	f, err := l.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("wal: creating segment: %w", mapErr(err))
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		_ = f.Close()
		_ = l.fs.Remove(path)
		return fmt.Errorf("wal: creating segment %s: %w", path, mapErr(err))
	}
	l.segs = append(l.segs, &segment{base: base, path: path, f: f, lastWrite: now, idx: newIndex(base), indexed: true})
	return nil
}

// mapErr wraps ErrNoSpace around an error of a full device.
func mapErr(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return err
}

// Recovered reports what Open truncated; the zero Recovery if nothing.
func (l *Log) Recovered() Recovery {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.recovery
}

// Dir is the log's directory.
func (l *Log) Dir() string { return l.dir }

// Start is the offset of the oldest record kept (retention deletes from the
// front); it equals End when the log is empty.
func (l *Log) Start() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.segs[0].base
}

// End is one past the last durable record: the offset the next record will
// have, once every append under way is durable. Reads stop there.
func (l *Log) End() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.durable
}

// Changed returns a channel that is closed when End moves (or the log is
// closed). Take it before reading, so that records which arrive between the
// read and the wait are not missed:
//
//	ch := l.Changed()
//	recs, _ := l.Read(next, 100)
//	if len(recs) == 0 { <-ch }
func (l *Log) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// Wait blocks until End is past offset, the context ends or the log closes.
func (l *Log) Wait(ctx context.Context, offset uint64) error {
	for {
		l.mu.Lock()
		end, closed, ch := l.durable, l.closed, l.changed
		l.mu.Unlock()
		switch {
		case end > offset:
			return nil
		case closed:
			return ErrClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Stats returns the log's counters.
func (l *Log) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.stats
	st.Start, st.End, st.Written = l.segs[0].base, l.durable, l.next
	st.Segments, st.Bytes = len(l.segs), l.bytes
	return st
}

// publish makes the records below end readable.
func (l *Log) publish(end uint64) {
	if end > l.durable {
		l.durable = end
		close(l.changed)
		l.changed = make(chan struct{})
	}
}

// fail makes the log refuse appends from now on, and returns that error.
func (l *Log) fail(err error) error {
	if l.err == nil {
		l.err = fmt.Errorf("wal: log failed, reopen it to append again: %w", mapErr(err))
	}
	return l.err
}

// release drops a reference to s taken under l.mu, closing its file if s
// was deleted meanwhile. Called under l.mu.
func (l *Log) release(s *segment) {
	s.refs--
	if s.deleted && s.refs == 0 && s.f != nil {
		_ = s.f.Close()
		s.f = nil
	}
}

func (l *Log) active() *segment { return l.segs[len(l.segs)-1] }

// Append appends records, stamped with the time of the call, and returns
// the offset of the first; the others follow densely. It returns once they
// are durable under Options.Sync, so a nil error means they survive a crash.
//
// On an error nothing of the call is readable: a record larger than
// MaxRecordBytes is a *TooLargeError; a failed write (ErrNoSpace for a full
// device) is cut off the file again and the log goes on (with Grouped, the
// appends written together with it fail too); a failed fsync
// fails the log (the kernel may have dropped the unsynced pages, so their
// state is unknown): every later append returns that error, reads go on,
// and reopening recovers. If ctx ends while the append waits for its fsync,
// Append returns ctx's error but the records may still become durable
// (retrying may duplicate them: at least once). On a closed log Append
// returns ErrClosed and writes nothing; one that wrote before Close is
// answered by Close's fsync (see Close).
func (l *Log) Append(ctx context.Context, payloads [][]byte) (uint64, error) {
	now := l.opts.Now()
	t := now.UnixNano()
	return l.append(ctx, now, len(payloads), func(i int) (int64, []byte) { return t, payloads[i] })
}

// AppendEntries is Append with a time per record (0: the time of the call).
func (l *Log) AppendEntries(ctx context.Context, entries []Entry) (uint64, error) {
	now := l.opts.Now()
	t := now.UnixNano()
	return l.append(ctx, now, len(entries), func(i int) (int64, []byte) {
		if entries[i].Time != 0 {
			return entries[i].Time, entries[i].Payload
		}
		return t, entries[i].Payload
	})
}

func (l *Log) append(ctx context.Context, now time.Time, n int, rec func(int) (int64, []byte)) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	total := int64(0)
	for i := range n {
		_, p := rec(i)
		if len(p) > l.opts.MaxRecordBytes {
			return 0, &TooLargeError{Index: i, Size: int64(len(p)), Max: int64(l.opts.MaxRecordBytes)}
		}
		total += HeaderSize + int64(len(p))
	}
	if total > l.opts.SegmentBytes {
		return 0, &TooLargeError{Index: -1, Size: total, Max: l.opts.SegmentBytes}
	}
	bp := getBuf(total)
	buf := *bp
	for i := range n {
		t, p := rec(i)
		buf = AppendFrame(buf, t, p)
	}

	l.mu.Lock()
	if l.opts.Sync.mode == syncGrouped && n > 0 {
		return l.stage(ctx, bp, buf, n, now)
	}
	first, err := l.write(buf, n, now)
	*bp = buf
	putBuf(bp)
	if err != nil || n == 0 {
		l.mu.Unlock()
		return first, err
	}
	if l.opts.Sync.mode == syncNone {
		l.publish(l.next)
		l.mu.Unlock()
		return first, nil
	}
	end := l.next
	l.mu.Unlock()
	return first, l.syncTo(end)
}

// stage adds the frames of an append (n records, in *bp) to the pending
// group and waits for its fsync (Grouped). Called under l.mu, which it
// releases.
func (l *Log) stage(ctx context.Context, bp *[]byte, frames []byte, n int, now time.Time) (uint64, error) {
	var err error
	switch {
	case l.closed:
		err = ErrClosed
	case l.err != nil:
		err = l.err
	}
	if err != nil {
		l.mu.Unlock()
		putBuf(bp)
		return 0, err
	}
	g := l.pending
	if g == nil {
		g = &group{buf: l.spare, appends: l.spareAs, since: time.Now(), done: make(chan struct{})}
		l.spare, l.spareAs = nil, nil
		l.pending = g
	}
	i, before := len(g.appends), g.records
	g.buf = append(g.buf, frames...)
	g.appends = append(g.appends, staged{bytes: int64(len(frames)), n: n})
	g.records += n
	if now.After(g.now) {
		g.now = now
	}
	// Wake the syncer for a new group, and when every appender the last
	// fsync answered may be back (it may then start at once).
	if i == 0 || i+1 == l.target {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
	if !l.writing && !l.flushing && int64(len(g.buf))-g.wpos >= writeBehind {
		l.writing = true
		l.writeStaged(g)
		l.writing = false
		l.wrote.Broadcast()
	}
	l.mu.Unlock()
	*bp = frames
	putBuf(bp)
	select {
	case <-g.done:
		return g.result(i, before)
	case <-ctx.Done():
		return 0, fmt.Errorf("wal: waiting for fsync: %w", ctx.Err())
	}
}

// maxPooledBuf is the largest encoding buffer kept for reuse.
const maxPooledBuf = 1 << 20

var bufPool sync.Pool

// getBuf returns an empty buffer with room for n bytes.
func getBuf(n int64) *[]byte {
	if n <= maxPooledBuf {
		if bp, ok := bufPool.Get().(*[]byte); ok {
			*bp = slices.Grow((*bp)[:0], int(n))
			return bp
		}
	}
	b := make([]byte, 0, max(n, 4096))
	return &b
}

func putBuf(bp *[]byte) {
	if cap(*bp) <= maxPooledBuf {
		*bp = (*bp)[:0]
		bufPool.Put(bp)
	}
}

// write writes the frames in buf (n records) to the active segment, rolling
// first if they do not fit. Called under l.mu.
func (l *Log) write(buf []byte, n int, now time.Time) (uint64, error) {
	switch {
	case l.closed:
		return 0, ErrClosed
	case l.err != nil:
		return 0, l.err
	case n == 0:
		return l.next, nil
	}
	act := l.active()
	if act.size > 0 && act.size+int64(len(buf)) > l.opts.SegmentBytes {
		if err := l.roll(now); err != nil {
			return 0, err
		}
		act = l.active()
	}
	if _, err := l.opts.hooks.writeAt(act.f, buf, act.size); err != nil {
		err = fmt.Errorf("wal: appending to %s: %w", act.path, mapErr(err))
		if terr := act.f.Truncate(act.size); terr != nil {
			return 0, l.fail(fmt.Errorf("%v; then cutting it back to %d bytes: %w", err, act.size, terr))
		}
		return 0, err
	}
	first := l.next
	l.written(act, buf, 1, now)
	return first, nil
}

// written accounts for the frames of appends appends just written at the
// end of segment s. Called under l.mu.
func (l *Log) written(s *segment, frames []byte, appends int, now time.Time) {
	records := uint64(0)
	for pos := int64(0); pos < int64(len(frames)); records++ {
		s.idx.add(l.next+records, s.size+pos)
		pos += FrameSize(frames[pos:])
	}
	s.size += int64(len(frames))
	s.count += records
	s.lastWrite = now
	l.bytes += int64(len(frames))
	l.next += records
	l.stats.Appends += uint64(appends)
	l.stats.Records += records
	l.stats.Appended += int64(len(frames))
}

// writeStaged writes the appends of g not written yet to the active
// segment, rolling first when the next one does not fit (an append goes to
// one segment), in one write per segment, outside l.mu. The caller holds
// l.writing: it is the only writer, so the active segment and its size stay
// as they are meanwhile. A failed write is cut off the file again, and its
// appends and the others of this call fail. Called under l.mu.
func (l *Log) writeStaged(g *group) {
	upto := len(g.appends)
	for g.wi < upto {
		var err error
		j, size := g.wi, int64(0)
		act := l.active()
		for j < upto && (act.size+size == 0 || act.size+size+g.appends[j].bytes <= l.opts.SegmentBytes) {
			size += g.appends[j].bytes
			j++
		}
		switch {
		case l.err != nil:
			err = l.err
		case j == g.wi:
			err = l.roll(g.now)
			if err == nil {
				continue
			}
		default:
			frames, at := g.buf[g.wpos:g.wpos+size], act.size
			l.mu.Unlock()
			_, err = l.opts.hooks.writeAt(act.f, frames, at)
			l.mu.Lock()
			if err == nil {
				g.chunks = append(g.chunks, chunk{end: j, rec: g.wrec, first: l.next})
				g.written = true
				l.written(act, frames, j-g.wi, g.now)
				g.advance(j)
				continue
			}
			err = fmt.Errorf("wal: appending to %s: %w", act.path, mapErr(err))
			if terr := act.f.Truncate(at); terr != nil {
				err = l.fail(fmt.Errorf("%v; then cutting it back to %d bytes: %w", err, at, terr))
			}
		}
		g.chunks = append(g.chunks, chunk{end: upto, rec: g.wrec, err: err})
		g.advance(upto)
	}
}

// stagedAppends is the number of appends in the pending group. Called under
// l.mu.
func (l *Log) stagedAppends() int {
	if l.pending == nil {
		return 0
	}
	return len(l.pending.appends)
}

// advance moves g's next append to write to j.
func (g *group) advance(j int) {
	for ; g.wi < j; g.wi++ {
		g.wpos += g.appends[g.wi].bytes
		g.wrec += g.appends[g.wi].n
	}
}

// roll seals the active segment (fsyncing it, so sealed segments are whole)
// and starts the next. Called under l.mu.
func (l *Log) roll(now time.Time) error {
	act := l.active()
	l.stats.Syncs++
	if err := l.opts.hooks.sync(act.f); err != nil {
		return l.fail(fmt.Errorf("fsync %s: %w", act.path, err))
	}
	if err := l.createSegment(l.next, now); err != nil {
		return err
	}
	l.retain()
	return nil
}

// syncTo makes the records below end durable (EveryAppend). An fsync that
// started after they were written covers them, so appenders that queue here
// behind one fsync share the next.
//
// If the log was closed after they were written, Close's final fsync covers
// them: syncTo waits for it (without syncMu, which Close takes) and returns
// nil, or the error of the log if that fsync failed. It never returns
// ErrClosed: the records are written, and may survive.
func (l *Log) syncTo(end uint64) error {
	l.syncMu.Lock()
	l.mu.Lock()
	if l.closed && l.durable < end && l.err == nil {
		done := l.closeSynced
		l.mu.Unlock()
		l.syncMu.Unlock()
		l.opts.hooks.closeWait()
		<-done
		l.mu.Lock()
		defer l.mu.Unlock()
		if settled, err := l.settled(end); settled {
			return err
		}
		return fmt.Errorf("wal: Close neither made records below %d durable nor failed the log", end) // a bug
	}
	defer l.syncMu.Unlock()
	defer l.mu.Unlock()
	if settled, err := l.settled(end); settled {
		return err
	}
	return l.syncActive()
}

// settled says whether the records below end need no fsync from syncTo:
// they are durable (nil), or the log failed (its error). Called under l.mu.
func (l *Log) settled(end uint64) (ok bool, err error) {
	switch {
	case l.durable >= end:
		return true, nil
	case l.err != nil:
		return true, l.err
	}
	return false, nil
}

// syncActive fsyncs the active segment outside l.mu and publishes what it
// covers: every record written before it started (earlier segments were
// fsynced when they were sealed). Called under l.mu, which it releases
// during the fsync.
func (l *Log) syncActive() error {
	s, target := l.active(), l.next
	s.refs++
	l.stats.Syncs++
	l.mu.Unlock()
	err := l.opts.hooks.sync(s.f)
	l.mu.Lock()
	l.release(s)
	if err != nil {
		return l.fail(fmt.Errorf("fsync %s: %w", s.path, err))
	}
	l.publish(target)
	return nil
}

// syncLoop is the goroutine of Grouped(interval). An fsync is due interval
// after the last one was. Once due, it starts as soon as the appends
// waiting are as many as the last fsync answered plus those that were
// waiting when it ended (under a steady load, every appender it answered
// has come back: waiting longer would only delay them all), or when the
// first of them has waited interval, or at once if the log was quiet (the
// first came interval or more after the last fsync ended). It fsyncs once
// more when the log closes.
func (l *Log) syncLoop(interval time.Duration) {
	defer close(l.syncDone)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var due, ended time.Time // when the next fsync is due; when the last one ended
	var slept time.Time      // what the timer last woke the loop for
	for {
		l.mu.Lock()
		g, target := l.pending, l.target
		var appends int
		var since time.Time
		if g != nil {
			appends, since = len(g.appends), g.since
		}
		l.mu.Unlock()
		var wake time.Time // zero: wait for a kick
		if g != nil {
			now := time.Now()
			ready := appends >= target || since.Sub(ended) >= interval
			switch {
			case now.Before(due):
				wake = due
			case ready || !now.Before(since.Add(interval)):
				if ready && !due.IsZero() && slept.Equal(due) {
					// Timers fire late (by up to a millisecond when the
					// process is idle); keeping to the schedule rather
					// than to the late wake-up keeps fsyncs interval
					// apart on average.
					due = due.Add(interval)
				} else {
					due = now.Add(interval)
				}
				ended = l.syncPending()
				continue
			default:
				wake = since.Add(interval)
			}
		}
		var fired <-chan time.Time
		if !wake.IsZero() {
			timer.Reset(time.Until(wake))
			fired = timer.C
		}
		select {
		case <-l.kick:
			timer.Stop()
		case <-fired:
			slept = wake
		case <-l.stop:
			timer.Stop()
			l.syncPending()
			return
		}
	}
}

// syncPending writes the rest of the appends of the pending group, fsyncs
// them and releases them; it returns when it was done.
func (l *Log) syncPending() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flushing = true
	for l.writing {
		l.wrote.Wait()
	}
	l.flushing = false
	g := l.pending
	if g == nil {
		return time.Now()
	}
	l.pending = nil
	l.writing = true
	l.writeStaged(g)
	l.writing = false
	l.wrote.Broadcast()
	if g.written {
		if l.err == nil {
			_ = l.syncActive()
		}
		g.err = l.err
	}
	close(g.done)
	// Those who appended meanwhile wait in the next group: it is complete
	// when the appenders just answered have joined them.
	l.target = len(g.appends) + l.stagedAppends()
	if cap(g.buf) <= maxSpareBuf {
		l.spare, l.spareAs = g.buf[:0], g.appends[:0]
	}
	return time.Now()
}

// Close waits for the pending fsync, fsyncs the active segment and closes
// the files. Appends that wrote before Close and wait for their fsync are
// answered by Close's: nil, or, if it fails (which fails the log), its
// error. Appends after Close return ErrClosed and write nothing. Calling it
// again does nothing.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.closeSynced = make(chan struct{})
	l.mu.Unlock()
	l.opts.hooks.closing()
	if l.stop != nil {
		close(l.stop)
		<-l.syncDone
	}
	l.syncMu.Lock() // no EveryAppend fsync under way
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	var err error
	if l.err == nil {
		act := l.active()
		l.stats.Syncs++
		if serr := l.opts.hooks.sync(act.f); serr != nil {
			// Appends waiting for this fsync get the error (see syncTo).
			err = l.fail(fmt.Errorf("fsync %s: %w", act.path, serr))
		} else {
			l.publish(l.next) // appends that wrote before Close and wait for EveryAppend's fsync
		}
	}
	// Every record written is now durable or the log failed: the appends
	// waiting in syncTo have their answer.
	close(l.closeSynced)
	close(l.changed)
	l.closeFiles()
	l.unlock()
	return err
}

// closeFiles closes every segment's file (those in use by a reader are
// closed under it: its read fails).
func (l *Log) closeFiles() {
	for _, s := range l.segs {
		if s.f != nil {
			_ = s.f.Close()
			s.f = nil
		}
	}
}
