package tracker

import "math/bits"

// pendingSet holds a spout task's roots in flight by springId. A task's
// roots take one block of its sequence each (NextSpringID), in order, and
// mostly finish in about the order they went out, so a ring indexed by the
// springId's block finds almost every root in one probe with no hashing;
// a root still in flight when its slot comes round again (a straggler, or
// more in flight than the ring holds) moves to a map. Not safe for concurrent use (a spout task is one actor).
type pendingSet struct {
	ring  []pendingSlot
	mask  uint64
	spill map[uint64]PendingRoot
	n     int
}

type pendingSlot struct {
	springID uint64
	used     bool
	p        PendingRoot
}

// maxPendingRing bounds the ring: 64 Ki slots, 3 MiB.
const maxPendingRing = 1 << 16

// newPendingSet makes a set for about inFlight roots in flight.
func newPendingSet(inFlight int) *pendingSet {
	size := min(1<<bits.Len(uint(max(2*inFlight-1, 1))), maxPendingRing)
	return &pendingSet{ring: make([]pendingSlot, size), mask: uint64(size - 1), spill: map[uint64]PendingRoot{}}
}

// len is the roots in the set; a nil set (a task not yet started) is empty
// for len, take, each and takeExpired.
func (s *pendingSet) len() int {
	if s == nil {
		return 0
	}
	return s.n
}

// put adds or replaces the root of springID.
func (s *pendingSet) put(springID uint64, p PendingRoot) {
	slot := &s.ring[springID>>nearBits&s.mask]
	if slot.used && slot.springID == springID {
		slot.p = p
		return
	}
	if len(s.spill) > 0 {
		if _, ok := s.spill[springID]; ok { // a spilled root stays spilled
			s.spill[springID] = p
			return
		}
	}
	if slot.used { // a straggler: it moves to the map
		s.spill[slot.springID] = slot.p
	}
	*slot = pendingSlot{springID: springID, used: true, p: p}
	s.n++
}

// take removes and returns the root of springID.
func (s *pendingSet) take(springID uint64) (PendingRoot, bool) {
	if s == nil {
		return PendingRoot{}, false
	}
	slot := &s.ring[springID>>nearBits&s.mask]
	if slot.used && slot.springID == springID {
		p := slot.p
		*slot = pendingSlot{}
		s.n--
		return p, true
	}
	p, ok := s.spill[springID]
	if ok {
		delete(s.spill, springID)
		s.n--
	}
	return p, ok
}

// each calls f with every root; f must not change the set.
func (s *pendingSet) each(f func(springID uint64, p PendingRoot)) {
	if s == nil {
		return
	}
	for i := range s.ring {
		if sl := &s.ring[i]; sl.used {
			f(sl.springID, sl.p)
		}
	}
	for id, p := range s.spill {
		f(id, p)
	}
}

// takeExpired removes the roots whose deadline is before now and appends
// them (springId order is not kept) to out.
func (s *pendingSet) takeExpired(now int64, out []PendingRoot) []PendingRoot {
	if s == nil {
		return out
	}
	for i := range s.ring {
		if sl := &s.ring[i]; sl.used && now > sl.p.Deadline {
			out = append(out, sl.p)
			*sl = pendingSlot{}
			s.n--
		}
	}
	for id, p := range s.spill {
		if now > p.Deadline {
			out = append(out, p)
			delete(s.spill, id)
			s.n--
		}
	}
	return out
}
