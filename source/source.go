// Package source provides where root tuples come from: a file (one line is one
// root), standard input and a seeded generator of Zipf-distributed words.
//
// A Source is driven by one spout task actor and is never used from two
// goroutines at once. Next must not block for long: a source that waits on
// the outside world (stdin) reads in its own goroutine and answers
// ErrNotReady while nothing has arrived, so the spout can keep serving acks.
package source

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrNotReady means no root is available right now; ask again later.
var ErrNotReady = errors.New("source: no root ready")

// ErrReleased is wrapped by the error Replay returns for a root its source
// gave up, knowing that the broker hands it out again elsewhere: a Kafka
// partition revoked from this consumer is re-read by its new owner from the
// committed offset. The spout forgets such a root without a dead letter.
var ErrReleased = errors.New("root released to the broker")

// Root is one root tuple as a source hands it out. ID identifies the root
// within its source (a file offset, a sequence number) and is what Replay and
// Done take; it stays the same across replays. Time is the root's event time
// in unix nanoseconds when the source knows one (a record's timestamp); 0
// lets the spout stamp the time it first read the root (ingestion time).
// Attempt is how often the root was delivered before: 0 for a first delivery,
// more when a Redeliverer's broker hands a failed root out again.
type Root struct {
	ID      uint64
	Payload string
	Time    int64
	Attempt int32
}

// BadRecord is the error Next returns for a record that cannot become a root
// (an undecodable payload). The spout hands it to the dead-letter sink with
// its reason and calls Done(ID); the source keeps going.
type BadRecord struct {
	ID      uint64
	Payload string
	Reason  string
}

func (e *BadRecord) Error() string {
	return fmt.Sprintf("source: bad record %d: %s", e.ID, e.Reason)
}

// GlobalIDs is a Source whose root ids are unique across all the tasks of
// its Factory, as a broker's are (a partition and offset, a stream
// sequence), and whose broker may hand a root to any of them: a
// redelivery, a partition moved to another consumer. Content ids (for
// exactly-once counting) then derive from the spout component instead of
// the task, so a root read by two tasks is still one root. A source
// without it may number each task's roots from 0.
type GlobalIDs interface {
	GlobalIDs()
}

// Redeliverer is a Source whose broker redelivers failed roots itself (a
// JetStream Nak with a backoff) instead of the spout re-emitting them from
// Replay. Redeliver is told the attempt that failed (0 for the first); the
// root comes back through Next with a higher Root.Attempt, and Next must not
// answer io.EOF while it is still to come. A spout whose source had answered
// io.EOF asks Next again after a Redeliver.
type Redeliverer interface {
	Redeliver(id uint64, attempt int32) error
}

// Source yields root tuples for one spout task.
type Source interface {
	// Next returns the next root, io.EOF once the source is exhausted, or
	// ErrNotReady when nothing is available yet.
	Next() (Root, error)
	// Replay returns the payload of a root handed out earlier, to emit it
	// again after a failure. A file source re-reads the line at its offset.
	Replay(id uint64) (string, error)
	// Done tells the source that a root finished (or was dead-lettered) and
	// will not be replayed; sources that keep payloads may forget it.
	Done(id uint64)
	// Total is the number of roots this source will yield, or -1 if unknown;
	// for Splits, the roots in its task's share of the splits, so that the
	// tasks' Totals add up whoever reads which split.
	Total() int64
	// Close releases files and goroutines.
	Close() error
}

// Seeker is a Source that can say where it is and go back there when it is
// opened again elsewhere: its spout task can then move to another cluster
// member (a join, a graceful leave) without reading anything twice.
type Seeker interface {
	// Position is where the next root will be read from.
	Position() uint64
	// Seek makes Next continue at a position Position returned, on a source
	// of the same task opened afresh.
	Seek(pos uint64) error
}

// Splits is a Source whose input is cut into more splits than there are
// tasks, as a file is. Left alone, task i of n reads its share of them;
// after Share it reads split i and then only the splits Grant hands it, so
// that a run can give each remaining split to the task that asks first: a
// task on a less loaded member reads more, and the tasks end together
// (Hadoop's and Flink's split assignment). A Factory's sources are all
// Splits or none: a task reading its own share would read splits granted
// to the others.
type Splits interface {
	// Position and Seek are the source's within the split it reads; a
	// sharing source resumes with SeekSplit.
	Seeker
	// Share makes the source read only granted splits after its first.
	// Call it before the first Next.
	Share()
	// Wants says whether the source, sharing, holds no split beyond the
	// one it reads and may still be granted one, and last is the newest
	// split it holds: a grant for it is the next after last.
	Wants() (last int, ok bool)
	// Grant hands the source split k, or none (k < 0), in answer to a
	// request after last: Next then says io.EOF after the splits it holds.
	// A grant that answers another last (a stale or repeated one), or that
	// the source does not want, changes nothing.
	Grant(last, k int)
	// NumSplits is how many splits the input has, at least its tasks.
	NumSplits() int
	// Held is the split being read and the one granted after it, -1 if
	// none: with Position, what SeekSplit resumes from.
	Held() (split, reserve int)
	// SeekSplit makes a sharing source, opened afresh, read split from
	// pos and then reserve (unless -1).
	SeekSplit(split, reserve int, pos uint64) error
}

// Backlogger is a Source that knows how many records wait for it at its
// broker or log, not yet handed out: the queue in front of its spout task,
// which the queueing model reports as the source stage.
type Backlogger interface {
	Backlog() int64
}

// Factory opens the source of spout task `task` out of `tasks` parallel tasks.
type Factory func(task, tasks int) (Source, error)

// ErrNotUTF8 is the reason DecodeUTF8 gives.
var ErrNotUTF8 = errors.New("payload is not valid UTF-8")

// DecodeUTF8 is the connectors' default decoder of a record: its bytes as
// they are, if they are valid UTF-8.
func DecodeUTF8(data []byte) (string, error) {
	if !utf8.Valid(data) {
		return "", ErrNotUTF8
	}
	return string(data), nil
}

// notUTF8 is the BadRecord of a line that is not valid UTF-8 (a binary
// file, another encoding): tuple values are strings, which the wire
// requires to be UTF-8. Its payload is the line's first BadLinePrefixBytes
// with each run of invalid bytes as U+FFFD.
func notUTF8(id uint64, line []byte, where string) *BadRecord {
	prefix := line[:min(len(line), BadLinePrefixBytes)]
	return &BadRecord{ID: id, Payload: strings.ToValidUTF8(string(prefix), "\uFFFD"), Reason: where + " is not valid UTF-8"}
}
