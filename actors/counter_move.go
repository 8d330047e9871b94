package actors

import (
	"fmt"

	"github.com/acktor/acktor/messages"
	"github.com/acktor/acktor/window"
)

// counterStateCells bounds the cells and ids of one CounterState, so that
// a big window moves in messages far below gRPC's 4 MiB limit.
const counterStateCells = 16 << 10

// counted is what a counter task's user code is: a *Counter, or a wrapper
// that embeds one (the method is promoted).
type counted interface{ counter() *Counter }

func (k *Counter) counter() *Counter { return k }

// export hands the task's window and exactly-once ids to send, in parts of
// at most counterStateCells cells and as many ids, the task's counters in
// the first. Its sketches (Distinct, Repeats) do not move: the new
// activation starts them afresh.
func (k *Counter) export(send func(*messages.CounterState)) {
	part := &messages.CounterState{Applied: k.st.Applied, Duplicates: k.st.Duplicates, Late: k.st.Late, Refused: k.st.Refused}
	flush := func(force bool) {
		if force || len(part.Keys) >= counterStateCells || len(part.Ids) >= counterStateCells {
			send(part)
			part = &messages.CounterState{}
		}
	}
	k.w.Export(func(c window.Cell) bool {
		part.Panes = append(part.Panes, c.Pane)
		part.Keys = append(part.Keys, c.Key)
		part.Counts = append(part.Counts, c.Count)
		part.Sums = append(part.Sums, c.Sum)
		flush(false)
		return true
	})
	k.seen.Export(func(t int64, id uint64) bool {
		part.IdTimes = append(part.IdTimes, t)
		part.Ids = append(part.Ids, id)
		flush(false)
		return true
	})
	flush(true)
}

// adopt adds a part of the window of the task's earlier activation to
// this one's: cells add up, so parts and updates may come in any order.
// What the window refuses (a pane it has moved past) is counted late.
func (k *Counter) adopt(m *messages.CounterState) error {
	n := len(m.Keys)
	if len(m.Panes) != n || len(m.Counts) != n || len(m.Sums) != n || len(m.IdTimes) != len(m.Ids) {
		return fmt.Errorf("counter: malformed state: %d panes, %d keys, %d counts, %d sums, %d id times, %d ids",
			len(m.Panes), n, len(m.Counts), len(m.Sums), len(m.IdTimes), len(m.Ids))
	}
	k.st.Applied += m.Applied
	k.st.Duplicates += m.Duplicates
	k.st.Late += m.Late
	k.st.Refused += m.Refused
	var first error
	for i, key := range m.Keys {
		if err := k.w.Import(window.Cell{Pane: m.Panes[i], Key: key, Value: window.Value{Count: m.Counts[i], Sum: m.Sums[i]}}); err != nil && first == nil {
			first = fmt.Errorf("counter: taking over key %q: %w", key, err)
		}
	}
	for i, id := range m.Ids {
		if _, err := k.seen.Claim(m.IdTimes[i], id); err != nil && first == nil {
			first = fmt.Errorf("counter: taking over an exactly-once id: %w", err)
		}
	}
	return first
}
