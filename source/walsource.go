package source

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"
	"unicode/utf8"

	"github.com/acktor/acktor/wal"
)

// Defaults and limits of WALConfig.
const (
	// DefaultWALCommitEvery is how often a WAL source commits by default.
	DefaultWALCommitEvery = 100 * time.Millisecond
	// DefaultWALWindow is the default WALConfig.Window.
	DefaultWALWindow = 1 << 20
	// MaxWALWindow bounds WALConfig.Window (its bitmap takes Window/8 bytes).
	MaxWALWindow = 1 << 26
	// walReadBatch is how many records a WAL source reads ahead of Next.
	walReadBatch = 256
)

// WALConfig describes a source that reads a write-ahead log.
type WALConfig struct {
	// Log is the open log; the source does not close it.
	Log *wal.Log
	// Reader is the name under which the source commits its offset in the
	// log (see wal.Log.Commit); one source per name at a time.
	Reader string
	// StopAtEnd makes Next return io.EOF once it has handed out every
	// record that was durable when the source was opened (batch runs,
	// tests). Without it the source follows the log: Next answers
	// ErrNotReady at the end and picks up records appended later.
	StopAtEnd bool
	// CommitEvery is how often, at most, the committed offset is written
	// (a commit is an fsynced file write); 0 means DefaultWALCommitEvery.
	// A commit also applies the log's retention, whose limits are hard:
	// they may delete records this source has not read yet, which it then
	// skips.
	// Close commits too.
	CommitEvery time.Duration
	// Window bounds how far Next may run ahead of the committed prefix: at
	// most Window records from the first one not Done on are handed out;
	// beyond, Next answers ErrNotReady until that record is Done (a root
	// stuck in replays holds the source back rather than a growing
	// bitmap). 0 means DefaultWALWindow; at most MaxWALWindow.
	Window int
	// Now is the clock of CommitEvery; nil means time.Now.
	Now func() time.Time
}

func (c WALConfig) withDefaults() (WALConfig, error) {
	switch {
	case c.Log == nil:
		return c, errors.New("WALConfig.Log is nil")
	case c.Reader == "":
		return c, errors.New("WALConfig.Reader is empty")
	case c.CommitEvery < 0:
		return c, fmt.Errorf("WALConfig.CommitEvery is %v, want >= 0", c.CommitEvery)
	case c.Window < 0 || c.Window > MaxWALWindow:
		return c, fmt.Errorf("WALConfig.Window is %d, want 0 to %d", c.Window, MaxWALWindow)
	}
	if c.CommitEvery == 0 {
		c.CommitEvery = DefaultWALCommitEvery
	}
	if c.Window == 0 {
		c.Window = DefaultWALWindow
	}
	c.Window = (c.Window + 63) &^ 63
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}

// WAL returns a Factory for a source that reads the write-ahead log
// cfg.Log, like a Kafka consumer reads a partition. It returns an error
// naming the first invalid field of cfg when a task opens it.
//
// The log is one sequence, so the source cannot be split: the factory
// accepts only tasks == 1 (several nodes each read their own log).
//
// Root.ID is the record's offset and Root.Time its time in the log (when it
// was appended, or the time given to wal.Log.AppendEntries). A payload that
// is not valid UTF-8 comes out of Next as a *BadRecord naming its offset,
// which the spout dead-letters. Replay reads the record from the log again,
// so no payload is kept in memory. Total is -1.
//
// Reading starts at the reader's committed offset (or at the log's start if
// the reader is new, or if retention deleted records it had not committed:
// those are lost, and the log's Logf reports the deletion; records deleted
// while the source runs are skipped the same way, and Replay of one fails,
// which the spout dead-letters). The source
// registers the reader at open, so the log keeps its segments for it.
// Done marks an offset finished; the committed offset advances over the
// contiguous prefix of finished offsets only, at most every
// cfg.CommitEvery and on Close. After a crash everything past the last
// commit is read again: at least once.
func WAL(cfg WALConfig) Factory {
	return func(task, tasks int) (Source, error) {
		name := cfg.Reader
		if cfg.Log != nil {
			name = cfg.Log.Dir() + " reader " + cfg.Reader
		}
		if tasks != 1 {
			return nil, fmt.Errorf("source: wal %s: a log cannot be split: tasks is %d, want 1", name, tasks)
		}
		if task != 0 {
			return nil, fmt.Errorf("source: wal %s: task is %d, want 0", name, task)
		}
		cfg, err := cfg.withDefaults()
		if err != nil {
			return nil, fmt.Errorf("source: wal %s: %w", name, err)
		}
		return openWAL(cfg, name)
	}
}

// walSource is the Source of WAL.
type walSource struct {
	cfg  WALConfig
	log  *wal.Log
	name string // for errors

	pos       uint64       // offset of the next record to hand out
	low       uint64       // first offset not Done: the committable offset
	done      windowBitmap // Done offsets in [low, pos)
	committed uint64       // last offset committed
	lastTry   time.Time    // of the last commit
	stopAt    uint64       // with StopAtEnd: io.EOF here
	buf       []wal.Record // read ahead, from pos on
	err       error        // sticky error of Next
	commitErr error        // of the last commit, if it failed
	closed    bool
}

func openWAL(cfg WALConfig, name string) (*walSource, error) {
	l := cfg.Log
	start, known := l.Committed(cfg.Reader)
	// A commit past the end means the log lost records (written with
	// wal.NoSync); go on from its end.
	first := min(max(start, l.Start()), l.End())
	if !known || first != start {
		if err := l.Commit(cfg.Reader, first); err != nil {
			return nil, fmt.Errorf("source: wal %s: %w", name, err)
		}
	}
	s := &walSource{cfg: cfg, log: l, name: name, pos: first, low: first, committed: first,
		done: newWindowBitmap(cfg.Window), lastTry: cfg.Now(), stopAt: ^uint64(0)}
	if cfg.StopAtEnd {
		s.stopAt = l.End()
	}
	return s, nil
}

// Next hands out the next record of the log, ErrNotReady at its end (or
// when Window records are out), io.EOF with StopAtEnd.
func (s *walSource) Next() (Root, error) {
	if s.closed {
		return Root{}, fmt.Errorf("source: wal %s: %w", s.name, os.ErrClosed)
	}
	if s.err != nil {
		return Root{}, s.err
	}
	s.maybeCommit()
	if s.pos >= s.stopAt {
		return Root{}, io.EOF
	}
	if len(s.buf) == 0 {
		if err := s.fill(); err != nil {
			return Root{}, err
		}
	}
	r := s.buf[0]
	s.buf[0] = wal.Record{}
	s.buf = s.buf[1:]
	s.pos = r.Offset + 1
	if !utf8.Valid(r.Payload) {
		return Root{}, &BadRecord{ID: r.Offset, Payload: string(r.Payload),
			Reason: fmt.Sprintf("wal %s: record at offset %d is not valid UTF-8", s.log.Dir(), r.Offset)}
	}
	return Root{ID: r.Offset, Payload: string(r.Payload), Time: r.Time}, nil
}

// fill reads records from pos on into buf, or says why there are none.
func (s *walSource) fill() error {
	room := uint64(s.done.size()) - (s.pos - s.low)
	if room == 0 {
		return ErrNotReady // Window records out: wait for the first to be Done
	}
	n := min(uint64(walReadBatch), room, s.stopAt-s.pos)
	recs, err := s.log.Read(s.pos, int(n))
	if errors.Is(err, wal.ErrOutOfRange) {
		if start := s.log.Start(); s.pos < start {
			return s.skipTo(start)
		}
	}
	if err != nil {
		s.err = fmt.Errorf("source: wal %s: %w", s.name, err)
		return s.err
	}
	if len(recs) == 0 {
		return ErrNotReady
	}
	s.buf = recs
	return nil
}

// skipTo jumps over records retention deleted before they were read: they
// count as Done. If that would take the window past its size, it waits
// until the records out are Done first (their replays fail the same way).
func (s *walSource) skipTo(start uint64) error {
	if start-s.low >= uint64(s.done.size()) {
		if s.low < s.pos {
			return ErrNotReady
		}
		s.low = start
		s.pos = start
	} else {
		for off := s.pos; off < start; off++ {
			s.done.set(off)
		}
		s.pos = start // advance stops at pos: move it first
		s.advance()
	}
	return ErrNotReady // read on at the next call
}

// Backlog is the durable records not handed out yet (Backlogger).
func (s *walSource) Backlog() int64 {
	if s.closed {
		return 0
	}
	return int64(s.log.End() - s.pos)
}

// Replay reads the record at offset id again. It must have been handed out
// and not be Done.
func (s *walSource) Replay(id uint64) (string, error) {
	if s.closed {
		return "", fmt.Errorf("source: wal %s: %w", s.name, os.ErrClosed)
	}
	if id < s.low || id >= s.pos || s.done.has(id) {
		return "", fmt.Errorf("source: wal %s: offset %d was never handed out or is done: %w", s.name, id, ErrUnknownRoot)
	}
	recs, err := s.log.Read(id, 1)
	if err == nil && len(recs) == 0 {
		err = wal.ErrOutOfRange
	}
	if err != nil {
		return "", fmt.Errorf("source: wal %s: replay of offset %d: %w", s.name, id, err)
	}
	return string(recs[0].Payload), nil
}

// Done marks offset id finished; the committed prefix grows over it once
// every offset before it is finished too.
func (s *walSource) Done(id uint64) {
	if s.closed || id < s.low || id >= s.pos {
		return // a duplicate, or unknown
	}
	s.done.set(id)
	s.advance()
	s.maybeCommit()
}

// advance moves low over the Done offsets at its front.
func (s *walSource) advance() {
	for s.low < s.pos && s.done.has(s.low) {
		s.done.clear(s.low)
		s.low++
	}
}

// maybeCommit commits low if it moved and CommitEvery has passed. A failed
// commit is tried again at the next interval; Close reports it if the last
// one fails too.
func (s *walSource) maybeCommit() {
	if s.low == s.committed {
		return
	}
	if now := s.cfg.Now(); now.Sub(s.lastTry) >= s.cfg.CommitEvery {
		s.lastTry = now
		s.commit()
	}
}

func (s *walSource) commit() {
	if err := s.log.Commit(s.cfg.Reader, s.low); err != nil {
		s.commitErr = fmt.Errorf("source: wal %s: committing offset %d: %w", s.name, s.low, err)
		return
	}
	s.committed, s.commitErr = s.low, nil
}

// Total is -1: a log has no end.
func (s *walSource) Total() int64 { return -1 }

// Close commits the finished prefix; it does not close the log. Records
// handed out and not Done are read again by the next source of the reader.
// Calling it again does nothing.
func (s *walSource) Close() error {
	if s.closed {
		return nil
	}
	if s.low != s.committed {
		s.commit()
	}
	s.closed = true
	s.buf = nil
	return s.commitErr
}

// windowBitmap is a ring of bits for the offsets [low, low+size): bit
// off%size stands for offset off.
type windowBitmap struct {
	words []uint64
}

// newWindowBitmap returns a bitmap of n bits, n a multiple of 64.
func newWindowBitmap(n int) windowBitmap { return windowBitmap{words: make([]uint64, n/64)} }

func (b windowBitmap) size() int { return len(b.words) * 64 }

func (b windowBitmap) bit(off uint64) (int, uint64) {
	i := off % uint64(b.size())
	return int(i / 64), 1 << (i % 64)
}

func (b windowBitmap) set(off uint64) {
	w, m := b.bit(off)
	b.words[w] |= m
}

func (b windowBitmap) clear(off uint64) {
	w, m := b.bit(off)
	b.words[w] &^= m
}

func (b windowBitmap) has(off uint64) bool {
	w, m := b.bit(off)
	return b.words[w]&m != 0
}
