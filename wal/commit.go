package wal

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"
	"unicode/utf8"
)

// Limits of named readers.
const (
	// MaxReaders is how many named readers a log keeps committed offsets
	// for; Commit of one more is an error (Forget one first).
	MaxReaders = 64
	// MaxReaderName is the longest reader name, in bytes.
	MaxReaderName = 200
)

// commitsFile holds the committed offsets as a JSON object, name to offset.
const commitsFile = "readers.json"

// loadCommits reads the committed offsets (none if the file is missing) and
// removes a temporary file left by a crash during a commit.
func loadCommits(fsys fileSystem, dir string) (map[string]uint64, error) {
	path := filepath.Join(dir, commitsFile)
	_ = fsys.Remove(path + ".tmp")
	b, err := fsys.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]uint64{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	commits := map[string]uint64{}
	if err := json.Unmarshal(b, &commits); err != nil {
		return nil, fmt.Errorf("wal: reading committed offsets from %s: %w", path, err)
	}
	return commits, nil
}

// writeCommits replaces the committed offsets atomically: a temporary file
// written and fsynced, renamed over the old one, the directory fsynced.
func writeCommits(fsys fileSystem, dir string, commits map[string]uint64) error {
	b, err := json.Marshal(commits)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, commitsFile)
	tmp := path + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(b, 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, path)
	}
	if err != nil {
		_ = fsys.Remove(tmp)
		return err
	}
	return fsys.SyncDir(dir)
}

func checkReaderName(reader string) error {
	if reader == "" || len(reader) > MaxReaderName || !utf8.ValidString(reader) {
		return fmt.Errorf("wal: reader name %q: want 1 to %d bytes of UTF-8", reader, MaxReaderName)
	}
	return nil
}

// Commit records durably that reader has finished every record below
// offset (at most End), and deletes the segments that every reader has
// finished. It writes and fsyncs a small file, so batch commits. A commit
// may move a reader back, but segments already deleted stay deleted.
// Committing the offset the reader already has does nothing.
func (l *Log) Commit(reader string, offset uint64) error {
	if err := checkReaderName(reader); err != nil {
		return err
	}
	return l.updateCommits(reader, func(commits map[string]uint64) error {
		if offset > l.durable {
			return fmt.Errorf("wal: commit of reader %q at %d: %w: End is %d", reader, offset, ErrOutOfRange, l.durable)
		}
		cur, ok := commits[reader]
		if ok && cur == offset {
			return errUnchanged
		}
		if !ok && len(commits) >= MaxReaders {
			return fmt.Errorf("wal: commit of reader %q: the log has MaxReaders (%d) readers already", reader, MaxReaders)
		}
		commits[reader] = offset
		return nil
	})
}

// Forget removes a reader's committed offset: it no longer holds segments
// back.
func (l *Log) Forget(reader string) error {
	return l.updateCommits(reader, func(commits map[string]uint64) error {
		if _, ok := commits[reader]; !ok {
			return errUnchanged
		}
		delete(commits, reader)
		return nil
	})
}

var errUnchanged = errors.New("unchanged")

// updateCommits applies change (called under l.mu) to a copy of the
// commits, writes it and installs it.
func (l *Log) updateCommits(reader string, change func(map[string]uint64) error) error {
	l.commitMu.Lock()
	defer l.commitMu.Unlock()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	next := maps.Clone(l.commits)
	err := change(next)
	l.mu.Unlock()
	if errors.Is(err, errUnchanged) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := writeCommits(l.fs, l.dir, next); err != nil {
		return fmt.Errorf("wal: commit of reader %q: %w", reader, mapErr(err))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.commits = next
	l.retain()
	return nil
}

// Committed returns the offset reader committed last, and whether it ever
// did (false, 0 for an unknown reader).
func (l *Log) Committed(reader string) (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	off, ok := l.commits[reader]
	return off, ok
}

// Readers returns the committed offset of every named reader.
func (l *Log) Readers() map[string]uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.commits)
}

// Retain deletes the segments that retention allows (see the package
// documentation). Appends, commits and Open do it too; call it
// periodically for MaxAge on a quiet log.
func (l *Log) Retain() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.retain()
	return nil
}

// retain deletes sealed segments, oldest first, while one of the reasons of
// the package documentation holds. Called under l.mu.
func (l *Log) retain() {
	now := l.opts.Now()
	floor, readers := uint64(0), len(l.commits) > 0
	if readers {
		floor = slices.Min(slices.Collect(maps.Values(l.commits)))
	}
	deleted := 0
	for len(l.segs) > 1 {
		s, end := l.segs[0], l.segs[1].base
		var why string
		switch {
		case readers && end <= floor:
			why = fmt.Sprintf("every reader committed offset %d or later", floor)
		case l.opts.MaxBytes > 0 && l.bytes > l.opts.MaxBytes:
			why = fmt.Sprintf("the log has %d bytes, more than MaxBytes %d", l.bytes, l.opts.MaxBytes)
		case l.opts.MaxAge > 0 && now.Sub(s.lastWrite) > l.opts.MaxAge:
			why = fmt.Sprintf("last written %v ago, more than MaxAge %v", now.Sub(s.lastWrite).Round(time.Millisecond), l.opts.MaxAge)
		}
		if why == "" {
			break
		}
		if err := l.fs.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			l.opts.Logf("wal: deleting segment %s: %v", s.path, err)
			break
		}
		l.segs = slices.Delete(l.segs, 0, 1)
		l.bytes -= s.size
		s.deleted = true
		s.refs++
		l.release(s) // closes the file unless a reader or an fsync has it
		l.stats.Deleted++
		deleted++
		l.opts.Logf("wal: deleted segment %s (offsets %d to %d): %s", s.path, s.base, end-1, why)
	}
	if deleted > 0 {
		if err := l.fs.SyncDir(l.dir); err != nil {
			l.opts.Logf("wal: fsync %s after deleting segments: %v", l.dir, err)
		}
	}
}
