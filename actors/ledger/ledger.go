// Package ledger is the acker's pure core: one compact record per root tuple
// in flight, (springId, task, checkValue), into which every tuple id is folded
// with XOR. A record completes when the spout's init has been seen and its
// checkValue is back to zero (seed 000, §3.3).
//
// The ledger owns no goroutine, clock or I/O. Time enters only through
// Rotate, which the acker calls every timeout/(Generations-1): records live in
// generations, as in Storm's RotatingMap, and what falls off the oldest one has
// timed out.
//
// Records sit in one Robin Hood open-addressing table of 20-byte slots kept at
// most 7/8 full, so a record costs at most ~23 bytes with the table's slack
// included; a Go map of the same record spends ~39.
package ledger

import (
	"fmt"
	"math/bits"
)

// MaxTask is the largest task id a record can hold (24 bits).
const MaxTask = 1<<24 - 1

// MaxGenerations is the most timeout generations a ledger can keep.
const MaxGenerations = 32

// Config sizes a ledger.
type Config struct {
	// Generations is how many rotations a record survives before it times
	// out, plus one: a record expires between (Generations-1) and
	// Generations rotation intervals after it was opened. 2..MaxGenerations.
	Generations int
	// ExpectedInFlight pre-sizes the table so that this many records fit
	// without growing (growing allocates and rehashes once).
	ExpectedInFlight int
	// MaxInFlight bounds the records kept (0: no bound). When the ledger is
	// full an init is Rejected and an ack or fail for an unknown springId is
	// dropped (counted): those roots time out at their spout and replay, and
	// stray acks cannot grow the table without limit.
	MaxInFlight int
}

// Validate reports a configuration error naming the field.
func (c Config) Validate() error {
	if c.Generations < 2 || c.Generations > MaxGenerations {
		return fmt.Errorf("ledger: Generations = %d, want 2..%d", c.Generations, MaxGenerations)
	}
	if c.ExpectedInFlight < 0 {
		return fmt.Errorf("ledger: ExpectedInFlight = %d, want >= 0", c.ExpectedInFlight)
	}
	if c.MaxInFlight < 0 {
		return fmt.Errorf("ledger: MaxInFlight = %d, want >= 0", c.MaxInFlight)
	}
	return nil
}

// Status is what an Init or Ack did to a record.
type Status uint8

const (
	// Pending: the record is still open.
	Pending Status = iota
	// Completed: init seen and checkValue is 0; the record was removed and
	// Task must be told.
	Completed
	// Failed: the root was failed before its init arrived; the record was
	// removed and Task must be told.
	Failed
	// Rejected: the call was invalid (task above MaxTask, or a second init
	// for the same springId) and changed nothing.
	Rejected
)

func (s Status) String() string {
	switch s {
	case Pending:
		return "pending"
	case Completed:
		return "completed"
	case Failed:
		return "failed"
	case Rejected:
		return "rejected"
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Outcome tells Pending, or Completed/Failed with the task to notify. An
// Adopt that leaves the record Pending names the record's task too, once its
// init has been seen: the record's timeout started over for that task.
type Outcome struct {
	Status Status
	Task   uint32
}

// Stats counts what the ledger has seen since it was made.
type Stats struct {
	Inits, Acks, Fails uint64
	Completed, Failed  uint64 // roots reported completed / failed (explicit fail)
	Expired            uint64 // roots that timed out after their init
	Orphaned           uint64 // records that timed out without an init: late or stray acks
	Rejected           uint64 // inits refused (task too large, duplicate, or the ledger full) and adopted records refused (task too large)
	Dropped            uint64 // acks and fails for unknown roots refused: the ledger was full
	HandedOver         uint64 // records extracted for another ledger
	Adopted            uint64 // records taken over from another ledger
	PeakInFlight       int
	Rotations, Resizes uint64
}

// meta layout: task in bits 0..23, generation in 24..28, then three flags.
const (
	taskMask  = MaxTask
	genShift  = 24
	genMask   = MaxGenerations - 1
	flagFail  = 1 << 29 // failed before its init: the init will report Failed
	flagInit  = 1 << 30
	flagUsed  = 1 << 31
	maxLoadNu = 7 // max load factor 7/8
	maxLoadDe = 8
	minCap    = 16
)

// slot is 20 bytes: uint32 fields keep Go from padding it to 24.
type slot struct {
	keyLo, keyHi uint32
	chkLo, chkHi uint32
	meta         uint32
}

func (s *slot) key() uint64       { return uint64(s.keyHi)<<32 | uint64(s.keyLo) }
func (s *slot) check() uint64     { return uint64(s.chkHi)<<32 | uint64(s.chkLo) }
func (s *slot) setKey(k uint64)   { s.keyLo, s.keyHi = uint32(k), uint32(k>>32) }
func (s *slot) setCheck(c uint64) { s.chkLo, s.chkHi = uint32(c), uint32(c>>32) }
func (s *slot) gen() uint32       { return s.meta >> genShift & genMask }
func (s *slot) task() uint32      { return s.meta & taskMask }
func (s *slot) has(f uint32) bool { return s.meta&f != 0 }
func (s *slot) setGen(g uint32)   { s.meta = s.meta&^(genMask<<genShift) | g<<genShift }
func (s *slot) setTask(t uint32)  { s.meta = s.meta&^taskMask | t }

// Ledger is the acker's table of records in flight. Not safe for concurrent
// use: one acker actor owns it.
type Ledger struct {
	slots  []slot
	n      int
	limit  int    // MaxInFlight, 0 for none
	gens   uint32 // Generations
	cur    uint32 // generation stamped on new records, counts mod MaxGenerations
	perGen [MaxGenerations]int
	stats  Stats
}

// New makes a ledger. An invalid Config is clamped to the nearest valid one;
// call Config.Validate first to report it.
func New(cfg Config) *Ledger {
	g := min(max(cfg.Generations, 2), MaxGenerations)
	want := max(cfg.ExpectedInFlight, 0)
	return &Ledger{slots: make([]slot, capFor(want)), gens: uint32(g), limit: max(cfg.MaxInFlight, 0)}
}

// capFor is the smallest table holding n records under the max load.
func capFor(n int) int {
	return max(minCap, (n*maxLoadDe+maxLoadNu-1)/maxLoadNu+1)
}

// full says whether a new record would pass MaxInFlight.
func (l *Ledger) full() bool { return l.limit > 0 && l.n >= l.limit }

// Len is the number of records in flight, orphans and fail markers included.
func (l *Ledger) Len() int { return l.n }

// Stats returns the counters.
func (l *Ledger) Stats() Stats { return l.stats }

// SetMaxInFlight changes the bound of Config.MaxInFlight (0: none), e.g.
// when the acker's share of the roots changes. Records beyond a lowered
// bound stay; only new ones are refused.
func (l *Ledger) SetMaxInFlight(n int) { l.limit = max(n, 0) }

// Bytes is the heap the table occupies.
func (l *Ledger) Bytes() int { return len(l.slots) * 20 }

// Init opens the record of springId for task with the XOR of the ids of the
// tuples the spout emitted. Acks that arrived earlier are already folded in.
func (l *Ledger) Init(springID uint64, task uint32, initXor uint64) Outcome {
	if task > MaxTask {
		l.stats.Rejected++
		return Outcome{Status: Rejected}
	}
	i, found := l.find(springID)
	if (found && l.slots[i].has(flagInit)) || (!found && initXor != 0 && l.full()) {
		l.stats.Rejected++
		return Outcome{Status: Rejected}
	}
	l.stats.Inits++
	if !found {
		if initXor == 0 { // a root that emitted nothing is done at once
			l.stats.Completed++
			return Outcome{Status: Completed, Task: task}
		}
		s := l.insert(springID)
		s.setCheck(initXor)
		s.meta |= flagInit | task
		return Outcome{Status: Pending}
	}
	s := &l.slots[i]
	if s.has(flagFail) {
		l.removeAt(i)
		l.stats.Failed++
		return Outcome{Status: Failed, Task: task}
	}
	c := s.check() ^ initXor
	if c == 0 {
		l.removeAt(i)
		l.stats.Completed++
		return Outcome{Status: Completed, Task: task}
	}
	s.setCheck(c)
	s.setTask(task)
	s.meta |= flagInit
	l.restamp(s) // the timeout runs from the init, not from a stray early ack
	return Outcome{Status: Pending}
}

// Ack folds xorDelta into springId's checkValue. An ack for an unknown
// springId opens a record without init: its init may still be on its way.
func (l *Ledger) Ack(springID uint64, xorDelta uint64) Outcome {
	l.stats.Acks++
	i, found := l.find(springID)
	if !found {
		switch {
		case xorDelta == 0:
		case l.full():
			l.stats.Dropped++
		default:
			l.insert(springID).setCheck(xorDelta)
		}
		return Outcome{Status: Pending}
	}
	s := &l.slots[i]
	if s.has(flagFail) {
		return Outcome{Status: Pending}
	}
	c := s.check() ^ xorDelta
	if c == 0 && s.has(flagInit) {
		task := s.task()
		l.removeAt(i)
		l.stats.Completed++
		return Outcome{Status: Completed, Task: task}
	}
	s.setCheck(c)
	return Outcome{Status: Pending}
}

// Fail fails springId now. If its init has been seen the record is removed
// and the task to notify returned; otherwise a marker is kept so that the
// init, when it comes, reports Failed.
func (l *Ledger) Fail(springID uint64) (task uint32, ok bool) {
	l.stats.Fails++
	i, found := l.find(springID)
	if !found {
		if l.full() {
			l.stats.Dropped++
		} else {
			l.insert(springID).meta |= flagFail
		}
		return 0, false
	}
	s := &l.slots[i]
	if !s.has(flagInit) {
		s.meta |= flagFail
		return 0, false
	}
	task = s.task()
	l.removeAt(i)
	l.stats.Failed++
	return task, true
}

// Rotate ages every record by one generation. Records of the oldest
// generation are removed; expired is called for each of them whose init had
// been seen (the others were stray acks or fail markers and are counted as
// orphaned). When the oldest generation is empty this is O(1); otherwise the
// table is scanned until its last record is found.
func (l *Ledger) Rotate(expired func(springID uint64, task uint32)) {
	l.stats.Rotations++
	old := (l.cur + MaxGenerations - (l.gens - 1)) & genMask
	for i := 0; l.perGen[old] > 0 && i < len(l.slots); {
		s := &l.slots[i]
		if !s.has(flagUsed) || s.gen() != old {
			i++
			continue
		}
		key, task, inited := s.key(), s.task(), s.has(flagInit)
		l.removeAt(i) // shifts the next record into i: look at i again
		if inited {
			l.stats.Expired++
			if expired != nil {
				expired(key, task)
			}
		} else {
			l.stats.Orphaned++
		}
	}
	l.cur = (l.cur + 1) & genMask
}

// Range calls f for every record with its init seen, in table order, until
// f returns false. For handing records over; it must not modify the ledger.
func (l *Ledger) Range(f func(springID uint64, task uint32, checkValue uint64) bool) {
	for i := range l.slots {
		s := &l.slots[i]
		if s.has(flagUsed) && s.has(flagInit) && !f(s.key(), s.task(), s.check()) {
			return
		}
	}
}

// Record is a record in flight as Extract hands it to another ledger.
type Record struct {
	SpringID   uint64
	CheckValue uint64 // the XOR folded so far: init and acks
	Task       uint32 // the spout task, once the init is seen
	Init       bool   // the spout's init has been seen
	Failed     bool   // failed before its init: the init must report Failed
}

// Extract removes every record whose springId move reports true, in table
// order, and appends it to dst: for handing records over to the acker that
// now owns them (Adopt there). It scans the table, like a rotation.
func (l *Ledger) Extract(move func(springID uint64) bool, dst []Record) []Record {
	for i := 0; i < len(l.slots); {
		s := &l.slots[i]
		if !s.has(flagUsed) || !move(s.key()) {
			i++
			continue
		}
		dst = append(dst, Record{SpringID: s.key(), CheckValue: s.check(), Task: s.task(),
			Init: s.has(flagInit), Failed: s.has(flagFail)})
		l.stats.HandedOver++
		l.removeAt(i) // shifts the next record into i: look at i again
	}
	return dst
}

// Adopt takes over a record another ledger extracted, folding it into what
// this ledger holds for the root (acks that reached it first) as the init,
// acks and fail it stands for would have. The record's timeout starts over.
// It is never refused for want of room: a handover must not lose roots. A
// record whose Task is above MaxTask was never extracted by a ledger: it is
// Rejected (counted) and changes nothing.
func (l *Ledger) Adopt(r Record) Outcome {
	if r.Task > MaxTask {
		l.stats.Rejected++
		return Outcome{Status: Rejected}
	}
	l.stats.Adopted++
	i, found := l.find(r.SpringID)
	if !found {
		if !r.Init && !r.Failed && r.CheckValue == 0 {
			return Outcome{Status: Pending}
		}
		s := l.insert(r.SpringID)
		s.setCheck(r.CheckValue)
		switch {
		case r.Init:
			s.meta |= flagInit | r.Task
			return Outcome{Status: Pending, Task: r.Task}
		case r.Failed:
			s.meta |= flagFail
		}
		return Outcome{Status: Pending}
	}
	s := &l.slots[i]
	switch {
	case (r.Failed && s.has(flagInit)) || (r.Init && s.has(flagFail)):
		task := s.task() // the task of whichever of the two had the init
		if r.Init {
			task = r.Task
		}
		l.removeAt(i)
		l.stats.Failed++
		return Outcome{Status: Failed, Task: task}
	case r.Failed:
		s.meta |= flagFail
		return Outcome{Status: Pending}
	}
	c := s.check() ^ r.CheckValue
	if r.Init {
		s.setTask(r.Task)
		s.meta |= flagInit
	}
	if c == 0 && s.has(flagInit) {
		task := s.task()
		l.removeAt(i)
		l.stats.Completed++
		return Outcome{Status: Completed, Task: task}
	}
	s.setCheck(c)
	l.restamp(s)
	if s.has(flagInit) {
		return Outcome{Status: Pending, Task: s.task()}
	}
	return Outcome{Status: Pending}
}

// mix is splitmix64's finalizer: springIds are often sequential.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// home maps a key onto [0, len(slots)) without a modulo (Lemire's fastrange).
func (l *Ledger) home(key uint64) int {
	hi, _ := bits.Mul64(mix(key), uint64(len(l.slots)))
	return int(hi)
}

// dist is how far slot i is from home h, walking forward with wrap-around.
func (l *Ledger) dist(i, h int) int {
	if d := i - h; d >= 0 {
		return d
	}
	return i - h + len(l.slots)
}

// find returns the index of key's slot, or found=false.
func (l *Ledger) find(key uint64) (int, bool) {
	n := len(l.slots)
	i := l.home(key)
	for d := 0; ; d++ {
		s := &l.slots[i]
		if !s.has(flagUsed) {
			return i, false
		}
		k := s.key()
		if k == key {
			return i, true
		}
		if l.dist(i, l.home(k)) < d { // Robin Hood: key would have been placed here
			return i, false
		}
		if i++; i == n {
			i = 0
		}
	}
}

// insert places a fresh record for key (known to be absent) in the current
// generation and returns its slot.
func (l *Ledger) insert(key uint64) *slot {
	if (l.n+1)*maxLoadDe > len(l.slots)*maxLoadNu {
		l.grow()
	}
	l.n++
	l.perGen[l.cur]++
	l.stats.PeakInFlight = max(l.stats.PeakInFlight, l.n)
	s := slot{meta: flagUsed | l.cur<<genShift}
	s.setKey(key)
	return &l.slots[l.place(s)]
}

// place puts a record into the table, Robin Hood style, and returns the index
// where it landed. Records it displaces move further on.
func (l *Ledger) place(cur slot) int {
	n := len(l.slots)
	i, d, at := l.home(cur.key()), 0, -1
	for {
		s := &l.slots[i]
		if !s.has(flagUsed) {
			*s = cur
			if at < 0 {
				at = i
			}
			return at
		}
		if sd := l.dist(i, l.home(s.key())); sd < d {
			*s, cur = cur, *s // take from the rich, carry the displaced one on
			if at < 0 {
				at = i
			}
			d = sd
		}
		d++
		if i++; i == n {
			i = 0
		}
	}
}

// removeAt deletes slot i by shifting the following run back one place.
func (l *Ledger) removeAt(i int) {
	l.n--
	l.perGen[l.slots[i].gen()]--
	n := len(l.slots)
	for {
		j := i + 1
		if j == n {
			j = 0
		}
		s := &l.slots[j]
		if !s.has(flagUsed) || l.dist(j, l.home(s.key())) == 0 {
			l.slots[i] = slot{}
			return
		}
		l.slots[i] = *s
		i = j
	}
}

// restamp moves a record into the current generation.
func (l *Ledger) restamp(s *slot) {
	l.perGen[s.gen()]--
	s.setGen(l.cur)
	l.perGen[l.cur]++
}

// grow rehashes into a table half as large again.
func (l *Ledger) grow() {
	old := l.slots
	l.slots = make([]slot, max(minCap, len(old)+len(old)/2))
	l.stats.Resizes++
	for i := range old {
		if old[i].has(flagUsed) {
			l.place(old[i])
		}
	}
}
