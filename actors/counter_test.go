package actors

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acktor/acktor/messages"
	"github.com/acktor/acktor/source"
	"github.com/acktor/acktor/window"
	"google.golang.org/protobuf/proto"
)

// update is one tuple a counter task receives.
type update struct {
	key, value string
	cid        uint64
	t          int64
}

// batchOf is ups as one batch, a tuple each.
func batchOf(ups []update) *messages.TupleBatch {
	b := &messages.TupleBatch{}
	for _, u := range ups {
		b.AnchorCounts = append(b.AnchorCounts, 1)
		b.SpringIds = append(b.SpringIds, uint64(len(b.SpringIds)+1))
		b.TupleIds = append(b.TupleIds, 7)
		b.ValueCounts = append(b.ValueCounts, 2)
		b.Values = append(b.Values, u.key, u.value)
		b.ContentIds = append(b.ContentIds, u.cid)
		b.Times = append(b.Times, u.t)
	}
	return b
}

// feed hands ups to k as one batch and says, per tuple, "ack" or "fail".
func feed(t *testing.T, k *Counter, ups []update) []string {
	t.Helper()
	ts, err := decode(batchOf(ups), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := newWiring(t, 1)
	col := w.collector(2)
	for i := range ts {
		k.Process(&ts[i], col)
	}
	col.flush()
	out := make([]string, len(ts))
	for i := range out {
		out[i] = "ack"
	}
	for _, f := range w.fails {
		for _, id := range f.SpringIds {
			out[id-1] = "fail"
		}
	}
	return out
}

func TestCounter(t *testing.T) {
	sec := int64(time.Second)
	win := window.Config{Size: 4 * time.Second, Pane: time.Second}
	for _, tc := range []struct {
		name    string
		o       CounterOptions
		ups     []update
		want    []string         // ack or fail per update
		values  map[string]int64 // key -> count over the window
		sums    map[string]int64
		dup     uint64
		late    uint64
		refused uint64
	}{
		{
			name:   "counts and sums",
			o:      CounterOptions{Window: win, Value: 1},
			ups:    []update{{"a", "3", 1, 0}, {"a", "4", 2, sec}, {"b", "-2", 3, sec}},
			want:   []string{"ack", "ack", "ack"},
			values: map[string]int64{"a": 2, "b": 1}, sums: map[string]int64{"a": 7, "b": -2},
		},
		{
			name:   "at least once counts a replay twice",
			o:      CounterOptions{Window: win, Value: -1},
			ups:    []update{{"a", "x", 1, 0}, {"a", "x", 1, 0}},
			want:   []string{"ack", "ack"},
			values: map[string]int64{"a": 2},
		},
		{
			name:   "exactly once drops the replay, not a new id",
			o:      CounterOptions{Window: win, Value: -1, ExactlyOnce: true},
			ups:    []update{{"a", "x", 1, 0}, {"a", "x", 1, 0}, {"a", "x", 2, 0}, {"a", "x", 0, 0}, {"a", "x", 0, 0}},
			want:   []string{"ack", "ack", "ack", "ack", "ack"},
			values: map[string]int64{"a": 4}, dup: 1, // content id 0 is never deduplicated
		},
		{
			name:   "late updates are acked, not counted",
			o:      CounterOptions{Window: win, Value: -1, ExactlyOnce: true},
			ups:    []update{{"a", "x", 1, 0}, {"a", "x", 2, 9 * sec}, {"a", "x", 1, 0}},
			want:   []string{"ack", "ack", "ack"},
			values: map[string]int64{"a": 1}, late: 1,
		},
		{
			name:    "bad value and missing key fail",
			o:       CounterOptions{Window: win, Value: 1},
			ups:     []update{{"a", "one", 1, 0}, {"a", "1", 2, 0}},
			want:    []string{"fail", "ack"},
			values:  map[string]int64{"a": 1},
			refused: 1,
		},
		{
			name:    "full dictionary fails",
			o:       CounterOptions{Window: win, Value: -1, Limits: window.Limits{MaxKeys: 1}},
			ups:     []update{{"a", "x", 1, 0}, {"b", "x", 2, 0}},
			want:    []string{"ack", "fail"},
			values:  map[string]int64{"a": 1, "b": 0},
			refused: 1,
		},
		{
			name:    "remembered ids are bounded",
			o:       CounterOptions{Window: win, Value: -1, ExactlyOnce: true, MaxIDs: 2},
			ups:     []update{{"a", "x", 1, 0}, {"a", "x", 2, 0}, {"a", "x", 3, 0}, {"a", "x", 2, 0}},
			want:    []string{"ack", "ack", "fail", "ack"},
			values:  map[string]int64{"a": 2},
			refused: 1, dup: 1,
		},
		{
			name:   "no window counts all time",
			o:      CounterOptions{Value: -1},
			ups:    []update{{"a", "x", 1, 0}, {"a", "x", 2, 100 * 365 * 24 * 3600 * sec}},
			want:   []string{"ack", "ack"},
			values: map[string]int64{"a": 2},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := NewCounter(tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if got := feed(t, k, tc.ups); strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Fatalf("outcomes %v, want %v", got, tc.want)
			}
			q := &messages.CounterQuery{}
			for key := range tc.values {
				q.Keys = append(q.Keys, key)
			}
			r := k.Query(q)
			for i, key := range r.Keys[:len(q.Keys)] {
				if int64(r.Counts[i]) != tc.values[key] {
					t.Errorf("%s: count %d, want %d", key, r.Counts[i], tc.values[key])
				}
				if s, ok := tc.sums[key]; ok && r.Sums[i] != s {
					t.Errorf("%s: sum %d, want %d", key, r.Sums[i], s)
				}
			}
			if r.Duplicates != tc.dup || r.Late != tc.late || r.Refused != tc.refused {
				t.Errorf("duplicates/late/refused %d/%d/%d, want %d/%d/%d", r.Duplicates, r.Late, r.Refused, tc.dup, tc.late, tc.refused)
			}
		})
	}
}

// TestCounterForgetsExpiredIDs: the content ids of a pane go when the pane
// leaves the window, so exactly-once memory is bounded by the window.
func TestCounterForgetsExpiredIDs(t *testing.T) {
	k, err := NewCounter(CounterOptions{Window: window.Config{Size: 2 * time.Second, Pane: time.Second}, Value: -1, ExactlyOnce: true})
	if err != nil {
		t.Fatal(err)
	}
	var ups []update
	for i := range 100 {
		ups = append(ups, update{"k" + strconv.Itoa(i%7), "x", uint64(i + 1), int64(i) * int64(100*time.Millisecond)})
	}
	feed(t, k, ups)
	r := k.Query(&messages.CounterQuery{All: true})
	// Times 0..9.9 s: the window holds panes 8 and 9, 20 updates; the ids
	// of older panes are gone except pane 7's, dropped at the next slide.
	var n uint64
	for _, c := range r.Counts {
		n += c
	}
	if n != 20 || r.Ids > 30 || r.Ids < 20 {
		t.Fatalf("window holds %d updates, %d ids remembered; want 20 and 20..30", n, r.Ids)
	}
}

func TestCounterOptionsRejected(t *testing.T) {
	for _, tc := range []struct {
		o    CounterOptions
		want string
	}{
		{CounterOptions{Window: window.Config{Size: 3, Pane: 2}}, "multiple"},
		{CounterOptions{Key: -1}, "Key = -1"},
		{CounterOptions{Value: -2}, "Value = -2"},
		{CounterOptions{MaxIDs: -1}, "MaxIDs = -1"},
		{CounterOptions{Limits: window.Limits{MaxKeys: -1}}, "MaxKeys"},
	} {
		var b Builder
		b.Spout("s", 1, nopSource)
		b.Counter("c", 1, tc.o, nil).Fields("s", 0)
		if _, err := b.Build(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: Build() = %v, want an error with %q", tc.o, err, tc.want)
		}
	}
}

// holdSource yields its lines, then holds the run open (ErrNotReady) until
// released, so a test can query counters while the topology runs.
type holdSource struct {
	lines    []string
	next     int
	released <-chan struct{}
}

func (s *holdSource) Next() (source.Root, error) {
	if s.next < len(s.lines) {
		s.next++
		return source.Root{ID: uint64(s.next), Payload: s.lines[s.next-1], Time: int64(s.next)}, nil
	}
	select {
	case <-s.released:
		return source.Root{}, io.EOF
	default:
		return source.Root{}, source.ErrNotReady
	}
}
func (s *holdSource) Replay(id uint64) (string, error) { return s.lines[id-1], nil }
func (s *holdSource) Done(uint64)                      {}
func (s *holdSource) Total() int64                     { return int64(len(s.lines)) }
func (s *holdSource) Close() error                     { return nil }

// TestQueryWhileRunning: queries fan out to every counter task and merge,
// during the run; the finished run reports the final window.
func TestQueryWhileRunning(t *testing.T) {
	lines := []string{"a b a", "c a", "b"}
	release := make(chan struct{})
	var once sync.Once
	var b Builder
	b.Spout("lines", 1, func(int, int) (source.Source, error) {
		return &holdSource{lines: lines, released: release}, nil
	})
	b.Processor("split", 2, func(TaskInfo) (Processor, error) {
		return procFunc(func(t *Tuple, c *Collector) {
			for _, w := range strings.Fields(t.Values()[0]) {
				_ = c.Emit([]*Tuple{t}, w)
			}
			c.Ack(t)
		}), nil
	}).Shuffle("lines")
	b.Counter("words", 3, CounterOptions{Value: -1, ExactlyOnce: true}, nil).Fields("split", 0)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Log = quietLog()
	rt, err := New(topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := startMember(t, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var live *CounterResult
	var liveErr error
	st, err := rt.Run(ctx, c, func(p Progress) {
		if p.Completed < uint64(len(lines)) || live != nil || liveErr != nil {
			return
		}
		live, liveErr = rt.Query(ctx, c, "words", &messages.CounterQuery{Keys: []string{"a", "zz"}, Top: 2})
		once.Do(func() { close(release) })
	})
	if err != nil {
		t.Fatal(err)
	}
	if liveErr != nil || live == nil {
		t.Fatalf("live query: %v", liveErr)
	}
	if live.Keys[0].Count != 3 || live.Keys[1].Count != 0 || len(live.Top) != 2 ||
		live.Top[0].Key != "a" || live.Top[1].Key != "b" || live.Top[1].Count != 2 || live.Applied != 6 {
		t.Fatalf("live answer %+v", live)
	}
	final := st.Counters["words"]
	if final == nil || len(final.Top) != 3 || final.Top[2].Key != "c" || final.Top[2].Count != 1 {
		t.Fatalf("final window %+v", final)
	}
	if _, err := rt.Query(ctx, c, "split", nil); err == nil {
		t.Fatal("query of a processor that is no counter accepted")
	}
}

// TestCounterSketches: distinct riders (HyperLogLog) and repeat riders
// (Bloom) per zone over the window; keys whose window emptied give their
// sketches back.
func TestCounterSketches(t *testing.T) {
	sec := int64(time.Second)
	k, err := NewCounter(CounterOptions{Window: window.Config{Size: 4 * time.Second, Pane: time.Second}, Value: -1,
		Distinct: &DistinctOptions{Field: 1}, Repeats: &RepeatOptions{Field: 1}, MaxSketchKeys: 2})
	if err != nil {
		t.Fatal(err)
	}
	ask := func(seen string, keys ...string) (distinct, repeats []uint64, hits []bool) {
		r := k.Query(&messages.CounterQuery{Keys: keys, Seen: seen})
		return r.Distinct, r.Repeats, r.Seen
	}
	got := feed(t, k, []update{{"z1", "r1", 1, 0}, {"z1", "r2", 2, 0}, {"z1", "r1", 3, sec / 2}, {"z1", "r3", 4, sec}, {"z2", "r1", 5, 0}})
	if strings.Join(got, " ") != "ack ack ack ack ack" {
		t.Fatalf("updates: %v", got)
	}
	d, r, s := ask("r1", "z1", "z2", "nobody")
	if !slices.Equal(d, []uint64{3, 1, 0}) || !slices.Equal(r, []uint64{1, 0, 0}) || !slices.Equal(s, []bool{true, true, false}) {
		t.Fatalf("distinct %v repeats %v seen r1 %v", d, r, s)
	}
	if _, _, s := ask("r9", "z1", "z2"); !slices.Equal(s, []bool{false, false}) {
		t.Fatalf("seen r9 %v", s)
	}
	// At 4.5 s the window is [1 s, 5 s): the panes of t = 0 are gone, with
	// z2 and z1's first r1 and its repeat.
	got = feed(t, k, []update{{"z1", "r1", 6, 9 * sec / 2}, {"z3", "r5", 7, 9 * sec / 2}, {"z4", "r6", 8, 9 * sec / 2}})
	if strings.Join(got, " ") != "ack ack fail" {
		t.Fatalf("updates at 4.5 s: %v (z3 takes z2's sketches, z4 finds none free)", got)
	}
	d, r, s = ask("r1", "z1", "z2", "z3")
	if !slices.Equal(d, []uint64{2, 0, 1}) || !slices.Equal(r, []uint64{0, 0, 0}) || !slices.Equal(s, []bool{true, false, false}) {
		t.Fatalf("at 4.5 s: distinct %v repeats %v seen r1 %v", d, r, s)
	}
	plain, _ := NewCounter(CounterOptions{Value: -1})
	if r := plain.Query(&messages.CounterQuery{Keys: []string{"a"}, Seen: "x"}); r.Distinct != nil || r.Repeats != nil || r.Seen != nil {
		t.Fatalf("a counter without sketches answered sketch columns: %+v", r)
	}
}

func TestCounterSketchOptions(t *testing.T) {
	for _, tc := range []struct {
		o    CounterOptions
		want string
	}{
		{CounterOptions{Distinct: &DistinctOptions{Field: -1}}, "Distinct.Field = -1"},
		{CounterOptions{Distinct: &DistinctOptions{Precision: 30}}, "hyperloglog precision 30"},
		{CounterOptions{Repeats: &RepeatOptions{Field: -2}}, "Repeats.Field = -2"},
		{CounterOptions{Repeats: &RepeatOptions{FPRate: 2}}, "fpRate 2"},
		{CounterOptions{MaxSketchKeys: -1}, "MaxSketchKeys = -1"},
	} {
		if _, err := NewCounter(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error mentioning %q", tc.o, err, tc.want)
		}
	}
	k, err := NewCounter(CounterOptions{Value: -1, Distinct: &DistinctOptions{Field: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if got := feed(t, k, []update{{"a", "x", 1, 0}}); got[0] != "fail" {
		t.Fatalf("an update without the distinct field: %v", got)
	}
}

// TestCounterMoves: a counter task's state handed over in parts (here
// many small ones) to a fresh task answers every query as the original:
// counts, sums, distinct values, repeats, whether a key saw a value, its
// counters; and drops as duplicates the content ids the original had
// applied. Property-tested over random streams.
func TestCounterMoves(t *testing.T) {
	opts := CounterOptions{Window: window.Config{Size: 5 * time.Second, Pane: time.Second}, Value: -1, ExactlyOnce: true,
		Distinct: &DistinctOptions{Field: 1}, Repeats: &RepeatOptions{Field: 1}}
	for seed := range uint64(10) {
		rng := rand.New(rand.NewPCG(seed, 3))
		from, err := NewCounter(opts)
		if err != nil {
			t.Fatal(err)
		}
		var ups []update
		now := int64(time.Hour)
		for i := range 300 + rng.IntN(300) {
			now += int64(rng.IntN(int(20 * time.Millisecond)))
			ups = append(ups, update{fmt.Sprintf("z%d", rng.IntN(7)), fmt.Sprintf("r%d", rng.IntN(40)), uint64(i + 1), now - int64(rng.IntN(int(2*time.Second)))})
		}
		feed(t, from, ups)
		to, _ := NewCounter(opts)
		parts := 0
		from.export(200+rng.IntN(5000), func(m *messages.CounterState) {
			parts++
			if err := to.adopt(m); err != nil {
				t.Fatalf("seed %d: adopt: %v", seed, err)
			}
		})
		keys := []string{"z0", "z1", "z2", "z3", "z4", "z5", "z6", "nobody"}
		for _, seen := range []string{"r1", "r7", "r99"} {
			q := &messages.CounterQuery{Keys: keys, Seen: seen, All: true}
			a, b := from.Query(q), to.Query(q)
			if !proto.Equal(a, b) {
				t.Fatalf("seed %d (%d parts): the moved task answers\n%v\nthe original\n%v", seed, parts, b, a)
			}
		}
		if got := feed(t, to, ups[len(ups)-5:]); strings.Join(got, " ") != "ack ack ack ack ack" || to.st.Duplicates != 5 {
			t.Fatalf("seed %d: replays to the moved task: %v, %d duplicates, want 5 acks of duplicates", seed, got, to.st.Duplicates)
		}
		if parts < 2 {
			t.Fatalf("seed %d: the state came in %d part", seed, parts)
		}
	}
}

// TestCounterAdoptRefusesBadParts: a part of a moved or synced state that
// is corrupt, or from a counter of another shape (another job's), is
// refused with an error naming what and which key, never taken silently:
// the standby then holds nothing and asks for the state again.
func TestCounterAdoptRefusesBadParts(t *testing.T) {
	opts := CounterOptions{Window: window.Config{Size: 5 * time.Second, Pane: time.Second}, Value: -1, ExactlyOnce: true,
		Distinct: &DistinctOptions{Field: 1}, Repeats: &RepeatOptions{Field: 1}}
	other := opts
	other.Repeats = &RepeatOptions{Field: 1, Expected: 10 * defaultExpected(t, opts)}
	state := func(o CounterOptions) *messages.CounterState {
		k, err := NewCounter(o)
		if err != nil {
			t.Fatal(err)
		}
		feed(t, k, []update{{"z1", "r1", 1, int64(time.Hour)}, {"z1", "r2", 2, int64(time.Hour)}})
		var whole *messages.CounterState
		k.export(1<<20, func(m *messages.CounterState) { whole = m })
		return whole
	}
	for _, tc := range []struct {
		name, want string
		spoil      func(m *messages.CounterState)
	}{
		{"a column short", "malformed state", func(m *messages.CounterState) { m.Counts = m.Counts[:len(m.Counts)-1] }},
		{"a corrupt Bloom filter", `sketches of key "z1"`, func(m *messages.CounterState) {
			for _, sp := range m.Sketches {
				if len(sp.Bloom) > 0 {
					sp.Bloom[0] ^= 0xff
				}
			}
		}},
		{"a corrupt HyperLogLog", `sketches of key "z1"`, func(m *messages.CounterState) {
			for _, sp := range m.Sketches {
				if len(sp.Hll) > 0 {
					sp.Hll = sp.Hll[:len(sp.Hll)/2]
				}
			}
		}},
		{"another job's Bloom shape", `sketches of key "z1"`, func(m *messages.CounterState) {
			theirs := state(other)
			m.Sketches = theirs.Sketches
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := state(opts)
			tc.spoil(m)
			to, _ := NewCounter(opts)
			err := to.adopt(m)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("adopt: %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

// defaultExpected is the Bloom filters' default size in values per key.
func defaultExpected(t *testing.T, o CounterOptions) uint {
	t.Helper()
	o, err := o.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return o.Repeats.Expected
}
