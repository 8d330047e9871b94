package actors

import (
	"fmt"

	"github.com/acktor/acktor/messages"
	"github.com/acktor/acktor/sketch"
	"github.com/acktor/acktor/window"
)

// keySketches are a counter task's sketches of another field per key:
// distinct values (HyperLogLog) and values seen (Bloom), each a window of
// panes with the counter's own shape, and an exact window of each key's
// repeats (updates whose value was seen before in the window).
type keySketches struct {
	o       CounterOptions
	keys    map[string]*keySketch
	repeats *window.Sliding
	scratch hllPane // a distinct query merges a key's panes into it
	// reclaimedAt is the window's end when reclaim last ran: keys empty
	// only when the window moves, so a full set is scanned once per move.
	reclaimedAt int64
}

type keySketch struct {
	distinct *window.Panes[hllPane]
	seen     *window.Panes[bloomPane]
}

// hllPane and bloomPane make the sketches window aggregates.
type (
	hllPane   struct{ *sketch.HyperLogLog }
	bloomPane struct{ *sketch.Bloom }
)

func (h hllPane) Add(key []byte, _ int64)   { h.HyperLogLog.Add(key) }
func (h hllPane) Merge(o hllPane) error     { return h.HyperLogLog.Merge(o.HyperLogLog) }
func (b bloomPane) Add(key []byte, _ int64) { b.Bloom.Add(key) }
func (b bloomPane) Merge(o bloomPane) error { return b.Bloom.Merge(o.Bloom) }

// o's sketch options are checked by withDefaults, so the constructors
// below cannot fail.
func newKeySketches(o CounterOptions) (*keySketches, error) {
	s := &keySketches{o: o, keys: map[string]*keySketch{}}
	if o.Distinct != nil {
		s.scratch = s.newHLL()
	}
	if o.Repeats != nil {
		w, err := window.New(o.Window, window.Limits{MaxKeys: o.MaxSketchKeys})
		if err != nil {
			return nil, fmt.Errorf("counter: repeats: %w", err)
		}
		s.repeats = w
	}
	return s, nil
}

func (s *keySketches) newHLL() hllPane {
	h, _ := sketch.NewHyperLogLog(s.o.Distinct.Precision)
	return hllPane{h}
}

func (s *keySketches) newBloom() bloomPane {
	b, _ := sketch.NewBloom(s.o.Repeats.Expected, s.o.Repeats.FPRate)
	return bloomPane{b}
}

// of returns the sketches of the update's key, made if it is new; an
// error refuses the update (a missing field, too many keys).
func (s *keySketches) of(vals []string, key int, w *window.Sliding) (*keySketch, error) {
	for _, f := range s.fields() {
		if f >= len(vals) {
			return nil, fmt.Errorf("counter: tuple has %d values, a sketch is of value %d", len(vals), f)
		}
	}
	return s.keyOf(vals[key], w)
}

// keyOf returns the sketches of key, made if it is new; an error when
// MaxSketchKeys keys have them.
func (s *keySketches) keyOf(key string, w *window.Sliding) (*keySketch, error) {
	if ks := s.keys[key]; ks != nil {
		return ks, nil
	}
	if len(s.keys) >= s.o.MaxSketchKeys {
		if _, end, ok := w.Bounds(); ok && end != s.reclaimedAt {
			s.reclaimedAt = end
			s.reclaim(w)
		}
		if len(s.keys) >= s.o.MaxSketchKeys {
			return nil, fmt.Errorf("counter: %d keys have sketches, at most %d (MaxSketchKeys)", len(s.keys), s.o.MaxSketchKeys)
		}
	}
	ks := &keySketch{}
	var err error
	if s.o.Distinct != nil {
		if ks.distinct, err = window.NewPanes(s.o.Window, s.newHLL); err != nil {
			return nil, fmt.Errorf("counter: distinct: %w", err)
		}
	}
	if s.o.Repeats != nil {
		if ks.seen, err = window.NewPanes(s.o.Window, s.newBloom); err != nil {
			return nil, fmt.Errorf("counter: repeats: %w", err)
		}
	}
	s.keys[key] = ks
	return ks, nil
}

func (s *keySketches) fields() []int {
	var f []int
	if s.o.Distinct != nil {
		f = append(f, s.o.Distinct.Field)
	}
	if s.o.Repeats != nil {
		f = append(f, s.o.Repeats.Field)
	}
	return f
}

// reclaim drops the sketches of keys whose window has emptied.
func (s *keySketches) reclaim(w *window.Sliding) {
	for k := range s.keys {
		if w.Get([]byte(k)).Count == 0 {
			delete(s.keys, k)
		}
	}
}

// add folds an update the window took (so t is inside the window, and no
// sketch pane refuses it) into the key's sketches.
func (s *keySketches) add(ks *keySketch, t int64, vals []string, key int) {
	if ks.distinct != nil {
		_ = ks.distinct.Add(t, []byte(vals[s.o.Distinct.Field]), 0)
	}
	if ks.seen != nil {
		v := []byte(vals[s.o.Repeats.Field])
		ks.seen.Advance(t) // test against the window as of t
		if ks.seen.Any(func(b bloomPane) bool { return b.Test(v) }) {
			_ = s.repeats.Add(t, []byte(vals[key]), 1)
		}
		_ = ks.seen.Add(t, v, 0)
	}
}

// answer adds the sketch columns to a task's answer: distinct values and
// repeats of every entry, and for the asked keys (the first asked entries)
// whether they saw the value seen.
func (s *keySketches) answer(r *messages.CounterResult, asked int, seen string, w *window.Sliding) {
	_, end, ok := w.Bounds()
	if s.repeats != nil && ok {
		s.repeats.Advance(end - 1)
	}
	for i, key := range r.Keys {
		ks := s.keys[key]
		if s.o.Distinct != nil {
			var d uint64
			if ks != nil && ok {
				ks.distinct.Advance(end - 1)
				if ks.distinct.MergeInto(s.scratch) == nil {
					d = s.scratch.Count()
				}
			}
			r.Distinct = append(r.Distinct, d)
		}
		if s.o.Repeats == nil {
			continue
		}
		r.Repeats = append(r.Repeats, s.repeats.Get([]byte(key)).Count)
		if i < asked && seen != "" {
			v := []byte(seen)
			hit := false
			if ks != nil && ok {
				ks.seen.Advance(end - 1)
				hit = ks.seen.Any(func(b bloomPane) bool { return b.Test(v) })
			}
			r.Seen = append(r.Seen, hit)
		}
	}
}
