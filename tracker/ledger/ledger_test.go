package ledger

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/acktor/acktor/internal/assert"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg Config
		ok  bool
	}{
		{Config{Generations: 2}, true},
		{Config{Generations: MaxGenerations, ExpectedInFlight: 10}, true},
		{Config{Generations: 1}, false},
		{Config{Generations: MaxGenerations + 1}, false},
		{Config{Generations: 3, ExpectedInFlight: -1}, false},
	} {
		if err := tc.cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: Validate() = %v, want ok=%v", tc.cfg, err, tc.ok)
		}
	}
}

func TestLedgerTransitions(t *testing.T) {
	type step struct {
		op         string // init, ack, fail, rotate
		id, v      uint64
		task       uint32
		want       Status
		wantFailOK bool
		wantLen    int
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"init then acks", []step{
			{op: "init", id: 1, task: 7, v: 0b1010 ^ 0b1011, want: Pending, wantLen: 1},
			{op: "ack", id: 1, v: 0b1010, want: Pending, wantLen: 1},
			{op: "ack", id: 1, task: 7, v: 0b1011, want: Completed, wantLen: 0},
		}},
		{"acks before init count", []step{
			{op: "ack", id: 1, v: 5, want: Pending, wantLen: 1},
			{op: "ack", id: 1, v: 3, want: Pending, wantLen: 1},
			{op: "init", id: 1, task: 2, v: 5 ^ 3, want: Completed, wantLen: 0},
		}},
		{"zero checkValue without init stays open", []step{
			{op: "ack", id: 9, v: 5, want: Pending, wantLen: 1},
			{op: "ack", id: 9, v: 5, want: Pending, wantLen: 1},
			{op: "init", id: 9, task: 1, v: 4, want: Pending, wantLen: 1},
			{op: "ack", id: 9, task: 1, v: 4, want: Completed, wantLen: 0},
		}},
		{"root with no children completes at init", []step{
			{op: "init", id: 3, task: 1, v: 0, want: Completed, wantLen: 0},
		}},
		{"fail after init", []step{
			{op: "init", id: 1, task: 4, v: 8, want: Pending, wantLen: 1},
			{op: "fail", id: 1, task: 4, wantFailOK: true, wantLen: 0},
		}},
		{"fail before init reports at init", []step{
			{op: "fail", id: 1, wantLen: 1},
			{op: "ack", id: 1, v: 8, want: Pending, wantLen: 1},
			{op: "init", id: 1, task: 5, v: 8, want: Failed, wantLen: 0},
		}},
		{"duplicate init rejected", []step{
			{op: "init", id: 1, task: 4, v: 8, want: Pending, wantLen: 1},
			{op: "init", id: 1, task: 4, v: 8, want: Rejected, wantLen: 1},
			{op: "ack", id: 1, task: 4, v: 8, want: Completed, wantLen: 0},
		}},
		{"task too large rejected", []step{
			{op: "init", id: 1, task: MaxTask + 1, v: 8, want: Rejected, wantLen: 0},
		}},
		{"late duplicate ack after completion opens an orphan", []step{
			{op: "init", id: 1, task: 4, v: 8, want: Pending, wantLen: 1},
			{op: "ack", id: 1, task: 4, v: 8, want: Completed, wantLen: 0},
			{op: "ack", id: 1, v: 8, want: Pending, wantLen: 1},
			{op: "rotate", wantLen: 1},
			{op: "rotate", wantLen: 0},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := New(Config{Generations: 2})
			for i, s := range tc.steps {
				var o Outcome
				switch s.op {
				case "init":
					o = l.Init(s.id, s.task, s.v)
				case "ack":
					o = l.Ack(s.id, s.v)
				case "fail":
					task, ok := l.Fail(s.id)
					if ok != s.wantFailOK || (ok && task != s.task) {
						t.Fatalf("step %d: Fail = (%d, %v), want (%d, %v)", i, task, ok, s.task, s.wantFailOK)
					}
				case "rotate":
					l.Rotate(func(id uint64, task uint32) { t.Fatalf("step %d: unexpected expiry of %d", i, id) })
				}
				if (s.op == "init" || s.op == "ack") && o.Status != s.want {
					t.Fatalf("step %d %s: status %v, want %v", i, s.op, o.Status, s.want)
				}
				if o.Status == Completed || o.Status == Failed {
					if o.Task != s.task {
						t.Fatalf("step %d: task %d, want %d", i, o.Task, s.task)
					}
				}
				if l.Len() != s.wantLen {
					t.Fatalf("step %d: Len %d, want %d", i, l.Len(), s.wantLen)
				}
			}
		})
	}
}

// TestMaxInFlight: a full ledger refuses new records (inits rejected,
// unknown acks and fails dropped, all counted) but still serves the records
// it has, and takes new ones once there is room.
func TestMaxInFlight(t *testing.T) {
	l := New(Config{Generations: 2, MaxInFlight: 2})
	steps := []struct {
		op   string
		id   uint64
		want Status
	}{
		{"init", 1, Pending}, {"init", 2, Pending},
		{"init", 3, Rejected}, {"ack", 4, Pending}, {"fail", 5, Pending},
		{"ack", 1, Completed}, // frees a place
		{"init", 3, Pending},
	}
	for i, s := range steps {
		var o Outcome
		switch s.op {
		case "init":
			o = l.Init(s.id, 1, 7)
		case "ack":
			o = l.Ack(s.id, 7)
		case "fail":
			l.Fail(s.id)
		}
		if o.Status != s.want {
			t.Fatalf("step %d %s %d: %v, want %v", i, s.op, s.id, o.Status, s.want)
		}
	}
	if st := l.Stats(); l.Len() != 2 || st.Rejected != 1 || st.Dropped != 2 {
		t.Fatalf("Len %d, stats %+v", l.Len(), st)
	}
	if err := (Config{Generations: 2, MaxInFlight: -1}).Validate(); err == nil {
		t.Fatal("negative MaxInFlight accepted")
	}
}

func TestRotateExpiresAfterGenerations(t *testing.T) {
	for gens := 2; gens <= 5; gens++ {
		l := New(Config{Generations: gens})
		l.Init(1, 3, 42)
		l.Ack(2, 7) // orphan: never inited
		var expired []uint64
		for r := 1; r <= gens; r++ {
			l.Rotate(func(id uint64, task uint32) {
				if task != 3 {
					t.Errorf("gens %d: expired task %d, want 3", gens, task)
				}
				expired = append(expired, id)
			})
			if r < gens && l.Len() != 2 {
				t.Fatalf("gens %d: after %d rotations Len %d, want 2", gens, r, l.Len())
			}
		}
		if !slices.Equal(expired, []uint64{1}) || l.Len() != 0 {
			t.Fatalf("gens %d: expired %v, Len %d", gens, expired, l.Len())
		}
		if st := l.Stats(); st.Expired != 1 || st.Orphaned != 1 {
			t.Fatalf("gens %d: stats %+v", gens, st)
		}
	}
}

func TestInitRestartsTheClock(t *testing.T) {
	l := New(Config{Generations: 2})
	l.Ack(1, 5) // early ack, generation 0
	l.Rotate(nil)
	l.Init(1, 1, 6) // the clock starts here
	l.Rotate(func(uint64, uint32) { t.Fatal("expired one rotation after its init") })
	if l.Len() != 1 {
		t.Fatalf("Len %d, want 1", l.Len())
	}
}

// model is a plain map doing what the ledger should do.
type model struct {
	recs  map[uint64]*modelRec
	cur   int
	gens  int
	stats Stats
}

type modelRec struct {
	check      uint64
	task       uint32
	init, fail bool
	gen        int
}

func (m *model) init(id uint64, task uint32, v uint64) Outcome {
	r, ok := m.recs[id]
	if ok && r.init {
		return Outcome{Status: Rejected}
	}
	if !ok {
		if v == 0 {
			return Outcome{Status: Completed, Task: task}
		}
		m.recs[id] = &modelRec{check: v, task: task, init: true, gen: m.cur}
		return Outcome{}
	}
	if r.fail {
		delete(m.recs, id)
		return Outcome{Status: Failed, Task: task}
	}
	r.check ^= v
	if r.check == 0 {
		delete(m.recs, id)
		return Outcome{Status: Completed, Task: task}
	}
	r.task, r.init, r.gen = task, true, m.cur
	return Outcome{}
}

func (m *model) ack(id, v uint64) Outcome {
	r, ok := m.recs[id]
	if !ok {
		if v != 0 {
			m.recs[id] = &modelRec{check: v, gen: m.cur}
		}
		return Outcome{}
	}
	if r.fail {
		return Outcome{}
	}
	r.check ^= v
	if r.check == 0 && r.init {
		delete(m.recs, id)
		return Outcome{Status: Completed, Task: r.task}
	}
	return Outcome{}
}

func (m *model) failRoot(id uint64) (uint32, bool) {
	r, ok := m.recs[id]
	if !ok {
		m.recs[id] = &modelRec{fail: true, gen: m.cur}
		return 0, false
	}
	if !r.init {
		r.fail = true
		return 0, false
	}
	delete(m.recs, id)
	return r.task, true
}

func (m *model) rotate() map[uint64]uint32 {
	out := map[uint64]uint32{}
	for id, r := range m.recs {
		if m.cur-r.gen >= m.gens-1 {
			if r.init {
				out[id] = r.task
			}
			delete(m.recs, id)
		}
	}
	m.cur++
	return out
}

// TestLedgerMatchesModel drives the ledger and a map model with the same
// random operations over a small key space (many collisions, growth from an
// undersized table, rotations) and compares every answer.
func TestLedgerMatchesModel(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		gens := 2 + int(seed%4)
		l := New(Config{Generations: gens, ExpectedInFlight: int(seed % 3)})
		m := &model{recs: map[uint64]*modelRec{}, gens: gens}
		keys := 1 + rng.IntN(3000)
		for step := 0; step < 30000; step++ {
			id := uint64(rng.IntN(keys)) * 0x10001 // sequential-ish keys with a stride
			v := rng.Uint64N(4)                    // small values: zero checkValues happen often
			task := uint32(rng.IntN(8))
			switch p := rng.IntN(100); {
			case p < 30:
				if a, b := l.Init(id, task, v), m.init(id, task, v); a != b {
					t.Fatalf("seed %d step %d: Init(%d) = %+v, model %+v", seed, step, id, a, b)
				}
			case p < 85:
				if a, b := l.Ack(id, v), m.ack(id, v); a != b {
					t.Fatalf("seed %d step %d: Ack(%d) = %+v, model %+v", seed, step, id, a, b)
				}
			case p < 95:
				ta, oka := l.Fail(id)
				tb, okb := m.failRoot(id)
				if ta != tb || oka != okb {
					t.Fatalf("seed %d step %d: Fail = %d,%v model %d,%v", seed, step, ta, oka, tb, okb)
				}
			default:
				got := map[uint64]uint32{}
				l.Rotate(func(id uint64, task uint32) { got[id] = task })
				want := m.rotate()
				if len(got) != len(want) {
					t.Fatalf("seed %d step %d: rotate expired %d, model %d", seed, step, len(got), len(want))
				}
				for id, task := range want {
					if got[id] != task {
						t.Fatalf("seed %d step %d: expired %d task %d, model %d", seed, step, id, got[id], task)
					}
				}
			}
			if l.Len() != len(m.recs) {
				t.Fatalf("seed %d step %d: Len %d, model %d", seed, step, l.Len(), len(m.recs))
			}
		}
		checkTable(t, l)
	}
}

// checkTable verifies the table's invariants: records sorted by hash, each
// at or past its home with no free slot between, the last slot free, every
// record findable, and the per-generation counts adding up.
func checkTable(t *testing.T, l *Ledger) {
	t.Helper()
	n := 0
	var per [MaxGenerations]int
	if l.slots[len(l.slots)-1].has(flagUsed) {
		t.Fatal("the last slot is used")
	}
	last, free := uint64(0), -1
	for i := range l.slots {
		s := &l.slots[i]
		if !s.has(flagUsed) {
			free = i
			continue
		}
		n++
		per[s.gen()]++
		if h := l.home(s.hash()); h > i || h <= free {
			t.Fatalf("record %d at %d: home %d, last free slot %d", s.key(), i, h, free)
		}
		if n > 1 && s.hash() <= last {
			t.Fatalf("record %d at %d: hash %x after %x", s.key(), i, s.hash(), last)
		}
		last = s.hash()
		if j, ok := l.find(s.hash()); !ok || j != i {
			t.Fatalf("record %d at %d not found (find = %d, %v)", s.key(), i, j, ok)
		}
	}
	if n != l.n || per != l.perGen {
		t.Fatalf("counts: %d records, n=%d; per-generation %v vs %v", n, l.n, per[:4], l.perGen[:4])
	}
}

func TestZeroAllocs(t *testing.T) {
	l := New(Config{Generations: 3, ExpectedInFlight: 1 << 12})
	id := uint64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		id++
		l.Init(id, 1, id|1)
		l.Ack(id, id|1)
		l.Ack(id+1<<40, 3)
		l.Fail(id + 1<<40)
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per Init/Ack/Fail, want 0", allocs)
	}
}

// TestBrokenInvariantPanics: a ledger whose state no call could have made
// panics with the broken invariant at the next call that relies on it,
// instead of serving on with records it cannot account for.
func TestBrokenInvariantPanics(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt func(l *Ledger)
		call    func(l *Ledger)
	}{
		{"a record the count lost", func(l *Ledger) { l.n = 0 }, func(l *Ledger) { l.Ack(1, 3) }},
		{"a generation's count lost", func(l *Ledger) { clear(l.perGen[:]) }, func(l *Ledger) { l.Rotate(nil); l.Rotate(nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := New(Config{Generations: 2})
			l.Init(1, 1, 3)
			tc.corrupt(l)
			defer func() {
				if _, ok := recover().(assert.Invariant); !ok {
					t.Fatal("no invariant panic")
				}
			}()
			tc.call(l)
		})
	}
}

// TestAckBatchIsAcks: AckBatch folds a batch as Ack would one entry after
// another, in tables small and large enough for it to read homes ahead,
// for batches shorter and longer than the group it reads together: the
// same roots complete, in the same order, and the same records stay.
func TestAckBatchIsAcks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		records int
		batch   int
	}{
		{"small table, empty batch", 100, 0},
		{"small table", 100, 7},
		{"small table, a group", 1000, ahead},
		{"large table, one entry", 60000, 1},
		{"large table, a group", 60000, ahead},
		{"large table, past a group", 60000, ahead + 1},
		{"large table, many groups", 60000, 5*ahead + 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.records), uint64(tc.batch)))
			cfg := Config{Generations: 3, ExpectedInFlight: tc.records}
			batched, single := New(cfg), New(cfg)
			if tc.records >= 60000 && len(batched.slots) < prefetchSlots {
				t.Fatalf("%d slots: too few for AckBatch to read ahead", len(batched.slots))
			}
			ids, checks := make([]uint64, tc.records), make([]uint64, tc.records)
			for i := range ids {
				ids[i], checks[i] = rng.Uint64(), rng.Uint64()|1
				batched.Init(ids[i], uint32(i), checks[i])
				single.Init(ids[i], uint32(i), checks[i])
			}
			var gotDone, wantDone []uint64
			for round := 0; round < 20; round++ {
				springIDs, deltas := make([]uint64, tc.batch), make([]uint64, tc.batch)
				for j := range springIDs {
					k := rng.IntN(len(ids))
					switch rng.IntN(4) {
					case 0: // completes the root
						springIDs[j], deltas[j] = ids[k], checks[k]
						checks[k] = 0
					case 1: // an unknown root: kept for its init
						springIDs[j], deltas[j] = rng.Uint64(), rng.Uint64()|1
					default: // folds a part of the check value
						d := rng.Uint64()
						springIDs[j], deltas[j] = ids[k], d
						checks[k] ^= d
					}
				}
				batched.AckBatch(springIDs, deltas, func(id uint64, _ uint32) { gotDone = append(gotDone, id) })
				for j, id := range springIDs {
					if o := single.Ack(id, deltas[j]); o.Status == Completed {
						wantDone = append(wantDone, id)
					}
				}
			}
			if !slices.Equal(gotDone, wantDone) || batched.Len() != single.Len() || batched.Stats() != single.Stats() {
				t.Fatalf("AckBatch completed %d roots and kept %d, %+v; Ack one by one %d and %d, %+v",
					len(gotDone), batched.Len(), batched.Stats(), len(wantDone), single.Len(), single.Stats())
			}
		})
	}
}
