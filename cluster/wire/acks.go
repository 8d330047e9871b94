package wire

import (
	"sync"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/acktor/acktor/messages"
)

// A member's ackers take the ack batches of the tasks on other members
// decoded into arrays that were used before: protobuf-go made new ones
// for every batch, and on a worker of the three-member word count their
// first touch was a tenth of its CPU (the driver's counters ack every word
// to the acker of the word's root). The tasks' recycler takes its own ack
// batches from the same pool and gives back the ones its ackers have read.

// acks holds AckBatches that were read, their arrays kept.
var acks sync.Pool

// Acks returns an empty AckBatch whose arrays were used before, or nil
// when there is none.
func Acks() *messages.AckBatch {
	b, ok := acks.Get().(*messages.AckBatch)
	if !ok {
		return nil
	}
	*b = messages.AckBatch{SpringIds: b.SpringIds[:0], XorDeltas: b.XorDeltas[:0]}
	return b
}

// DoneAcks keeps m for Acks: it has been read, and nothing points into it.
func DoneAcks(m *messages.AckBatch) { acks.Put(m) }

// ackBatch decodes the AckBatch encoded in b into one of Acks', if b holds
// only AckBatch's fields, each of its wire type (the columns packed or
// not); otherwise it says no, and protobuf-go decodes b (or says what is
// wrong with it).
func ackBatch(b []byte) (*messages.AckBatch, bool) {
	m := Acks()
	if m == nil {
		m = &messages.AckBatch{}
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, false
		}
		b = b[n:]
		switch {
		case (num == 1 || num == 2) && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 || len(v)%8 != 0 {
				return nil, false
			}
			b = b[n:]
			col := &m.SpringIds
			if num == 2 {
				col = &m.XorDeltas
			}
			for ; len(v) > 0; v = v[8:] {
				x, _ := protowire.ConsumeFixed64(v)
				*col = append(*col, x)
			}
		case (num == 1 || num == 2 || num == 4) && typ == protowire.Fixed64Type:
			x, n := protowire.ConsumeFixed64(b)
			if n < 0 {
				return nil, false
			}
			b = b[n:]
			switch num {
			case 1:
				m.SpringIds = append(m.SpringIds, x)
			case 2:
				m.XorDeltas = append(m.XorDeltas, x)
			default:
				m.Routing = x
			}
		case num == 3 && typ == protowire.VarintType:
			x, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return nil, false
			}
			b = b[n:]
			m.Version = x
		default:
			return nil, false
		}
	}
	return m, true
}
