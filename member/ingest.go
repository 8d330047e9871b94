package member

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/acktor/acktor/source"
	"github.com/acktor/acktor/wal"
)

// openIngest opens the ingest log and reports what it found.
func openIngest(c IngestConfig, log *logrus.Logger) (*wal.Log, error) {
	l, err := wal.Open(c.Dir, c.options(log))
	if err != nil {
		return nil, fmt.Errorf("ingest.dir %s: %w", c.Dir, err)
	}
	if rec := l.Recovered(); rec != (wal.Recovery{}) {
		log.WithFields(logrus.Fields{"segment": rec.Segment, "offset": rec.Offset, "byte": rec.Pos,
			"truncated_bytes": rec.TruncatedBytes}).
			Warnf("ingest: truncated a torn tail of %d bytes at offset %d in %s (%v): the end of a write the crash cut short, never acknowledged",
				rec.TruncatedBytes, rec.Offset, rec.Segment, rec.Reason)
	}
	st := l.Stats()
	log.Infof("ingest: log %s: start %d, end %d, %d segment(s), %d bytes, readers %v, sync %s",
		c.Dir, st.Start, st.End, st.Segments, st.Bytes, l.Readers(), c.options(log).Sync)
	return l, nil
}

// resumeAt is the offset the word count's reader starts at in l; it logs
// it.
func resumeAt(l *wal.Log, log logrus.FieldLogger) uint64 {
	from, _ := l.Committed(IngestReader)
	from = min(max(from, l.Start()), l.End())
	log.Infof("ingest: reader %s starts at offset %d; %d record(s) to read up to the end", IngestReader, from, l.End()-from)
	return from
}

// retainEvery calls l.Retain every period until ctx ends, so that
// ingest.retention_age deletes segments of a log that gets no appends.
func retainEvery(ctx context.Context, l *wal.Log, period time.Duration, log logrus.FieldLogger) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := l.Retain(); err != nil {
				log.WithError(err).Warn("ingest: retention")
				return
			}
		}
	}
}

// drainable wraps the sources f opens so that stop ends them: after it,
// Next answers io.EOF, so the spout finishes the roots in flight and the
// run ends; when the last of them is Done the source is closed, which
// commits the offset, before the run returns (the spout closes its source
// only when its actor stops, after Run returned).
func drainable(f source.Factory) (source.Factory, func()) {
	ch := make(chan struct{})
	stop := sync.OnceFunc(func() { close(ch) })
	return func(task, tasks int) (source.Source, error) {
		s, err := f(task, tasks)
		if err != nil {
			return nil, err
		}
		return &drainSource{Source: s, stop: ch, out: map[uint64]struct{}{}}, nil
	}, stop
}

// drainSource is a source of drainable. Like every source it is used by
// one spout task at a time.
type drainSource struct {
	source.Source
	stop    <-chan struct{}
	out     map[uint64]struct{} // handed out, not Done: at most the spout's max pending
	stopped bool
	closed  bool
	err     error // of the Close
}

func (d *drainSource) Next() (source.Root, error) {
	if !d.stopped {
		select {
		case <-d.stop:
			d.stopped = true
		default:
		}
	}
	if d.stopped {
		d.closeIfDrained()
		return source.Root{}, io.EOF
	}
	r, err := d.Source.Next()
	if err == nil {
		d.out[r.ID] = struct{}{}
		return r, nil
	}
	d.badRecord(err)
	return r, err
}

// badRecord keeps a bad record's id out: the spout dead-letters it and
// calls Done. (Apart from Next, whose every root would allocate the
// target errors.As takes.)
func (d *drainSource) badRecord(err error) {
	var bad *source.BadRecord
	if errors.As(err, &bad) {
		d.out[bad.ID] = struct{}{}
	}
}

// Backlog passes the log's backlog on (source.Backlogger): the node's
// stages show the ingest log as the queue in front of the word count.
func (d *drainSource) Backlog() int64 {
	if bl, ok := d.Source.(source.Backlogger); ok && !d.stopped {
		return bl.Backlog()
	}
	return 0
}

func (d *drainSource) Done(id uint64) {
	d.Source.Done(id)
	delete(d.out, id)
	if d.stopped {
		d.closeIfDrained()
	}
}

func (d *drainSource) closeIfDrained() {
	if len(d.out) == 0 && !d.closed {
		d.closed = true
		d.err = d.Source.Close()
	}
}

func (d *drainSource) Close() error {
	if !d.closed {
		d.closed = true
		d.err = d.Source.Close()
	}
	return d.err
}
