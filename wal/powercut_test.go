package wal

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// powerDir is where the power-cut test keeps its log, in a simFS. Its
// parent is there, durably, from the start; the log's directory is not.
const powerDir = "/data/wal"

// Power cuts at random steps of seeded runs, over a file layer that keeps
// only what was fsynced (simFS, which also tears the write under way):
// after each cut (or kill, below) the log is reopened on what survived, and
//   - every record whose append was answered (nil, with EveryAppend or
//     Grouped) is there, whole, once, at the offset the append returned;
//   - every record there is the one appended at that offset, whole, with
//     its time: the records form a prefix of those appended, from Start (an
//     append not answered may have left none, some or all of its records,
//     never part of a record; with NoSync that is all there is to check),
//     and the segment files hold nothing past them: a torn tail was cut;
//   - whatever a reopen found is kept by the next cut;
//   - the committed offsets are those of the last commit answered or of
//     one tried after it, never another, and with EveryAppend or Grouped
//     none is past End;
//   - Start is no later than some commit ever written allowed (without
//     MaxBytes);
//   - after the last cut, the next append gets End.
//
// A run plays four boots of random appends (Append and AppendEntries,
// batches of records of 0 to 3.5 KiB, 4 KiB segments, so segments roll
// often), commits and forgets of two readers, sometimes MaxBytes,
// sometimes a clean Close. Each boot is played first on a copy of the file
// system to count its steps, then again with the power cut at a step drawn
// from them (or after the last); a third of the boots (never two in a row)
// end with the process killed instead, which leaves all it wrote unsynced
// for the next boot to find and a later cut to take. With Grouped(0), the
// appends of a group are staged while the syncer is held at its write of
// the group before. So a run is deterministic, and the seed in its name
// replays it: go test -run 'TestPowerCut/^seed=N$' -v ./wal.
// ACKTOR_WAL_POWER_RUNS=N runs N seeds.
func TestPowerCut(t *testing.T) {
	runs := 240
	if testing.Short() {
		runs = 60
	}
	if env := os.Getenv("ACKTOR_WAL_POWER_RUNS"); env != "" {
		n, err := strconv.Atoi(env)
		if err != nil {
			t.Fatalf("ACKTOR_WAL_POWER_RUNS=%q: %v", env, err)
		}
		runs = n
	}
	policies := []SyncPolicy{EveryAppend, Grouped(0), NoSync}
	for seed := range uint64(runs) {
		pol := policies[seed%uint64(len(policies))]
		t.Run(fmt.Sprintf("seed=%d/%s", seed, strings.ReplaceAll(pol.String(), " ", "_")), func(t *testing.T) {
			t.Parallel()
			newPowerRun(t, seed, pol).run()
		})
	}
}

// powerRun is one seeded run of TestPowerCut.
type powerRun struct {
	t     *testing.T
	rng   *rand.Rand // the run's choices (the simFS has its own)
	opts  Options    // without Now and hooks
	fs    *simFS
	clock atomic.Int64 // Options.Now, unix ns: moved by the run only
	m     powerModel
}

// powerModel is what the log must hold, and may hold, after a cut.
type powerModel struct {
	payloads [][]byte // of the records appended, by offset, answered or not
	times    []int64  // their times
	// durable is the end of the records that must be there: answered
	// (EveryAppend, Grouped) or found by a reopen.
	durable uint64
	// commits are the committed offsets of the last commit answered (or
	// found by a reopen), then those of each commit tried after it.
	commits []map[string]uint64
	// floor is the highest offset below which some commit written let
	// retention delete segments.
	floor   uint64
	appends int // appends tried: names their payloads
}

func (m powerModel) clone() powerModel {
	m.payloads, m.times, m.commits = slices.Clone(m.payloads), slices.Clone(m.times), slices.Clone(m.commits)
	return m
}

// powerAction is one step of a run's script.
type powerAction struct {
	tick    time.Duration // the clock moves first
	appends []powerAppend // one after another (Grouped: staged together)
	reader  string        // commit (or forget) of this reader, if set
	forget  bool
	at      float64 // commit: where between the reader's offset and End
	release bool    // Grouped: let the syncer go on with what was staged
}

// powerAppend is one Append (or AppendEntries) call.
type powerAppend struct {
	sizes   []int
	entries bool    // AppendEntries
	times   []int64 // AppendEntries: each record's time, 0 for the call's
}

func newPowerRun(t *testing.T, seed uint64, pol SyncPolicy) *powerRun {
	r := &powerRun{t: t, rng: rand.New(rand.NewPCG(seed, 0xc07)),
		opts: Options{Sync: pol, SegmentBytes: MinSegmentBytes}}
	if r.rng.IntN(4) == 0 {
		r.opts.MaxBytes = 3 * MinSegmentBytes
	}
	r.clock.Store(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	r.fs = newSimFS(r.rng.Uint64(), r.now)
	if err := r.fs.Mkdir(path.Dir(powerDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := r.fs.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	r.m.commits = []map[string]uint64{{}}
	return r
}

func (r *powerRun) now() time.Time { return time.Unix(0, r.clock.Load()) }

func (r *powerRun) run() {
	kill := false // the last boot ended with a kill
	for boot := range 4 {
		acts, closeFirst := r.script()
		// Count the steps of the boot on a copy, then play it with a cut.
		clock, m := r.clock.Load(), r.m.clone()
		dry := r.fs.clone(r.rng.Uint64())
		steps := r.play(dry, &m, acts, closeFirst, true)
		dirOps := dry.dirSteps(0)
		r.clock.Store(clock)
		// Where the boot ends: anywhere; or just after a directory entry
		// changed, before the directory's fsync; or in Open (its recovery,
		// a new log's directory) or just after, before an append fsyncs
		// the segment found. Kills aim there more often, and so does the
		// boot after one. A kill after a kill would find only what the
		// first one left.
		killed := kill
		kill = !killed && r.rng.IntN(3) == 0
		before := r.fs.stepCount()
		switch x := r.rng.IntN(4); {
		case len(dirOps) > 0 && (x == 0 || kill && x == 1):
			r.fs.cutAt = before + dirOps[r.rng.IntN(len(dirOps))] + 1
		case x == 1 || (kill || killed) && x == 2:
			r.fs.cutAt = before + 1 + r.rng.IntN(min(steps+1, 8))
		default:
			r.fs.cutAt = before + 1 + r.rng.IntN(steps+1)
		}
		what := "the power cut"
		if kill {
			what = "the process killed"
		}
		r.t.Logf("boot %d: %d actions, %d steps, %s at step %d", boot, len(acts), steps, what, r.fs.cutAt-before)
		r.play(r.fs, &r.m, acts, closeFirst, false)
		if kill {
			r.fs.kill()
			continue
		}
		for _, lost := range r.fs.crash() {
			r.t.Logf("the power cut took: %s", lost)
		}
	}
	// The last boot: what the last cut left is checked, and appends go on
	// from End.
	l := r.open(r.fs)
	r.verify(l, r.fs, &r.m)
	end := l.End()
	p := powerPayload(r.m.appends, 0, 100)
	first, err := l.Append(ctx, [][]byte{p})
	if err != nil || first != end {
		r.t.Fatalf("append after the last cut: offset %d, %v; want End %d", first, err, end)
	}
	if recs, err := l.Read(end, 10); err != nil || len(recs) != 1 || !bytes.Equal(recs[0].Payload, p) {
		r.t.Fatalf("Read(%d) after the last cut: %d records, %v", end, len(recs), err)
	}
	if err := l.Close(); err != nil {
		r.t.Fatal(err)
	}
}

// script draws the actions of a boot, and whether it closes the log
// before the power goes off.
func (r *powerRun) script() ([]powerAction, bool) {
	acts := make([]powerAction, 8+r.rng.IntN(16))
	for i := range acts {
		a := &acts[i]
		a.tick = time.Duration(r.rng.IntN(50)) * time.Millisecond
		a.release = r.rng.IntN(3) > 0
		switch x := r.rng.IntN(10); {
		case x < 7:
			for range 1 + r.rng.IntN(3) {
				a.appends = append(a.appends, r.appendSpec())
			}
		case x < 9:
			a.reader, a.at = fmt.Sprint("r", r.rng.IntN(2)), r.rng.Float64()
		default:
			a.reader, a.forget = fmt.Sprint("r", r.rng.IntN(2)), true
		}
	}
	return acts, r.rng.IntN(3) == 0
}

// appendSpec draws an append: one to five records of up to 500 bytes (a
// few empty), or one of up to 3.5 KiB; together less than a segment.
func (r *powerRun) appendSpec() powerAppend {
	var a powerAppend
	if r.rng.IntN(8) == 0 {
		a.sizes = []int{1000 + r.rng.IntN(2500)}
	} else {
		budget := int(r.opts.SegmentBytes)
		for range 1 + r.rng.IntN(5) {
			size := r.rng.IntN(500)
			if r.rng.IntN(20) == 0 {
				size = 0
			}
			if budget -= HeaderSize + size; budget < 0 {
				break
			}
			a.sizes = append(a.sizes, size)
		}
	}
	if a.entries = r.rng.IntN(2) == 0; a.entries {
		for range a.sizes {
			tm := int64(0)
			if r.rng.IntN(2) == 0 {
				tm = 1 + r.rng.Int64N(1<<50)
			}
			a.times = append(a.times, tm)
		}
	}
	return a
}

// powerPayload is the payload of record k of append a of a run, of size
// bytes.
func powerPayload(a, k, size int) []byte {
	const letters = "abcdefghijklmnopqrstuvwxyz"
	p := make([]byte, size)
	for i := copy(p, fmt.Sprintf("a%d.%d:", a, k)); i < size; {
		i += copy(p[i:], letters[(a*7+k*3+i)%len(letters):])
	}
	return p
}

// open opens the log on fsys.
func (r *powerRun) open(fsys *simFS) *Log {
	r.t.Helper()
	opts := r.opts
	opts.Now, opts.hooks = r.now, &hooks{fs: fsys}
	l, err := Open(powerDir, opts)
	if err != nil {
		r.t.Fatalf("Open after a power cut: %v", err)
	}
	return l
}

// play boots on fsys: opens the log (checking what the last cut left
// against m, unless dry), plays acts, and cuts the power if it is still
// on, closing the log first if closeFirst. It keeps m up to date, and
// returns the steps fsys counted.
func (r *powerRun) play(fsys *simFS, m *powerModel, acts []powerAction, closeFirst, dry bool) int {
	t := r.t
	t.Helper()
	before := fsys.stepCount()
	opts := r.opts
	opts.Now, opts.hooks = r.now, &hooks{fs: fsys}
	d := &powerDriver{r: r, fs: fsys, m: m, results: make(chan powerResult, 64)}
	if opts.Sync.mode == syncGrouped {
		d.gate = &powerGate{fs: fsys, entered: make(chan struct{}), release: make(chan struct{}), done: make(chan struct{})}
		fsys.gate = d.gate.wait
		defer func() { fsys.gate = nil }()
	}
	l, err := Open(powerDir, opts)
	if err != nil {
		if fsys.isOff() {
			return fsys.stepCount() - before // the cut came during Open
		}
		t.Fatalf("Open: %v", err)
	}
	d.l = l
	t.Cleanup(func() { // on a failure: let every goroutine go
		fsys.powerOff()
		if d.gate != nil {
			close(d.gate.done)
		}
		_ = l.Close()
	})
	switch {
	case fsys.isOff(): // the cut came during Open's retention, which only logs failures
	case dry: // the same as below
		m.found(l.End(), l.Readers())
	default:
		r.verify(l, fsys, m)
	}
	for _, a := range acts {
		if fsys.isOff() {
			break
		}
		d.do(a)
	}
	d.finish()
	if closeFirst && !fsys.isOff() {
		if err := l.Close(); err != nil && !fsys.isOff() {
			t.Fatalf("Close: %v", err)
		}
	}
	fsys.powerOff()
	_ = l.Close() // stops the syncer
	return fsys.stepCount() - before
}

// verify checks the log just opened after a cut against m, and then
// updates m: what the log holds now is durable.
func (r *powerRun) verify(l *Log, fsys *simFS, m *powerModel) {
	t := r.t
	t.Helper()
	start, end := l.Start(), l.End()
	if st := l.Stats(); st.Written != end {
		t.Fatalf("after Open, Stats %+v: Written is not End", st)
	}
	if end < m.durable {
		t.Fatalf("End %d after the cut: answered records %d to %d lost", end, end, m.durable-1)
	}
	if end > uint64(len(m.payloads)) {
		t.Fatalf("End %d after the cut: only %d records were appended", end, len(m.payloads))
	}
	if r.opts.MaxBytes == 0 && start > m.floor {
		t.Fatalf("Start %d after the cut: no commit let retention delete past %d", start, m.floor)
	}
	var size int64
	for next := start; next < end; {
		recs, err := l.Read(next, 1000)
		if err != nil || len(recs) == 0 {
			t.Fatalf("Read(%d) after the cut, End %d: %d records, %v", next, end, len(recs), err)
		}
		for _, rec := range recs {
			if rec.Offset != next || !bytes.Equal(rec.Payload, m.payloads[next]) || rec.Time != m.times[next] {
				t.Fatalf("after the cut, record %d is offset %d, time %d, %d bytes %.40q; want time %d, %d bytes %.40q",
					next, rec.Offset, rec.Time, len(rec.Payload), rec.Payload, m.times[next], len(m.payloads[next]), m.payloads[next])
			}
			size += HeaderSize + int64(len(rec.Payload))
			next++
		}
	}
	if err := l.Verify(); err != nil {
		t.Fatalf("Verify after the cut: %v", err)
	}
	if files, st := fsys.fileBytes(powerDir, segmentSuffix), l.Stats(); files != size || st.Bytes != size {
		t.Fatalf("after the cut, the segments hold %d bytes (Stats: %d), the records %d: a torn tail was left",
			files, st.Bytes, size)
	}
	got := l.Readers()
	if !slices.ContainsFunc(m.commits, func(c map[string]uint64) bool { return maps.Equal(c, got) }) {
		t.Fatalf("committed offsets %v after the cut, want the last answered %v or one tried after it %v",
			got, m.commits[0], m.commits[1:])
	}
	for reader, off := range got {
		if off > end && r.opts.Sync.mode != syncNone {
			t.Fatalf("reader %q committed %d, past End %d after the cut", reader, off, end)
		}
	}
	m.found(end, got)
}

// found notes what a reopen found: records up to end and the committed
// offsets commits, all durable now.
func (m *powerModel) found(end uint64, commits map[string]uint64) {
	m.payloads, m.times = m.payloads[:end], m.times[:end]
	m.durable, m.commits = end, []map[string]uint64{commits}
}

// fileBytes is the size of the files in dir whose names end in suffix.
func (s *simFS) fileBytes(dir, suffix string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, err := s.lookup(dir)
	if err != nil {
		return -1
	}
	var n int64
	for name, f := range d.entries {
		if strings.HasSuffix(name, suffix) {
			n += int64(len(f.data))
		}
	}
	return n
}

// powerGate holds the Grouped syncer at its writes of segments: a group's
// appends are staged while it is held at the write of the group before.
type powerGate struct {
	fs      *simFS
	entered chan struct{} // the syncer is held
	release chan struct{} // let it go
	done    chan struct{} // closed on a failure: hold nothing
}

func (g *powerGate) wait() {
	if g.fs.isOff() {
		return
	}
	select {
	case g.entered <- struct{}{}:
		select {
		case <-g.release:
		case <-g.done:
		}
	case <-g.done:
	}
}

// powerDriver plays the actions of one boot.
type powerDriver struct {
	r        *powerRun
	l        *Log
	fs       *simFS
	m        *powerModel
	gate     *powerGate // Grouped
	results  chan powerResult
	launched []powerLaunch
	answered int
	parked   bool // Grouped: the syncer is held at the gate
}

// powerLaunch is an append tried: its records are m.payloads[pos:pos+n].
type powerLaunch struct {
	pos, n int
	done   bool
}

type powerResult struct {
	i     int
	first uint64
	err   error
}

func (d *powerDriver) do(a powerAction) {
	d.r.clock.Add(int64(a.tick))
	for _, ap := range a.appends {
		if d.fs.isOff() {
			return
		}
		d.tryAppend(ap)
	}
	if a.reader != "" && !d.fs.isOff() {
		d.commit(a)
	}
	if a.release && d.parked {
		d.release()
		d.settle()
	}
}

// tryAppend tries an append. With Grouped it returns once the append is
// staged and the syncer held: at the write of this append's group if the
// syncer was idle (it takes it at once), else of the group before.
func (d *powerDriver) tryAppend(ap powerAppend) {
	m := d.m
	now := d.r.now().UnixNano()
	payloads := make([][]byte, len(ap.sizes))
	entries := make([]Entry, len(ap.sizes))
	pos := len(m.payloads)
	for k, size := range ap.sizes {
		payloads[k] = powerPayload(m.appends, k, size)
		tm := now
		if ap.entries {
			entries[k] = Entry{Time: ap.times[k], Payload: payloads[k]}
			if ap.times[k] != 0 {
				tm = ap.times[k]
			}
		}
		m.payloads, m.times = append(m.payloads, payloads[k]), append(m.times, tm)
	}
	m.appends++
	i := len(d.launched)
	d.launched = append(d.launched, powerLaunch{pos: pos, n: len(ap.sizes)})
	call := func() {
		var first uint64
		var err error
		if ap.entries {
			first, err = d.l.AppendEntries(ctx, entries)
		} else {
			first, err = d.l.Append(ctx, payloads)
		}
		d.results <- powerResult{i, first, err}
	}
	switch {
	case d.gate == nil:
		call()
		d.answer(<-d.results)
	case d.parked:
		staged := d.staged()
		go call()
		deadline := time.Now().Add(10 * time.Second)
		for d.staged() == staged && !d.launched[i].done {
			select {
			case res := <-d.results: // it failed
				d.answer(res)
			default:
				if time.Now().After(deadline) {
					d.r.t.Fatalf("append %d not staged", i)
				}
				runtime.Gosched()
			}
		}
	default:
		go call()
		d.settle()
	}
}

// staged is the number of appends staged for the next group.
func (d *powerDriver) staged() int {
	d.l.mu.Lock()
	defer d.l.mu.Unlock()
	return d.l.stagedAppends()
}

// answer takes the result of an append.
func (d *powerDriver) answer(res powerResult) {
	t := d.r.t
	t.Helper()
	d.answered++
	ln := &d.launched[res.i]
	ln.done = true
	if res.err != nil {
		if !d.fs.isOff() { // only a cut makes operations fail
			t.Fatalf("append %d failed with the power on: %v", res.i, res.err)
		}
		return
	}
	if res.first != uint64(ln.pos) {
		t.Fatalf("append %d returned offset %d, want %d", res.i, res.first, ln.pos)
	}
	if d.r.opts.Sync.mode != syncNone {
		d.m.durable = max(d.m.durable, uint64(ln.pos+ln.n))
	}
}

// settle waits (Grouped) until the syncer is held at the gate or every
// append has its answer.
func (d *powerDriver) settle() {
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for !d.parked && d.answered < len(d.launched) {
		select {
		case <-d.gate.entered:
			d.parked = true
		case res := <-d.results:
			d.answer(res)
		case <-timeout.C:
			d.r.t.Fatalf("the syncer neither wrote nor answered: %d of %d appends answered", d.answered, len(d.launched))
		}
	}
}

func (d *powerDriver) release() {
	d.gate.release <- struct{}{}
	d.parked = false
}

// finish lets the syncer go (Grouped) until every append has its answer.
func (d *powerDriver) finish() {
	for d.gate != nil && (d.parked || d.answered < len(d.launched)) {
		if d.parked {
			d.release()
		}
		d.settle()
	}
}

// commit commits (or forgets) a reader: a commit moves it to a drawn
// offset up to End.
func (d *powerDriver) commit(a powerAction) {
	m := d.m
	next := maps.Clone(m.commits[0])
	if a.forget {
		delete(next, a.reader)
	} else {
		from, end := next[a.reader], d.l.End()
		next[a.reader] = min(end, from+uint64(a.at*float64(end-min(from, end)+1)))
	}
	m.commits = append(m.commits, next)
	if len(next) > 0 {
		m.floor = max(m.floor, slices.Min(slices.Collect(maps.Values(next))))
	}
	var err error
	if a.forget {
		err = d.l.Forget(a.reader)
	} else {
		err = d.l.Commit(a.reader, next[a.reader])
	}
	if err != nil {
		if !d.fs.isOff() {
			d.r.t.Fatalf("commit %v failed with the power on: %v", next, err)
		}
		return
	}
	m.commits = []map[string]uint64{next}
}
