package member

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"

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
