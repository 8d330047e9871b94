package tracker

import (
	"fmt"

	"github.com/acktor/acktor/internal/assert"
	"github.com/acktor/acktor/messages"
	"github.com/acktor/acktor/tracker/ledger"
)

// MaxClients bounds the remote clients an acker remembers at once. It
// forgets a client Generations rotations after the client last opened or
// handed over a record there: by then every record of it has settled or
// timed out. Past the bound a new client is refused (counted): its roots
// time out at the client, which replays them.
const MaxClients = 1 << 16

// Logger is where an Acker reports what it refused or dropped. The roots
// concerned are not lost: they time out and replay.
type Logger interface {
	Errorf(format string, args ...any)
	Warnf(format string, args ...any)
	Debugf(format string, args ...any)
}

// AckerConfig shapes an Acker.
type AckerConfig struct {
	// Num is n of the acker's identity acker/n.
	Num int
	// Generations is the ledger's (ledger.Config.Generations).
	Generations int
	// MaxPending is how many roots a spout task keeps in flight: with the
	// spout tasks and the ackers it sizes the ledger.
	MaxPending int
	// Spouts says, per task id of the topology, whether the task is a spout
	// task; it is as long as the topology has tasks.
	Spouts []bool
	// Completed makes the Completed message for ids, and may hand back a
	// spare slice for the next ids (the actors reuse their messages). Nil:
	// a fresh message each time.
	Completed func(ids []uint64) (m *messages.Completed, spare []uint64)
	// Log reports refusals and drops (nil: none).
	Log Logger
}

// Dest says where an Out goes.
type Dest uint8

const (
	// ToAcker: to acker Out.Acker, the owner of the roots in Msg.
	ToAcker Dest = iota
	// ToSpout: to spout task Out.Task of the topology.
	ToSpout
	// ToClient: to the remote client whose actor is Out.Client.
	ToClient
)

// Out is a message an Acker decided to send.
type Out struct {
	Dest   Dest
	Acker  int
	Task   uint32
	Client *messages.Pid
	Msg    any
}

// client is where a remote client hears back, and the rotation at which it
// last opened or restarted the timeout of a record here.
type client struct {
	pid  *messages.Pid
	seen uint64
}

// Acker is one acker's decisions, the tracker paper's acker as a state
// machine in the manner of etcd's raft: the actor hands it every message
// (Track, AckBatch, FailRoot, Handover), every tick of its timer (Rotate)
// and every new acker set (SetDirectory), and sends what Ready returns. It
// owns no goroutine, clock or I/O; a test drives it with calls alone.
//
// It keeps a ledger of the roots it owns, passes on the entries of roots it
// does not own to their acker, hands its records over when the acker set
// changes, remembers where remote clients hear back, and gathers per spout
// task what completed, failed or timed out until Flush.
type Acker struct {
	cfg AckerConfig
	dir *Directory
	l   *ledger.Ledger
	out []Out

	completed, failed, expired outbox
	onExpire, onDone           func(springID uint64, task uint32)

	clients   map[uint32]client // remote clients by task id
	rotations uint64            // rotations so far, the clock of clients' seen
	quiet     bool              // a refusal was logged since the last rotation
	moved     []ledger.Record   // reused by SetDirectory

	bad       uint64 // malformed messages (or handed-over records) and undeliverable notifications dropped
	refused   uint64 // remote clients refused: the table was full, or their task id was another client's
	forwarded uint64 // entries passed on to their root's new acker
}

// NewAcker makes the acker cfg.Num under the acker set d.
func NewAcker(cfg AckerConfig, d *Directory) *Acker {
	if cfg.Log == nil {
		cfg.Log = discard{}
	}
	if cfg.Completed == nil {
		cfg.Completed = func(ids []uint64) (*messages.Completed, []uint64) {
			return &messages.Completed{SpringIds: ids}, nil
		}
	}
	a := &Acker{cfg: cfg, dir: d}
	expect := a.expect(d)
	a.l = ledger.New(ledger.Config{Generations: cfg.Generations, ExpectedInFlight: roomy(expect),
		MaxInFlight: a.maxInFlight(expect)})
	tasks := len(cfg.Spouts)
	a.completed, a.failed, a.expired = newOutbox(tasks), newOutbox(tasks), newOutbox(tasks)
	a.onExpire = func(id uint64, task uint32) { a.expired.add(task, id) }
	a.onDone = func(id uint64, task uint32) { a.completed.add(task, id) }
	return a
}

type discard struct{}

func (discard) Errorf(string, ...any) {}
func (discard) Warnf(string, ...any)  {}
func (discard) Debugf(string, ...any) {}

// Ready returns what the calls since the last Ready decided to send, and
// forgets it: the caller sends it all before its next call.
func (a *Acker) Ready() []Out {
	out := a.out
	a.out = a.out[:0]
	return out
}

// Directory is the acker set the acker acts on.
func (a *Acker) Directory() *Directory { return a.dir }

// Ledger is the acker's ledger, to read.
func (a *Acker) Ledger() *ledger.Ledger { return a.l }

// expect is this acker's share of the roots the spouts may keep in flight
// (capped: beyond it the table grows once, by half).
func (a *Acker) expect(d *Directory) int {
	share := a.cfg.MaxPending * a.spoutTasks() / max(d.Ackers, 1)
	return min(share+share/10, 1<<20) // the ring's shares differ by a few %
}

// spoutTasks is the number of the topology's spout tasks.
func (a *Acker) spoutTasks() int {
	n := 0
	for _, s := range a.cfg.Spouts {
		if s {
			n++
		}
	}
	return n
}

// roomy is what an acker sizes its ledger for: twice its share of the
// roots in flight, up to 128 Ki records (2.5 MB), since a table near its
// 7/8 bound probes far (a root's init, three acks and completion take ~2×
// longer at 80 % load than at 40 %: BenchmarkLedgerLoad); a larger share
// gets its own size, and the ledger's ~23 bytes a record.
func roomy(expect int) int { return max(expect, min(2*expect, 1<<17)) }

// maxInFlight leaves room for orphans (late acks) beyond what the spouts
// may keep in flight; past it, inits are rejected and their roots replay at
// the spout's deadline, and stray acks are dropped and counted. One acker
// may own all the roots in flight, not only its share: spout tasks give
// their roots to the ackers on their own member (Spout.SetNear), and a
// member can host many spout tasks and one acker. Twice all of them leaves
// such an acker the room for orphans and clients' roots that 4 shares
// leave the others.
func (a *Acker) maxInFlight(expect int) int {
	all := min(a.cfg.MaxPending*a.spoutTasks(), 1<<22)
	return max(4*expect, 2*all) + 4096
}

// SetDirectory acts on a new acker set: the records this acker no longer
// owns go to their new ackers, which fold them into what reached them first.
func (a *Acker) SetDirectory(d *Directory) {
	if d == a.dir {
		return
	}
	a.dir = d
	a.l.SetMaxInFlight(a.maxInFlight(a.expect(d)))
	a.moved = a.l.Extract(func(id uint64) bool { return d.AckerOf(id) != a.cfg.Num }, a.moved[:0])
	var out handovers
	for _, r := range a.moved {
		a.handover(&out, r)
	}
	sendAll(a, out.by)
	if len(a.moved) > 0 {
		a.cfg.Log.Debugf("acker/%d: handed %d records over for acker set %d", a.cfg.Num, len(a.moved), d.Version)
	}
}

// Rotate ages the records by one generation (the acker's timer calls it
// every timeout/(Generations-1)), tells the spouts and clients what timed
// out, and forgets the clients none of whose records can be left: a record
// lives Generations rotations from its init or adoption, and both mark its
// client seen.
func (a *Acker) Rotate() {
	a.l.Rotate(a.onExpire)
	a.rotations++
	a.Flush() // what is queued for a client goes out before it is forgotten
	gens := uint64(a.cfg.Generations)
	for task, c := range a.clients {
		if a.rotations-c.seen >= gens {
			delete(a.clients, task)
		}
	}
	a.quiet = false
}

// Track opens the records of a spout task's (or a remote client's) roots;
// the entries of roots another acker owns are passed on to it.
func (a *Acker) Track(m *messages.Track) {
	if len(m.SpringIds) != len(m.InitXors) || !a.trackerOK(m) {
		a.drop(fmt.Sprintf("track from task %d with %d springIds and %d inits", m.Task, len(m.SpringIds), len(m.InitXors)))
		return
	}
	if m.Notify != nil && !a.client(m.Task, m.Notify) {
		return // refused and counted: the client replays these roots at its deadline
	}
	split(a, m.SpringIds, a.routedBy(m.Version, m.Routing),
		func() *messages.Track {
			return &messages.Track{Task: m.Task, Version: a.dir.Version, Routing: a.dir.Routing, Notify: m.Notify}
		},
		func(t *messages.Track, i int) {
			t.SpringIds, t.InitXors = append(t.SpringIds, m.SpringIds[i]), append(t.InitXors, m.InitXors[i])
		},
		func(i int) { a.outcome(m.SpringIds[i], a.l.Init(m.SpringIds[i], m.Task, m.InitXors[i])) })
}

// AckBatch folds a processor's deltas into their roots' records.
func (a *Acker) AckBatch(m *messages.AckBatch) {
	if len(m.SpringIds) != len(m.XorDeltas) {
		a.drop(fmt.Sprintf("ack batch with %d springIds and %d deltas", len(m.SpringIds), len(m.XorDeltas)))
		return
	}
	if a.routedBy(m.Version, m.Routing) { // every entry is this acker's: the ledger's batched loop
		a.l.AckBatch(m.SpringIds, m.XorDeltas, a.onDone)
		return
	}
	split(a, m.SpringIds, false,
		func() *messages.AckBatch { return &messages.AckBatch{Version: a.dir.Version, Routing: a.dir.Routing} },
		func(b *messages.AckBatch, i int) {
			b.SpringIds, b.XorDeltas = append(b.SpringIds, m.SpringIds[i]), append(b.XorDeltas, m.XorDeltas[i])
		},
		func(i int) { a.outcome(m.SpringIds[i], a.l.Ack(m.SpringIds[i], m.XorDeltas[i])) })
}

// Fail fails roots now.
func (a *Acker) Fail(m *messages.FailRoot) {
	split(a, m.SpringIds, a.routedBy(m.Version, m.Routing),
		func() *messages.FailRoot { return &messages.FailRoot{Version: a.dir.Version, Routing: a.dir.Routing} },
		func(f *messages.FailRoot, i int) { f.SpringIds = append(f.SpringIds, m.SpringIds[i]) },
		func(i int) {
			if task, ok := a.l.Fail(m.SpringIds[i]); ok {
				a.failed.add(task, m.SpringIds[i])
			}
		})
}

// Handover takes over records another acker handed over; one this acker
// does not own either (the set changed again) goes on to its owner. A
// record whose init names neither a spout task nor a remote client whose
// address the Handover carries or this acker knows is dropped and counted:
// there would be no one to tell. The rest of the Handover is adopted all
// the same.
func (a *Acker) Handover(m *messages.Handover) {
	n := len(m.SpringIds)
	if len(m.CheckValues) != n || len(m.Tasks) != n || len(m.Flags) != n {
		a.drop(fmt.Sprintf("handover with %d springIds, %d check values, %d tasks, %d flags", n, len(m.CheckValues), len(m.Tasks), len(m.Flags)))
		return
	}
	var out handovers
	var clients map[uint32]bool // whether each client task named is served here
	bad, badTask := 0, uint32(0)
	trusted := a.routedBy(m.Version, m.Routing)
	for i, id := range m.SpringIds {
		r := ledger.Record{SpringID: id, CheckValue: m.CheckValues[i], Task: m.Tasks[i], Init: m.Flags[i]&1 != 0, Failed: m.Flags[i]&2 != 0}
		if r.Init && !a.spoutTask(r.Task) {
			ok, seen := clients[r.Task]
			if !seen {
				ok = a.handedClient(r.Task, m.Clients)
				if clients == nil {
					clients = map[uint32]bool{}
				}
				clients[r.Task] = ok
			}
			if !ok {
				bad, badTask = bad+1, r.Task
				continue
			}
		}
		if !trusted && a.dir.AckerOf(id) != a.cfg.Num {
			a.handover(&out, r)
			a.forwarded++
			continue
		}
		switch o := a.l.Adopt(r); {
		case o.Status == ledger.Rejected:
			a.cfg.Log.Warnf("acker/%d: rejected a handed-over record for springId %x (task %d too large)", a.cfg.Num, id, r.Task)
		case o.Status == ledger.Pending && o.Task >= ClientTasks:
			a.seen(o.Task) // its timeout started over: keep its client as long
		default:
			a.outcome(id, o)
		}
	}
	if bad > 0 {
		a.bad += uint64(bad - 1)
		a.drop(fmt.Sprintf("%d handed-over records whose task is no spout task nor a client with an address (task %d, ...)", bad, badTask))
	}
	sendAll(a, out.by)
}

// HandOverAll removes every record, for the acker's activation on another
// member (the acker moved), and returns them in Handovers of at most
// MaxHandover records; what is queued for the spouts goes to Ready first.
func (a *Acker) HandOverAll() []*messages.Handover {
	a.Flush()
	var hs []*messages.Handover
	for _, r := range a.l.Extract(func(uint64) bool { return true }, nil) {
		if len(hs) == 0 || len(hs[len(hs)-1].SpringIds) == MaxHandover {
			hs = append(hs, &messages.Handover{Version: a.dir.Version, Routing: a.dir.Routing})
		}
		a.addHandover(hs[len(hs)-1], r)
	}
	return hs
}

// MaxHandover bounds the records of one Handover: about 21 bytes each on
// the wire, well under what a member takes in one message (64 MiB). An
// acker may hold millions (all the roots of its member's spout tasks).
const MaxHandover = 1 << 20

// Pending says whether completions or failures wait for Flush.
func (a *Acker) Pending() bool {
	return !a.completed.empty() || !a.failed.empty() || !a.expired.empty()
}

// Flush tells each spout task (and remote client) what settled since the
// last Flush, in one message per kind: the actor calls it once the messages
// queued before it are handled, so that under load a spout hears once per
// burst of acks.
func (a *Acker) Flush() {
	a.completed.drain(func(task uint32, ids []uint64) []uint64 {
		m, spare := a.cfg.Completed(ids)
		m.Version, m.Routing = a.dir.Version, a.dir.Routing
		a.toSpout(task, m)
		return spare
	})
	a.failed.drain(func(task uint32, ids []uint64) []uint64 {
		a.toSpout(task, &messages.Failed{SpringIds: ids, Reason: messages.FailReason_FAIL_REASON_EXPLICIT,
			Version: a.dir.Version, Routing: a.dir.Routing})
		return nil
	})
	a.expired.drain(func(task uint32, ids []uint64) []uint64 {
		a.toSpout(task, &messages.Failed{SpringIds: ids, Reason: messages.FailReason_FAIL_REASON_TIMEOUT,
			Version: a.dir.Version, Routing: a.dir.Routing})
		return nil
	})
}

// Stats is what the acker has seen, for acker stats requests.
func (a *Acker) Stats(id string) *messages.AckerStats {
	s := a.l.Stats()
	return &messages.AckerStats{Id: id, Tracked: s.Inits, InFlight: uint64(a.l.Len()), PeakInFlight: uint64(s.PeakInFlight),
		Completed: s.Completed, Failed: s.Failed, Expired: s.Expired, Orphaned: s.Orphaned, Rejected: s.Rejected,
		Acks: s.Acks, Bytes: uint64(a.l.Bytes()), Dropped: s.Dropped,
		HandedOver: s.HandedOver, Adopted: s.Adopted, Forwarded: a.forwarded,
		BadMessages: a.bad, ClientsRefused: a.refused}
}

// Undelivered counts a message the actor could not deliver (no member
// hosts its receiver): its roots replay at their deadline.
func (a *Acker) Undelivered() { a.bad++ }

// routedBy says whether a message is this acker's in every entry without a
// look at the ring: its sender routed them all by an acker set that routes
// as this acker's does (routing; the acker has learnt a newer set from the
// message already), or, from a sender that stamps no routing, passed them
// on under a newer version than the acker knows (the sender knows better).
// Remote clients stamp neither: each entry is checked against the ring,
// which also corrects a sender whose set differs.
func (a *Acker) routedBy(version, routing uint64) bool {
	if routing != 0 {
		return routing == a.dir.Routing
	}
	return version > a.dir.Version
}

// trackerOK says whether a Track is well formed for its sender: a spout
// task of the topology, or a remote client that names its actor.
func (a *Acker) trackerOK(m *messages.Track) bool {
	if m.Notify == nil {
		return a.spoutTask(m.Task)
	}
	return m.Task >= ClientTasks && m.Task <= ledger.MaxTask && m.Notify.Id != ""
}

// spoutTask says whether task is a spout task of the topology.
func (a *Acker) spoutTask(task uint32) bool {
	return int(task) < len(a.cfg.Spouts) && a.cfg.Spouts[task]
}

// client remembers where remote client task hears back and marks it seen.
// It refuses (counted) a task another client still uses, whose records
// would otherwise tell the newcomer, and a new client past MaxClients.
func (a *Acker) client(task uint32, pid *messages.Pid) bool {
	if c, ok := a.clients[task]; ok {
		if c.pid.Address != pid.Address || c.pid.Id != pid.Id {
			a.refuse("acker/%d: client %d at %s/%s refused: the task is client %s/%s's, which has records here",
				a.cfg.Num, task, pid.Address, pid.Id, c.pid.Address, c.pid.Id)
			return false
		}
		a.clients[task] = client{pid: c.pid, seen: a.rotations}
		return true
	}
	if len(a.clients) >= MaxClients {
		a.refuse("acker/%d: %d remote clients with records here; refusing client %d", a.cfg.Num, MaxClients, task)
		return false
	}
	if a.clients == nil {
		a.clients = map[uint32]client{}
	}
	a.clients[task] = client{pid: &messages.Pid{Address: pid.Address, Id: pid.Id}, seen: a.rotations}
	return true
}

// seen marks a known client as having a record whose timeout started now,
// and says whether the client is known.
func (a *Acker) seen(task uint32) bool {
	c, ok := a.clients[task]
	if ok {
		c.seen = a.rotations
		a.clients[task] = c
	}
	return ok
}

// handedClient says whether a handed-over record's init for remote client
// task can be served: the Handover carries its address (remembered) or this
// acker knows it. The client is marked seen.
func (a *Acker) handedClient(task uint32, carried map[uint32]*messages.Pid) bool {
	if task < ClientTasks || task > ledger.MaxTask {
		return false
	}
	if p := carried[task]; p != nil && p.Id != "" {
		return a.client(task, p)
	}
	return a.seen(task)
}

// refuse counts a refused client, and logs the first refusal per rotation.
func (a *Acker) refuse(format string, args ...any) {
	a.refused++
	if !a.quiet {
		a.quiet = true
		a.cfg.Log.Errorf(format+" (further refusals until the next rotation are only counted)", args...)
	}
}

func (a *Acker) outcome(id uint64, o ledger.Outcome) {
	switch o.Status {
	case ledger.Completed:
		a.completed.add(o.Task, id)
	case ledger.Failed:
		a.failed.add(o.Task, id)
	case ledger.Rejected:
		a.cfg.Log.Warnf("acker/%d: rejected an init for springId %x (duplicate, task too large, or the ledger full); the spout replays it at its deadline", a.cfg.Num, id)
	}
}

// drop logs a malformed message; the roots it concerned time out and replay.
func (a *Acker) drop(what string) {
	a.bad++
	a.cfg.Log.Errorf("acker/%d: dropped malformed %s", a.cfg.Num, what)
}

// toSpout queues a notification for a spout task or a remote client.
func (a *Acker) toSpout(task uint32, m any) {
	if task >= ClientTasks {
		if c, ok := a.clients[task]; ok {
			a.out = append(a.out, Out{Dest: ToClient, Task: task, Client: c.pid, Msg: m})
		} else {
			a.bad++
			a.cfg.Log.Errorf("acker/%d: no address for remote client %d; it will time its roots out", a.cfg.Num, task)
		}
		return
	}
	if !a.spoutTask(task) {
		a.bad++
		a.cfg.Log.Errorf("acker/%d: dropped a notification for task %d, which is no spout task", a.cfg.Num, task)
		return
	}
	a.out = append(a.out, Out{Dest: ToSpout, Task: task, Msg: m})
}

// sendAll queues messages for other ackers, by acker number.
func sendAll[M any](a *Acker, by map[int]M) {
	for o, m := range by {
		assert.That(o != a.cfg.Num, "acker: passing entries on to itself")
		a.out = append(a.out, Out{Dest: ToAcker, Acker: o, Msg: m})
	}
}

// handovers gathers records to hand over, per acker.
type handovers struct{ by map[int]*messages.Handover }

// handover adds a record to the Handover for its owner; a full one
// (MaxHandover) goes to Ready at once, and a new one is begun.
func (a *Acker) handover(out *handovers, r ledger.Record) {
	o := a.dir.AckerOf(r.SpringID)
	if out.by == nil {
		out.by = map[int]*messages.Handover{}
	}
	h := out.by[o]
	if h != nil && len(h.SpringIds) == MaxHandover {
		assert.That(o != a.cfg.Num, "acker: handing records over to itself")
		a.out = append(a.out, Out{Dest: ToAcker, Acker: o, Msg: h})
		h = nil
	}
	if h == nil {
		h = &messages.Handover{Version: a.dir.Version, Routing: a.dir.Routing}
		out.by[o] = h
	}
	a.addHandover(h, r)
}

// addHandover appends a record (and its client's address) to h.
func (a *Acker) addHandover(h *messages.Handover, r ledger.Record) {
	flags := uint32(0)
	if r.Init {
		flags |= 1
	}
	if r.Failed {
		flags |= 2
	}
	if c, ok := a.clients[r.Task]; ok && r.Init && r.Task >= ClientTasks {
		if h.Clients == nil {
			h.Clients = map[uint32]*messages.Pid{}
		}
		h.Clients[r.Task] = &messages.Pid{Address: c.pid.Address, Id: c.pid.Id}
	}
	h.SpringIds = append(h.SpringIds, r.SpringID)
	h.CheckValues = append(h.CheckValues, r.CheckValue)
	h.Tasks = append(h.Tasks, r.Task)
	h.Flags = append(h.Flags, flags)
}

// split hands each entry of a message (springIDs[i]) to own if this
// acker owns its root, and else to pass, with the message of the same kind
// (made by newMsg) that gathers the entries for the root's acker; then it
// queues those messages. A trusted message (routedBy) is all this acker's,
// without a look at the ring. A message passed on carries the version of
// the acker set by which the receiver owns every entry; a receiver that
// has not learnt that set yet (it lives on another member) takes them all
// as its own, and hands over what it does not own once it learns the set.
func split[M any](a *Acker, springIDs []uint64, trusted bool, newMsg func() M, pass func(m M, i int), own func(i int)) {
	var by map[int]M
	for i, id := range springIDs {
		o := a.cfg.Num
		if !trusted {
			o = a.dir.AckerOf(id)
		}
		if o == a.cfg.Num {
			own(i)
			continue
		}
		m, ok := by[o]
		if !ok {
			if by == nil {
				by = map[int]M{}
			}
			m = newMsg()
			by[o] = m
		}
		pass(m, i)
		a.forwarded++
	}
	sendAll(a, by)
}

// outbox gathers springIds per spout task (or remote client) until the
// next flush.
type outbox struct {
	ids     [][]uint64          // by topology task id
	clients map[uint32][]uint64 // by remote client task id
	dirty   []uint32            // tasks with ids
}

func newOutbox(tasks int) outbox { return outbox{ids: make([][]uint64, tasks)} }

func (o *outbox) empty() bool { return len(o.dirty) == 0 }

func (o *outbox) add(task uint32, id uint64) {
	if int(task) < len(o.ids) {
		if len(o.ids[task]) == 0 {
			o.dirty = append(o.dirty, task)
		}
		o.ids[task] = append(o.ids[task], id)
		return
	}
	if o.clients == nil {
		o.clients = map[uint32][]uint64{}
	}
	if len(o.clients[task]) == 0 {
		o.dirty = append(o.dirty, task)
	}
	o.clients[task] = append(o.clients[task], id)
}

// drain hands each task's ids to send, which keeps them and may return an
// empty array for the task's next ids.
func (o *outbox) drain(send func(task uint32, ids []uint64) (spare []uint64)) {
	for _, t := range o.dirty {
		if int(t) < len(o.ids) {
			ids := o.ids[t]
			o.ids[t] = send(t, ids)[:0]
		} else {
			ids := o.clients[t]
			delete(o.clients, t)
			send(t, ids)
		}
	}
	o.dirty = o.dirty[:0]
}
