// Package ledger is the acker's pure core: one compact record per root tuple
// in flight, (springId, task, checkValue), into which every tuple id is folded
// with XOR. A record completes when the spout's init has been seen and its
// checkValue is back to zero (the tracking paper, §3.3).
//
// The ledger owns no goroutine, clock or I/O. Time enters only through
// Rotate, which the acker calls every timeout/(Generations-1): records live in
// generations, as in Storm's RotatingMap, and what falls off the oldest one has
// timed out.
//
// Records sit in one open-addressing table of 20-byte slots kept at most 7/8
// full, so a record costs at most ~23 bytes with the table's slack included;
// a Go map of the same record spends ~39. A slot keeps a bijective hash of
// its springId instead of the springId, and the table is kept sorted by it
// (linear probing in Robin Hood order, Amble and Knuth's ordered hash table):
// a lookup compares stored hashes and stops at the first that is not lower,
// without hashing anything but the key it looks for.
package ledger

import (
	"fmt"
	"math/bits"

	"github.com/acktor/acktor/internal/assert"
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

	prefetchSlots = 1 << 15 // 640 KiB of slots: below, AckBatch does not prefetch
	ahead         = 32      // entries whose home slots AckBatch reads together
)

// slot is 20 bytes: uint32 fields keep Go from padding it to 24.
type slot struct {
	hLo, hHi     uint32 // mix(springId)
	chkLo, chkHi uint32
	meta         uint32
}

func (s *slot) hash() uint64      { return uint64(s.hHi)<<32 | uint64(s.hLo) }
func (s *slot) key() uint64       { return unmix(s.hash()) }
func (s *slot) check() uint64     { return uint64(s.chkHi)<<32 | uint64(s.chkLo) }
func (s *slot) setHash(h uint64)  { s.hLo, s.hHi = uint32(h), uint32(h>>32) }
func (s *slot) setCheck(c uint64) { s.chkLo, s.chkHi = uint32(c), uint32(c>>32) }
func (s *slot) gen() uint32       { return s.meta >> genShift & genMask }
func (s *slot) task() uint32      { return s.meta & taskMask }
func (s *slot) has(f uint32) bool { return s.meta&f != 0 }
func (s *slot) setGen(g uint32)   { s.meta = s.meta&^(genMask<<genShift) | g<<genShift }
func (s *slot) setTask(t uint32)  { s.meta = s.meta&^taskMask | t }

// Ledger is the acker's table of records in flight. Not safe for concurrent
// use: one acker actor owns it.
type Ledger struct {
	// slots is homes slots that records hash to, then an overflow that the
	// runs of the last homes spill into; its last slot is always free.
	slots  []slot
	homes  int
	n      int
	limit  int    // MaxInFlight, 0 for none
	gens   uint32 // Generations
	cur    uint32 // generation stamped on new records, counts mod MaxGenerations
	perGen [MaxGenerations]int
	stats  Stats

	touched uint32 // what prefetch read, kept so that the read is not dropped
}

// New makes a ledger. An invalid Config is clamped to the nearest valid one;
// call Config.Validate first to report it.
func New(cfg Config) *Ledger {
	g := min(max(cfg.Generations, 2), MaxGenerations)
	homes := homesFor(max(cfg.ExpectedInFlight, 0))
	return &Ledger{slots: make([]slot, homes+overflow(homes)), homes: homes, gens: uint32(g), limit: max(cfg.MaxInFlight, 0)}
}

// homesFor is the fewest homes that hold n records under the max load.
func homesFor(n int) int {
	return max(minCap, (n*maxLoadDe+maxLoadNu-1)/maxLoadNu+1)
}

// overflow is how many slots follow the homes (more are added if a run
// reaches the last one): at 7/8 load the run that crosses the last home is
// some tens of slots long, rarely more than a few hundred.
func overflow(homes int) int { return 32 + homes>>10 }

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
func (l *Ledger) Bytes() int { return cap(l.slots) * 20 }

// Init opens the record of springId for task with the XOR of the ids of the
// tuples the spout emitted. Acks that arrived earlier are already folded in.
func (l *Ledger) Init(springID uint64, task uint32, initXor uint64) Outcome {
	if task > MaxTask {
		l.stats.Rejected++
		return Outcome{Status: Rejected}
	}
	h := mix(springID)
	i, found := l.find(h)
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
		s := l.insert(h, i)
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
	h := mix(springID)
	i, found := l.find(h)
	if !found {
		switch {
		case xorDelta == 0:
		case l.full():
			l.stats.Dropped++
		default:
			l.insert(h, i).setCheck(xorDelta)
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
	h := mix(springID)
	i, found := l.find(h)
	if !found {
		if l.full() {
			l.stats.Dropped++
		} else {
			l.insert(h, i).meta |= flagFail
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
	assert.That(l.perGen[old] == 0, "ledger: a rotation left records of the oldest generation")
	sum := 0
	for _, n := range l.perGen {
		sum += n
	}
	assert.That(sum == l.n, "ledger: the generations do not count every record")
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
	h := mix(r.SpringID)
	i, found := l.find(h)
	if !found {
		if !r.Init && !r.Failed && r.CheckValue == 0 {
			return Outcome{Status: Pending}
		}
		s := l.insert(h, i)
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

// mix is MurmurHash3's 64-bit finalizer (Appleby), a bijection of 64 bits.
// The table keeps mix(springId) in place of the springId. It must not be the
// ring's hash: the ring hands an acker the springIds whose splitmix64 lies on
// its arcs, and a table homed by the same bits would crowd that acker's whole
// share into the same slices of slots (probe runs, and so inserts, growing
// with every record: quadratic). TestRingShareSpreads holds the two apart.
func mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	return x ^ x>>33
}

// unmix inverts mix: the springId of a stored hash, for Rotate, Range and
// Extract. (x ^= x>>33 is its own inverse; the constants are the modular
// inverses of mix's.)
func unmix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0x9cb4b2f8129337db
	x ^= x >> 33
	x *= 0x4f74430c22a54005
	return x ^ x>>33
}

// home maps a hash onto [0, homes) without a modulo (Lemire's fastrange).
// It never decreases as h grows, which keeps the table sorted by hash.
func (l *Ledger) home(h uint64) int {
	hi, _ := bits.Mul64(h, uint64(l.homes))
	return int(hi)
}

// find returns the index of the record whose hash is h, or, with
// found=false, the index where it belongs. The table is sorted by hash, so a
// walk from h's home stops at the first hash not below h; the last slot is
// always free, so the walk stops within the table.
func (l *Ledger) find(h uint64) (int, bool) {
	for i := l.home(h); ; i++ {
		s := &l.slots[i]
		if !s.has(flagUsed) {
			return i, false
		}
		if k := s.hash(); k >= h {
			return i, k == h
		}
	}
}

// insert places a fresh record whose hash h is absent at i, where find said
// it belongs, in the current generation, and returns its slot. The records
// from i to the next free slot move up one place.
func (l *Ledger) insert(h uint64, i int) *slot {
	if (l.n+1)*maxLoadDe > l.homes*maxLoadNu {
		l.grow()
		i, _ = l.find(h)
	}
	free := i
	for l.slots[free].has(flagUsed) {
		free++
	}
	if free == len(l.slots)-1 { // keep the last slot free
		l.slots = append(l.slots, make([]slot, overflow(l.homes))...)
	}
	assert.That(i <= free && free < len(l.slots)-1, "ledger: no free slot after a record's place")
	copy(l.slots[i+1:free+1], l.slots[i:free])
	l.n++
	l.perGen[l.cur]++
	l.stats.PeakInFlight = max(l.stats.PeakInFlight, l.n)
	s := &l.slots[i]
	*s = slot{meta: flagUsed | l.cur<<genShift}
	s.setHash(h)
	return s
}

// removeAt deletes slot i, moving back one place the records after it that
// sit past their home (backward-shift deletion: no tombstones).
func (l *Ledger) removeAt(i int) {
	assert.That(l.slots[i].has(flagUsed), "ledger: removing a free slot")
	l.n--
	l.perGen[l.slots[i].gen()]--
	assert.That(l.n >= 0 && l.perGen[l.slots[i].gen()] >= 0, "ledger: more records removed than held")
	j := i + 1
	for l.slots[j].has(flagUsed) && l.home(l.slots[j].hash()) < j {
		j++
	}
	copy(l.slots[i:j-1], l.slots[i+1:j])
	l.slots[j-1] = slot{}
}

// restamp moves a record into the current generation.
func (l *Ledger) restamp(s *slot) {
	l.perGen[s.gen()]--
	s.setGen(l.cur)
	l.perGen[l.cur]++
}

// grow rebuilds the table with half as many homes again. The records are
// already in hash order, so each goes to its home or just past the one
// before it: one pass, nothing displaced.
func (l *Ledger) grow() {
	old := l.slots
	l.homes = max(minCap, l.homes+l.homes/2)
	l.slots = make([]slot, l.homes+overflow(l.homes))
	l.stats.Resizes++
	next := 0
	for k := range old {
		if !old[k].has(flagUsed) {
			continue
		}
		i := max(l.home(old[k].hash()), next)
		if i >= len(l.slots)-1 {
			l.slots = append(l.slots, make([]slot, overflow(l.homes))...)
		}
		l.slots[i] = old[k]
		next = i + 1
	}
	assert.That(l.slots[len(l.slots)-1].meta == 0, "ledger: a grown table's last slot is used")
}

// AckBatch folds deltas[i] into the record of springIDs[i] for every i, as
// Ack does, and calls done for each root it completes. It is the acker's
// loop over an AckBatch: at a million records in flight a lookup is mostly
// a cache miss, so it reads the home slots of a group of entries first, in
// a loop of nothing else, and their misses overlap instead of coming one
// after another; then it folds the group. (Reading one entry a few ahead of
// the fold overlapped fewer: a read that misses holds up what comes after
// it once the processor's window of work in flight is full.) A table that
// fits in a core's cache gains nothing from that and is left alone.
// springIDs and deltas must be as long as each other.
func (l *Ledger) AckBatch(springIDs, deltas []uint64, done func(springID uint64, task uint32)) {
	deltas = deltas[:len(springIDs)]
	group, read := len(springIDs), len(l.slots) >= prefetchSlots
	if read {
		group = ahead
	}
	for start := 0; start < len(springIDs); start += group {
		ids := springIDs[start:min(start+group, len(springIDs))]
		if read {
			for _, id := range ids {
				l.prefetch(id)
			}
		}
		for i, id := range ids {
			if o := l.Ack(id, deltas[start+i]); o.Status == Completed {
				done(id, o.Task)
			}
		}
	}
}

// prefetch reads springID's home slot.
func (l *Ledger) prefetch(springID uint64) {
	l.touched += l.slots[l.home(mix(springID))].meta
}
