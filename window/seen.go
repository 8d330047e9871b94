package window

import (
	"errors"
	"math"
	"time"

	"github.com/acktor/acktor/internal/mix"
)

// ErrSeenFull is returned by Seen.Claim for a new id when the limit of ids
// is remembered.
var ErrSeenFull = errors.New("window: Seen holds its limit of ids")

// Seen remembers the ids of the updates a window applied, each with its
// pane, so that an update that comes again (a replay) can be dropped:
// exactly-once within the window. An id is known whatever the time it
// comes again with: a replay keeps its root's time, but a root read again
// by a spout restarted elsewhere is stamped anew, and is still the same
// update. The ids of a pane are forgotten once the pane leaves the window
// (Expire), which bounds memory by the window, and by a limit.
//
// Ids are non-zero uint64s in one open-addressing table of (id, pane)
// slots, 16 bytes each. An expired id's slot is free to reuse at once, and
// the table is rebuilt from its live ids when live, expired and released
// slots fill 3/4 of it: Expire costs O(panes), not O(ids). 21 to 64 bytes
// an id. Not safe for concurrent use.
type Seen struct {
	pane   int64
	limit  int
	slots  []seenSlot // a power of two long, or nil
	used   int        // slots with an id, live or not
	n      int        // live ids
	counts map[int64]int
	from   int64  // panes before this one are forgotten
	sink   uint64 // Warm's loads, kept so that they are not left out
}

// seenSlot is an id and its pane; id 0 marks a free slot, a pane before
// Seen.from one whose id is forgotten (expired or released).
type seenSlot struct {
	id   uint64
	pane int64
}

// released is the pane of a released id's slot: before every real pane
// (those are clamped to minPane) and Seen.from, so never live.
const (
	released = math.MinInt64
	minPane  = math.MinInt64 + 1
)

// NewSeen makes an empty Seen for panes of width pane that holds at most
// limit ids (limit <= 0: no bound).
func NewSeen(pane time.Duration, limit int) *Seen {
	return &Seen{pane: max(int64(pane), 1), limit: limit, counts: map[int64]int{}, from: minPane}
}

// paneOf is the pane of time t.
func (s *Seen) paneOf(t int64) int64 { return max(floorDiv(t, s.pane), minPane) }

// Claim records id for the pane of time t and says whether it is new; an id
// known from any pane still in the window is not. A new id past the limit
// is refused with ErrSeenFull. Id 0 is never remembered, nor an id for a
// pane already out of the window (the window refuses that update as late):
// both report new.
func (s *Seen) Claim(t int64, id uint64) (bool, error) {
	p := s.paneOf(t)
	if id == 0 || p < s.from {
		return true, nil
	}
	_, found, free := s.find(id)
	switch {
	case found:
		return false, nil
	case s.limit > 0 && s.n >= s.limit:
		return false, ErrSeenFull
	}
	if s.slots[free].id == 0 { // a never used slot, not a forgotten one
		if 4*(s.used+1) > 3*len(s.slots) {
			s.rebuild(0)
			_, _, free = s.find(id)
		}
		s.used++
	}
	s.slots[free] = seenSlot{id: id, pane: p}
	s.counts[p]++
	s.n++
	return true, nil
}

// Warm loads the slots where Claim will look for ids first, so that a
// batch's cache misses overlap instead of stalling Claim one after
// another. It changes nothing.
func (s *Seen) Warm(ids []uint64) {
	if s.slots == nil {
		return
	}
	mask, sink := uint64(len(s.slots)-1), uint64(0)
	for _, id := range ids {
		sink += s.slots[mix.Splitmix64(id)&mask].id
	}
	s.sink += sink
}

// Release forgets id if it was claimed for the pane of time t: the update
// it claimed for was not applied after all.
func (s *Seen) Release(t int64, id uint64) {
	at, found, _ := s.find(id)
	if p := s.paneOf(t); found && s.slots[at].pane == p {
		s.slots[at].pane = released
		s.forget(p, 1)
	}
}

// Expire forgets the ids of the panes before the one holding start, the
// window's start.
func (s *Seen) Expire(start int64) {
	from := s.paneOf(start)
	if from <= s.from {
		return
	}
	s.from = from
	for p, c := range s.counts {
		if p < from {
			s.forget(p, c)
		}
	}
}

// forget takes c live ids of pane p off the counts.
func (s *Seen) forget(p int64, c int) {
	s.n -= c
	if s.counts[p] -= c; s.counts[p] == 0 {
		delete(s.counts, p)
	}
}

// Len is the number of ids remembered.
func (s *Seen) Len() int { return s.n }

// Reserve makes room for n more ids, up to the limit, so that claiming
// them rebuilds the table once, now, and not at each doubling on the way:
// each rebuild is a pass over every id so far, and at millions of ids one
// took 0.4 s alone and over a second on a loaded machine. A counter task
// taking a state of known size reserves it first. Without a limit it
// reserves at most maxReserve.
func (s *Seen) Reserve(n int) {
	if s.limit > 0 {
		n = min(n, s.limit-s.n)
	} else {
		n = min(n, maxReserve)
	}
	if n > 0 && 4*(s.used+n) > 3*len(s.slots) {
		s.rebuild(s.n + n)
	}
}

// find returns id's slot if it is live there, and the first slot on its
// probe sequence where it could go: a forgotten id's or a never used one.
// A table with no never used slot left never happens: it is rebuilt at 3/4.
func (s *Seen) find(id uint64) (at int, found bool, free int) {
	if s.slots == nil {
		s.slots = make([]seenSlot, 16)
	}
	free = -1
	mask := len(s.slots) - 1
	for i := int(mix.Splitmix64(id)) & mask; ; i = (i + 1) & mask {
		switch sl := s.slots[i]; {
		case sl.id == 0:
			if free < 0 {
				free = i
			}
			return i, false, free
		case sl.pane < s.from:
			if free < 0 {
				free = i
			}
		case sl.id == id:
			return i, true, free
		}
	}
}

// maxReserve bounds Reserve for a Seen with no limit (2^24 ids, a table of
// 512 MB): the number may come from a message.
const maxReserve = 1 << 24

// rebuild moves the live ids into a table with room for as many again,
// and for ids in all at 3/4 full.
func (s *Seen) rebuild(ids int) {
	old := s.slots
	size := 16
	for size < 2*(s.n+1) || 3*size < 4*ids {
		size *= 2
	}
	s.slots = make([]seenSlot, size)
	s.used = 0
	mask := size - 1
	for _, sl := range old {
		if sl.id != 0 && sl.pane >= s.from {
			i := int(mix.Splitmix64(sl.id)) & mask
			for s.slots[i].id != 0 {
				i = (i + 1) & mask
			}
			s.slots[i] = sl
			s.used++
		}
	}
}
