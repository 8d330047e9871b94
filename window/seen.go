package window

import (
	"errors"
	"time"
)

// ErrSeenFull is returned by Seen.Claim for a new id when the limit of ids
// is remembered.
var ErrSeenFull = errors.New("window: Seen holds its limit of ids")

// Seen remembers the ids of the updates a window applied, per pane, so that
// an update that comes again (a replay) can be dropped: exactly-once within
// the window. A replay keeps its time, so it falls in the pane of the first
// attempt; the ids of a pane are forgotten once the pane leaves the window
// (Expire), which bounds memory by the window, and by a limit.
//
// Ids are non-zero uint64s, kept in open-addressing sets, at most 3/4 full:
// 11 to 21 bytes an id. Not safe for concurrent use.
type Seen struct {
	pane  int64
	limit int
	sets  map[int64]*idSet // by pane number
	n     int
	from  int64 // panes before this one are forgotten
}

// NewSeen makes an empty Seen for panes of width pane that holds at most
// limit ids (limit <= 0: no bound).
func NewSeen(pane time.Duration, limit int) *Seen {
	return &Seen{pane: max(int64(pane), 1), limit: limit, sets: map[int64]*idSet{}}
}

// Claim records id for the pane of time t and says whether it is new; a
// new id past the limit is refused with ErrSeenFull (a known one is still
// reported as known). Id 0 is never remembered: it reports new.
func (s *Seen) Claim(t int64, id uint64) (bool, error) {
	if id == 0 {
		return true, nil
	}
	p := floorDiv(t, s.pane)
	set := s.sets[p]
	if s.limit > 0 && s.n >= s.limit {
		if set.has(id) {
			return false, nil
		}
		return false, ErrSeenFull
	}
	if set == nil {
		set = &idSet{}
		s.sets[p] = set
	}
	if !set.add(id) {
		return false, nil
	}
	s.n++
	return true, nil
}

// Release forgets id in the pane of time t: the update it claimed for was
// not applied after all.
func (s *Seen) Release(t int64, id uint64) {
	if set := s.sets[floorDiv(t, s.pane)]; set != nil && set.remove(id) {
		s.n--
	}
}

// Expire forgets the ids of the panes before the one holding start, the
// window's start.
func (s *Seen) Expire(start int64) {
	from := floorDiv(start, s.pane)
	if from <= s.from {
		return
	}
	s.from = from
	for p, set := range s.sets {
		if p < from {
			s.n -= set.n
			delete(s.sets, p)
		}
	}
}

// Len is the number of ids remembered.
func (s *Seen) Len() int { return s.n }

// idSet is a set of non-zero content ids: open addressing with linear
// probing, at most 3/4 full, 8 bytes a slot.
type idSet struct {
	slots []uint64
	n     int
}

func (s *idSet) has(id uint64) bool {
	if s == nil || len(s.slots) == 0 {
		return false
	}
	mask := uint64(len(s.slots) - 1)
	for i := mix64(id) & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case id:
			return true
		case 0:
			return false
		}
	}
}

// remove takes id out, shifting back the ids after it that probed past its
// slot, so that no tombstones are needed; it says whether id was there.
func (s *idSet) remove(id uint64) bool {
	if len(s.slots) == 0 {
		return false
	}
	mask := uint64(len(s.slots) - 1)
	i := mix64(id) & mask
	for ; s.slots[i] != id; i = (i + 1) & mask {
		if s.slots[i] == 0 {
			return false
		}
	}
	for j := (i + 1) & mask; s.slots[j] != 0; j = (j + 1) & mask {
		// Move slots[j] into the hole at i unless its home lies in (i, j].
		if home := mix64(s.slots[j]) & mask; (j-home)&mask >= (j-i)&mask {
			s.slots[i] = s.slots[j]
			i = j
		}
	}
	s.slots[i] = 0
	s.n--
	return true
}

// add puts id in the set and says whether it was new.
func (s *idSet) add(id uint64) bool {
	if (s.n+1)*4 > len(s.slots)*3 {
		s.grow()
	}
	mask := uint64(len(s.slots) - 1)
	for i := mix64(id) & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case id:
			return false
		case 0:
			s.slots[i] = id
			s.n++
			return true
		}
	}
}

func (s *idSet) grow() {
	old := s.slots
	s.slots = make([]uint64, max(16, 2*len(old)))
	s.n = 0
	for _, id := range old {
		if id != 0 {
			s.add(id)
		}
	}
}

// mix64 is splitmix64's finalizer: ids may be sequential.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
