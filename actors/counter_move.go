package actors

import (
	"errors"
	"fmt"
	"math"

	"github.com/acktor/acktor/messages"
	"github.com/acktor/acktor/window"
)

// counterStateBytes bounds one CounterState, roughly, so that a big window
// moves in messages far below what a member takes in one gRPC message
// (cluster.MaxRemoteMessage), the parts one at a time.
const counterStateBytes = 256 << 10

// counted is what a counter task's user code is: a *Counter, or a wrapper
// that embeds one (the method is promoted).
type counted interface{ counter() *Counter }

func (k *Counter) counter() *Counter { return k }

// take makes c's state k's; c is not to be used after.
func (k *Counter) take(c *Counter) {
	k.o, k.w, k.seen, k.sk = c.o, c.w, c.seen, c.sk
	k.st.Applied, k.st.Duplicates, k.st.Late, k.st.Refused = c.st.Applied, c.st.Duplicates, c.st.Late, c.st.Refused
}

// parts cuts a counter task's state into CounterStates of about
// counterStateBytes each.
type parts struct {
	part        *messages.CounterState
	size, limit int
	send        func(*messages.CounterState)
}

// grew says the part grew by about n bytes, and sends it once it is full.
func (p *parts) grew(n int) {
	if p.size += n; p.size >= p.limit {
		p.flush()
	}
}

func (p *parts) flush() {
	p.send(p.part)
	p.part, p.size = &messages.CounterState{}, 0
}

// export hands the task's window, exactly-once ids and sketch columns to
// send, in parts of about limit bytes (counterStateBytes), the task's
// counters and the number of ids in the first.
func (k *Counter) export(limit int, send func(*messages.CounterState)) {
	p := &parts{send: send, limit: limit, part: &messages.CounterState{Applied: k.st.Applied, Duplicates: k.st.Duplicates, Late: k.st.Late, Refused: k.st.Refused,
		IdCount: uint64(k.seen.Len())}}
	k.w.Export(func(c window.Cell) bool {
		m := p.part
		m.Panes, m.Keys, m.Counts, m.Sums = append(m.Panes, c.Pane), append(m.Keys, c.Key), append(m.Counts, c.Count), append(m.Sums, c.Sum)
		p.grew(32 + len(c.Key))
		return true
	})
	k.seen.Export(func(t int64, id uint64) bool {
		p.part.IdTimes, p.part.Ids = append(p.part.IdTimes, t), append(p.part.Ids, id)
		p.grew(16)
		return true
	})
	if k.sk != nil {
		k.sk.export(p)
	}
	p.part.Last = true
	p.flush()
}

// export adds the sketch columns to p: every key's panes, and the window
// of repeats.
func (s *keySketches) export(p *parts) {
	for key, ks := range s.keys {
		if ks.distinct != nil {
			ks.distinct.Export(func(t int64, h hllPane) bool {
				b, err := h.MarshalBinary()
				if err == nil {
					p.part.Sketches = append(p.part.Sketches, &messages.SketchPane{Key: key, Pane: t, Hll: b})
					p.grew(len(b) + len(key) + 16)
				}
				return true
			})
		}
		if ks.seen != nil {
			ks.seen.Export(func(t int64, f bloomPane) bool {
				b, err := f.MarshalBinary()
				if err == nil {
					p.part.Sketches = append(p.part.Sketches, &messages.SketchPane{Key: key, Pane: t, Bloom: b})
					p.grew(len(b) + len(key) + 16)
				}
				return true
			})
		}
	}
	if s.repeats != nil {
		s.repeats.Export(func(c window.Cell) bool {
			m := p.part
			m.RepeatPanes, m.RepeatKeys, m.RepeatCounts = append(m.RepeatPanes, c.Pane), append(m.RepeatKeys, c.Key), append(m.RepeatCounts, c.Count)
			p.grew(24 + len(c.Key))
			return true
		})
	}
}

// adopt adds a part of the state of the task's earlier activation to this
// one's: cells, ids and sketch panes add up (merge), so parts and updates
// may come in any order. A cell of a pane the window has moved past counts
// as late; any other refusal drops the cell, the first being the error.
func (k *Counter) adopt(m *messages.CounterState) error {
	n, r := len(m.Keys), len(m.RepeatKeys)
	if len(m.Panes) != n || len(m.Counts) != n || len(m.Sums) != n || len(m.IdTimes) != len(m.Ids) ||
		len(m.RepeatPanes) != r || len(m.RepeatCounts) != r {
		return fmt.Errorf("counter: malformed state: %d panes, %d keys, %d counts, %d sums, %d id times, %d ids, %d/%d/%d repeat columns",
			len(m.Panes), n, len(m.Counts), len(m.Sums), len(m.IdTimes), len(m.Ids), len(m.RepeatPanes), r, len(m.RepeatCounts))
	}
	k.seen.Reserve(int(min(m.IdCount, math.MaxInt32))) // a hint: the ids come in this part and the next
	k.st.Applied += m.Applied
	k.st.Duplicates += m.Duplicates
	k.st.Late += m.Late
	k.st.Refused += m.Refused
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	for i, key := range m.Keys {
		err := k.w.Import(window.Cell{Pane: m.Panes[i], Key: key, Value: window.Value{Count: m.Counts[i], Sum: m.Sums[i]}})
		if errors.Is(err, window.ErrLate) {
			k.st.Late += m.Counts[i] // the window moved past its pane meanwhile
			continue
		}
		if err != nil {
			keep(fmt.Errorf("counter: taking over key %q: %w", key, err))
		}
	}
	for i, id := range m.Ids {
		if _, err := k.seen.Claim(m.IdTimes[i], id); err != nil {
			keep(fmt.Errorf("counter: taking over an exactly-once id: %w", err))
		}
	}
	if k.sk != nil {
		keep(k.sk.adopt(m, k.w))
	}
	return first
}

// adopt merges the sketch columns of a CounterState into s.
func (s *keySketches) adopt(m *messages.CounterState, w *window.Sliding) error {
	var first error
	for _, sp := range m.Sketches {
		ks, err := s.keyOf(sp.Key, w)
		if err == nil && len(sp.Hll) > 0 && ks.distinct != nil {
			h := s.newHLL()
			if err = h.UnmarshalBinary(sp.Hll); err == nil {
				err = ks.distinct.Import(sp.Pane, h)
			}
		}
		if err == nil && len(sp.Bloom) > 0 && ks.seen != nil {
			f := s.newBloom()
			if err = f.UnmarshalBinary(sp.Bloom); err == nil {
				err = ks.seen.Import(sp.Pane, f)
			}
		}
		if err != nil && first == nil {
			first = fmt.Errorf("counter: taking over the sketches of key %q: %w", sp.Key, err)
		}
	}
	if s.repeats != nil {
		for i, key := range m.RepeatKeys {
			err := s.repeats.Import(window.Cell{Pane: m.RepeatPanes[i], Key: key, Value: window.Value{Count: m.RepeatCounts[i], Sum: int64(m.RepeatCounts[i])}})
			if err != nil && first == nil {
				first = fmt.Errorf("counter: taking over the repeats of key %q: %w", key, err)
			}
		}
	}
	return first
}
