package actors

import (
	"bytes"
	"encoding/binary"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/protobuf/proto"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"

	"github.com/acktor/acktor/cluster/wire"
	"github.com/acktor/acktor/messages"
)

// overTheWire frames every batch sent to task, as for another member, and
// gives the receiver a copy that went through protobuf.
func overTheWire(t testing.TB, w *wiring, task uint32) {
	t.Helper()
	for i, b := range w.tuples[task] {
		frame(b)
		if len(b.AnchorCounts)+len(b.Values)+len(b.SpringIds) != 0 || len(b.Frame) == 0 {
			t.Fatalf("framed batch keeps its columns, or has no frame")
		}
		data, err := proto.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		got := &messages.TupleBatch{}
		if err := proto.Unmarshal(data, got); err != nil {
			t.Fatal(err)
		}
		w.tuples[task][i] = got
	}
}

// TestFrameCrossesTheWire: a batch framed for another member decodes there
// to the same tuples (values, roots, tuple ids, lineage), empty values and
// non-UTF-8 bytes included, tracked or not.
func TestFrameCrossesTheWire(t *testing.T) {
	lines := []string{"a b", "", "\xff\xfe not UTF-8", strings.Repeat("x", 300), "é"}
	for _, ackers := range []int{0, 2} {
		near, far := newWiring(t, ackers), newWiring(t, ackers)
		for _, w := range []*wiring{near, far} {
			spout := w.collector(0)
			for i, l := range lines {
				if _, err := spout.emitRoot(uint64(10+i), uint64(i), int64(1000+i), l); err != nil {
					t.Fatal(err)
				}
			}
			spout.flush()
		}
		overTheWire(t, far, 1)
		want, got := near.received(t, 1), far.received(t, 1)
		if len(got) != len(lines) || len(want) != len(lines) {
			t.Fatalf("ackers %d: %d and %d tuples, want %d", ackers, len(want), len(got), len(lines))
		}
		for i := range got {
			g, w := got[i], want[i]
			if !slices.Equal(g.Values(), w.Values()) || !slices.Equal(g.Roots(), w.Roots()) || !slices.Equal(g.ids(), w.ids()) ||
				g.ContentID() != w.ContentID() || g.Time() != w.Time() {
				t.Fatalf("ackers %d, tuple %d: got %q %v %v %x %d, want %q %v %v %x %d", ackers, i,
					g.Values(), g.Roots(), g.ids(), g.ContentID(), g.Time(), w.Values(), w.Roots(), w.ids(), w.ContentID(), w.Time())
			}
		}
	}
}

// TestEncodedIsTheFramedBatchsEncoding: encoded writes what proto.Marshal
// makes of the framed batch, so the receiver cannot tell them apart, and
// leaves the batch's columns as they were.
func TestEncodedIsTheFramedBatchsEncoding(t *testing.T) {
	for _, ackers := range []int{0, 2} {
		w := newWiring(t, ackers)
		spout := w.collector(0)
		for i, l := range []string{"a b", "", strings.Repeat("x", 300), "é"} {
			if _, err := spout.emitRoot(uint64(10+i), uint64(i), int64(1000+i/2), l); err != nil {
				t.Fatal(err)
			}
		}
		spout.flush()
		for _, b := range w.tuples[1] {
			before := proto.Clone(b)
			enc := encoded(b)
			want, err := proto.MarshalOptions{Deterministic: true}.Marshal(framed(b))
			if err != nil {
				t.Fatal(err)
			}
			if enc.Type != wire.TupleBatch || !bytes.Equal(enc.Bytes, want) {
				t.Errorf("ackers %d: encoded %q %x, want %q %x", ackers, enc.Type, enc.Bytes, wire.TupleBatch, want)
			}
			if !proto.Equal(b, before) {
				t.Errorf("ackers %d: encoding changed the batch", ackers)
			}
		}
	}
}

// TestFrameTimeRuns: a frame holds each run of equal times once, and
// decodes to the same times in order.
func TestFrameTimeRuns(t *testing.T) {
	cases := []struct {
		times []int64
		runs  uint32
	}{
		{nil, 0},
		{[]int64{5}, 1},
		{[]int64{5, 5, 5}, 1},
		{[]int64{5, 6, 5}, 3},
		{[]int64{1, 1, 2, 2, 2, -7}, 3},
	}
	for _, tc := range cases {
		b := &messages.TupleBatch{FromTask: 2}
		for i := range tc.times {
			b.AnchorCounts, b.ValueCounts = append(b.AnchorCounts, 0), append(b.ValueCounts, 1)
			b.Values, b.ContentIds = append(b.Values, "v"), append(b.ContentIds, uint64(i))
		}
		b.Times = slices.Clone(tc.times)
		frame(b)
		if got := binary.LittleEndian.Uint32(b.Frame[16:]); got != tc.runs {
			t.Errorf("times %v: %d runs in the frame, want %d", tc.times, got, tc.runs)
		}
		ts, err := decode(b, nil, nil)
		if err != nil || len(ts) != len(tc.times) {
			t.Fatalf("times %v: decoded %d tuples, %v", tc.times, len(ts), err)
		}
		for i := range ts {
			if ts[i].Time() != tc.times[i] {
				t.Errorf("times %v: tuple %d has time %d", tc.times, i, ts[i].Time())
			}
		}
	}
}

// TestMalformedFrame: a frame that does not add up is refused with an error
// naming its sender, never read past its end.
func TestMalformedFrame(t *testing.T) {
	good := func() []byte { // every tuple one anchor and one value: no count columns
		b := &messages.TupleBatch{FromTask: 3, AnchorCounts: []uint32{1, 1}, SpringIds: []uint64{7, 8}, TupleIds: []uint64{9, 10},
			ValueCounts: []uint32{1, 1}, Values: []string{"ab", "c"}, ContentIds: []uint64{1, 2}, Times: []int64{5, 6}}
		frame(b)
		return b.Frame
	}
	varied := func() []byte { // counts that vary: both count columns
		b := &messages.TupleBatch{FromTask: 3, AnchorCounts: []uint32{0, 2}, SpringIds: []uint64{7, 8}, TupleIds: []uint64{9, 10},
			ValueCounts: []uint32{1, 0}, Values: []string{"ab"}}
		frame(b)
		return b.Frame
	}
	le := binary.LittleEndian
	cases := []struct {
		name  string
		bend  func(f []byte) []byte
		extra bool // columns beside the frame
		want  string
	}{
		{"intact", func(f []byte) []byte { return f }, false, ""},
		{"short header", func(f []byte) []byte { return f[:10] }, false, "shorter than its header"},
		{"cut", func(f []byte) []byte { return f[:len(f)-1] }, false, "value 1 runs past"},
		{"cut into columns", func(f []byte) []byte { return f[:40] }, false, "want at least"},
		{"left over", func(f []byte) []byte { return append(f, 'x') }, false, "1 bytes left over"},
		{"huge counts", func(f []byte) []byte { le.PutUint32(f[4:], 1<<32-1); le.PutUint32(f[8:], 1<<32-1); return f }, false, "want at least"},
		{"tuples of no bytes", func([]byte) []byte { // counts given by the header: only n is bounded by nothing else
			f := make([]byte, frameHeader)
			le.PutUint32(f, 1<<20)
			return f
		}, false, "1048576 tuples, more than a batch holds"},
		{"lineage of some", func(f []byte) []byte { le.PutUint32(f[12:], 1); return f }, false, "2 tuples and 1 lineage entries"},
		{"a value too long", func(f []byte) []byte { le.PutUint32(f[len(f)-3-8:], 3); return f }, false, "value 1 runs past"},
		{"more anchors than counted", func(f []byte) []byte { le.PutUint32(f[20:], 2); return f }, false, "runs past the batch"},
		{"more runs of times than tuples", func(f []byte) []byte { le.PutUint32(f[16:], 3); return f }, false, "3 runs of times for 2 lineage entries"},
		{"reserved", func(f []byte) []byte { le.PutUint32(f[28:], 1); return f }, false, "reserved 1"},
		{"an empty run of times", func(f []byte) []byte { le.PutUint32(f[frameHeader+8*8:], 0); return f }, false, "run 0 of times is empty"},
		{"runs of times that do not add up", func(f []byte) []byte { le.PutUint32(f[frameHeader+8*8:], 2); return f }, false, "runs of times for 3 tuples, want 2"},
		{"varied", func([]byte) []byte { return varied() }, false, "varied"},
		{"varied, more anchors than counted", func([]byte) []byte { f := varied(); le.PutUint32(f[len(f)-2-4-16:], 3); return f }, false, "runs past the batch"},
		{"varied, cut into counts", func([]byte) []byte { f := varied(); return f[:len(f)-2-8] }, false, "want at least"},
		{"frame and columns", func(f []byte) []byte { return f }, true, "both a frame and columns"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := &messages.TupleBatch{FromTask: 3, Frame: tc.bend(good())}
			if tc.extra {
				b.Values = []string{"z"}
			}
			ts, err := decode(b, nil, nil)
			if tc.want == "varied" {
				if err != nil || len(ts) != 2 || len(ts[0].Roots()) != 0 || !slices.Equal(ts[1].Roots(), []uint64{7, 8}) ||
					!slices.Equal(ts[0].Values(), []string{"ab"}) || len(ts[1].Values()) != 0 || ts[1].Time() != 0 {
					t.Fatalf("decode = %v, %v", ts, err)
				}
				return
			}
			if tc.want == "" {
				if err != nil || len(ts) != 2 || ts[0].Values()[0] != "ab" || ts[1].Roots()[0] != 8 || ts[1].Time() != 6 {
					t.Fatalf("decode = %v, %v", ts, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "task 3") {
				t.Fatalf("decode error %v, want one with %q from task 3", err, tc.want)
			}
		})
	}
}

// BenchmarkTupleBatchWire encodes and decodes a batch of 512 word tuples as
// a split task sends them to another member, as protobuf columns
// (columns) and as a frame (framed), in the same run; frame-only is the
// sender's part, and the frame's size. The tuples' times change every 4
// tuples, more often than a spout's reads make them.
func BenchmarkTupleBatchWire(b *testing.B) {
	words := strings.Fields("the quick brown fox jumps over the lazy dog and then some more words of a line")
	batch := func() *messages.TupleBatch {
		m := &messages.TupleBatch{FromTask: 1}
		for i := range 512 {
			m.AnchorCounts = append(m.AnchorCounts, 1)
			m.SpringIds = append(m.SpringIds, uint64(1)<<40|uint64(i/4))
			m.TupleIds = append(m.TupleIds, uint64(i)*0x9e3779b97f4a7c15)
			m.ContentIds = append(m.ContentIds, uint64(i)*0xbf58476d1ce4e5b9)
			m.Times = append(m.Times, 1_796_000_000_000_000_000+int64(i/4))
			m.ValueCounts = append(m.ValueCounts, 1)
			m.Values = append(m.Values, words[i%len(words)])
		}
		return m
	}
	// trip sends a batch as columns, framed (Proto.Actor's proto serializer
	// on both sides) or encoded (the sender writes the wire form once, the
	// receiver's serializer keeps the frame: what members do).
	trip := func(b *testing.B, how string) {
		src, buf := batch(), make([]Tuple, 0, 512)
		var r recycler // the receiver's: its batches done, their arrays decode the next frame
		b.ReportAllocs()
		for b.Loop() {
			var data []byte
			var err error
			switch how {
			case "columns":
				data, err = proto.Marshal(src)
			case "framed":
				data, err = proto.Marshal(framed(src))
			case "encoded":
				data = encoded(src).Bytes
			}
			if err != nil {
				b.Fatal(err)
			}
			var got *messages.TupleBatch
			if how == "encoded" {
				m, err := remote.Deserialize(data, wire.TupleBatch, 0)
				if err != nil {
					b.Fatal(err)
				}
				got = m.(*messages.TupleBatch)
			} else {
				got = &messages.TupleBatch{}
				if err := proto.Unmarshal(data, got); err != nil {
					b.Fatal(err)
				}
			}
			if buf, err = decode(got, buf, &r); err != nil || len(buf) != 512 {
				b.Fatalf("decoded %d tuples: %v", len(buf), err)
			}
			r.doneTuples(got)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/512, "ns/tuple")
	}
	b.Run("columns", func(b *testing.B) { trip(b, "columns") })
	b.Run("framed", func(b *testing.B) { trip(b, "framed") })
	b.Run("encoded", func(b *testing.B) { trip(b, "encoded") })
	b.Run("frame-only", func(b *testing.B) { // the sender's part of framed
		src := batch()
		b.ReportAllocs()
		var f *messages.TupleBatch
		for b.Loop() {
			f = framed(src)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/512, "ns/tuple")
		b.ReportMetric(float64(len(f.Frame))/512, "frame-bytes/tuple")
	})
}

// TestSendTuplesRecyclesFramed: a batch for a task on another member goes
// as a framed copy that decodes to the same columns, and the sender's own
// batch is recycled at once; a batch for a task on this member goes as it
// is, and is not.
func TestSendTuplesRecyclesFramed(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	if !wire.Installed() {
		t.Fatal("serializer 0 is not cluster/wire's")
	}
	got := make(chan *messages.TupleBatch, 2)
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *messages.TupleBatch:
			got <- m
		case *wire.Encoded: // for another member: decode it as that member's remote would
			b, err := remote.Deserialize(m.Bytes, m.Type, 0)
			if err != nil {
				t.Errorf("decoding the encoded batch: %v", err)
			}
			got <- b.(*messages.TupleBatch)
		}
	}))
	defer sys.Root.Stop(pid)
	batch := func() *messages.TupleBatch {
		return &messages.TupleBatch{FromTask: 3, AnchorCounts: []uint32{1, 1}, SpringIds: []uint64{7, 8}, TupleIds: []uint64{9, 10},
			ValueCounts: []uint32{1, 1}, Values: []string{"a", "bc"}, ContentIds: []uint64{1, 2}, Times: []int64{5, 6}}
	}
	for _, tc := range []struct {
		name   string
		self   string // the sender's member: pid's own, or another
		remote bool
	}{
		{"to this member", pid.Address, false},
		{"to another member", "elsewhere:1", true},
	} {
		var r recycler
		b, want := batch(), batch()
		sendTuples(sys.Root, tc.self, pid, b, &r)
		var m *messages.TupleBatch
		select {
		case m = <-got:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: nothing arrived", tc.name)
		}
		if (m != b) != tc.remote || (len(m.Frame) > 0) != tc.remote {
			t.Fatalf("%s: the batch itself arrived %v, framed %v", tc.name, m == b, len(m.Frame) > 0)
		}
		if err := unframe(m, nil); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !proto.Equal(m, want) {
			t.Errorf("%s: arrived %v, want %v", tc.name, m, want)
		}
		if recycled := b.Values[0] == ""; recycled != tc.remote {
			t.Errorf("%s: the sender's batch recycled %v, want %v", tc.name, recycled, tc.remote)
		}
	}
}

// TestUnframeGivesTheBufferBack: a batch another member sent, as the
// remote's codec decodes it, gives its buffer back once unframed, and its
// values are its own: the buffer written again does not change them.
func TestUnframeGivesTheBufferBack(t *testing.T) {
	b := &messages.TupleBatch{FromTask: 3, AnchorCounts: []uint32{1, 1}, SpringIds: []uint64{7, 8}, TupleIds: []uint64{9, 10},
		ValueCounts: []uint32{1, 1}, Values: []string{"a", strings.Repeat("bc", 4<<10)}} // as large as members pool
	want := proto.Clone(b)
	enc := encoded(b)
	m := &remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: &remote.MessageBatch{
		TypeNames: []string{enc.Type}, Envelopes: []*remote.MessageEnvelope{{MessageData: enc.Bytes}}}}}
	data, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	got := &remote.RemoteMessage{}
	if err := encoding.GetCodec(grpcproto.Name).Unmarshal(data, got); err != nil {
		t.Fatal(err)
	}
	dec, err := remote.Deserialize(got.GetMessageBatch().Envelopes[0].MessageData, wire.TupleBatch, 0)
	if err != nil {
		t.Fatal(err)
	}
	tb := dec.(*messages.TupleBatch)
	f := tb.Frame
	if err := unframe(tb, nil); err != nil {
		t.Fatal(err)
	}
	if wire.Release(f) {
		t.Error("unframe did not give the frame's buffer back")
	}
	for i := range f {
		f[i] = 'z'
	}
	if !proto.Equal(tb, want) {
		t.Errorf("unframed %v, want %v", tb, want)
	}
}

// TestUnframeFillsGivenArrays: a frame is decoded into the arrays of the
// batch it is given (a recycled one), and its numbers are copies: the
// columns grow and change without touching the frame, so a recycled
// batch can be filled again.
func TestUnframeFillsGivenArrays(t *testing.T) {
	sources := map[string]*messages.TupleBatch{
		"counts in columns": {FromTask: 3, AnchorCounts: []uint32{1, 2, 0}, SpringIds: []uint64{7, 8, 9}, TupleIds: []uint64{10, 11, 12},
			ValueCounts: []uint32{1, 1, 2}, Values: []string{"a", "bc", "", "d"}, ContentIds: []uint64{1, 2, 3}, Times: []int64{5, 5, 6}},
		"counts in the header": {FromTask: 3, AnchorCounts: []uint32{1, 1, 1}, SpringIds: []uint64{7, 8, 9}, TupleIds: []uint64{10, 11, 12},
			ValueCounts: []uint32{1, 1, 1}, Values: []string{"a", "bc", ""}, ContentIds: []uint64{1, 2, 3}, Times: []int64{5, 5, 6}},
	}
	recycled := func() *messages.TupleBatch { // arrays with room, some holding what their last batch left
		return &messages.TupleBatch{AnchorCounts: slices.Grow([]uint32{9, 9, 9, 9, 9, 9, 9, 9, 9}, 55), SpringIds: make([]uint64, 1, 64), TupleIds: make([]uint64, 0, 64),
			ValueCounts: slices.Grow([]uint32{4, 4}, 62), Values: make([]string, 2, 64), ContentIds: make([]uint64, 0, 64), Times: make([]int64, 5, 64)}
	}
	for name, src := range sources {
		for _, into := range []*messages.TupleBatch{nil, recycled()} {
			b := framed(proto.Clone(src).(*messages.TupleBatch))
			raw := b.Frame
			frame := slices.Clone(raw)
			if err := unframe(b, into); err != nil {
				t.Fatalf("%s, recycled %v: %v", name, into != nil, err)
			}
			if !proto.Equal(b, src) {
				t.Fatalf("%s, recycled %v: decoded %v, want %v", name, into != nil, b, src)
			}
			if into != nil {
				for col, same := range map[string]bool{
					"AnchorCounts": &b.AnchorCounts[0] == &into.AnchorCounts[:1][0], "SpringIds": &b.SpringIds[0] == &into.SpringIds[:1][0],
					"TupleIds": &b.TupleIds[0] == &into.TupleIds[:1][0], "ValueCounts": &b.ValueCounts[0] == &into.ValueCounts[:1][0],
					"Values": &b.Values[0] == &into.Values[:1][0], "ContentIds": &b.ContentIds[0] == &into.ContentIds[:1][0],
					"Times": &b.Times[0] == &into.Times[:1][0],
				} {
					if !same {
						t.Errorf("%s: %s is a new array, not the one given", name, col)
					}
				}
			}
			b.SpringIds[0], b.TupleIds[0], b.ContentIds[0], b.AnchorCounts[0] = 0, 0, 0, 0
			b.SpringIds = append(b.SpringIds, 99)
			if !bytes.Equal(raw, frame) {
				t.Errorf("%s, recycled %v: writing the columns changed the frame", name, into != nil)
			}
		}
	}
}

// FuzzDecodeFrame: whatever bytes come as a frame, decoding them never
// panics or reads past them, and gives the same batch or error into new
// arrays as into a recycled batch's; a frame it accepts is a batch that
// frames again to the same batch.
func FuzzDecodeFrame(f *testing.F) {
	for _, b := range []*messages.TupleBatch{
		{FromTask: 3, AnchorCounts: []uint32{1, 1}, SpringIds: []uint64{7, 8}, TupleIds: []uint64{9, 10},
			ValueCounts: []uint32{1, 1}, Values: []string{"ab", "c"}, ContentIds: []uint64{1, 2}, Times: []int64{5, 6}},
		{FromTask: 3, AnchorCounts: []uint32{0, 2}, SpringIds: []uint64{7, 8}, TupleIds: []uint64{9, 10},
			ValueCounts: []uint32{1, 0}, Values: []string{"ab"}},
		{FromTask: 1, AnchorCounts: []uint32{1, 1, 1}, SpringIds: []uint64{1, 1, 2}, TupleIds: []uint64{3, 4, 5},
			ValueCounts: []uint32{2, 2, 2}, Values: []string{"", "\xff", "a", "b", "c", "d"}, ContentIds: []uint64{6, 7, 8}, Times: []int64{-1, -1, 9}},
	} {
		want := proto.Clone(b).(*messages.TupleBatch)
		frame(b)
		if err := unframe(proto.Clone(b).(*messages.TupleBatch), nil); err != nil {
			f.Fatalf("a seed does not decode: %v (%v)", err, want)
		}
		f.Add(b.Frame)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b := &messages.TupleBatch{FromTask: 1, Frame: slices.Clip(slices.Clone(data))}
		r := &recycler{} // a batch whose arrays have room and hold what their last batch left
		r.doneTuples(&messages.TupleBatch{AnchorCounts: slices.Grow([]uint32{7, 7, 7, 7, 7}, 3), SpringIds: slices.Grow([]uint64{1, 2, 3}, 1),
			TupleIds: make([]uint64, 9, 9), ValueCounts: slices.Grow([]uint32{5}, 1), Values: make([]string, 2, 16), Times: slices.Grow([]int64{4}, 63)})
		rb := &messages.TupleBatch{FromTask: 1, Frame: slices.Clip(slices.Clone(data))}
		ts, err := decode(b, nil, nil)
		rts, rerr := decode(rb, nil, r)
		if (err == nil) != (rerr == nil) || (err == nil && (!proto.Equal(b, rb) || len(ts) != len(rts))) {
			t.Fatalf("into new arrays: %v, %v; into recycled ones: %v, %v", b, err, rb, rerr)
		}
		if err != nil {
			return
		}
		if len(ts) != len(b.AnchorCounts) || len(b.Frame) != 0 {
			t.Fatalf("%d tuples from %d anchor counts, frame left %d bytes", len(ts), len(b.AnchorCounts), len(b.Frame))
		}
		again := proto.Clone(b).(*messages.TupleBatch)
		frame(again)
		c := &messages.TupleBatch{FromTask: 1, Frame: again.Frame}
		if _, err := decode(c, nil, nil); err != nil || !proto.Equal(c, b) {
			t.Fatalf("framed again: %v, %v; want %v", c, err, b)
		}
	})
}

// TestForAcker: an ack batch for an acker on another member goes in its
// wire form, which decodes to the same batch; one for this member, and
// any other message, goes as it is.
func TestForAcker(t *testing.T) {
	if !wire.Installed() {
		t.Fatal("serializer 0 is not cluster/wire's")
	}
	p := &processorTask{env: newWiring(t, 2).env, self: &actor.PID{Address: "here:1", Id: "p/0"}}
	batch := func() *messages.AckBatch {
		return &messages.AckBatch{SpringIds: []uint64{1, 2}, XorDeltas: []uint64{3, 4}, Version: 2, Routing: 9}
	}
	far, near := &actor.PID{Address: "there:2", Id: "acker/1"}, &actor.PID{Address: "here:1", Id: "acker/0"}
	sent := batch()
	enc, ok := p.forAcker(far, sent).(*wire.Encoded)
	if !ok || enc.Type != wire.AckBatch {
		t.Fatalf("an ack batch for another member went as %T %v, want encoded as %s", enc, enc, wire.AckBatch)
	}
	// It was encoded before it went back to the recycler, which hands it
	// out next (sync.Pool keeps it on this P; the race detector drops
	// objects at random). The pool is the process's (cluster/wire's), so a
	// goroutine another test left may take it first: try a few times.
	recycled := raceEnabled
	for try := 0; !recycled && try < 20; try++ {
		if try > 0 {
			sent = batch()
			enc = p.forAcker(far, sent).(*wire.Encoded)
		}
		recycled = p.env.recycle.ackBatch(0) == sent
	}
	if !recycled {
		t.Error("the ack batch sent to another member was not recycled")
	}
	got, err := remote.Deserialize(enc.Bytes, enc.Type, 0)
	if err != nil || !proto.Equal(got.(*messages.AckBatch), batch()) {
		t.Errorf("the encoded ack batch decodes to %v, %v; want %v", got, err, batch())
	}
	b := batch()
	if m := p.forAcker(near, b); m != b {
		t.Errorf("an ack batch for this member went as %T, want itself", m)
	}
	fail := &messages.FailRoot{SpringIds: []uint64{5}}
	if m := p.forAcker(far, fail); m != fail {
		t.Errorf("a fail for another member went as %T, want itself", m)
	}
}
