package actors

import (
	"encoding/binary"
	"fmt"
	"slices"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/acktor/acktor/cluster/wire"
	"github.com/acktor/acktor/messages"
)

// sendTuples sends b to pid, framed when pid is on another member: a batch
// to a task on this one is never serialised, so it keeps its columns. The
// frame is a copy, so b's columns go back to r at once: a task whose
// batches all leave the member would otherwise never get one back, and
// would grow every batch afresh. Where the member's serializer takes them
// (wire.Installed), the frame goes in its wire form.
func sendTuples(root *actor.RootContext, self string, pid *actor.PID, b *messages.TupleBatch, r *recycler) {
	if pid.Address == self {
		root.Send(pid, b)
		return
	}
	if wire.Installed() {
		root.Send(pid, encoded(b))
	} else {
		root.Send(pid, framed(b))
	}
	r.doneTuples(b)
}

// framed returns a framed copy of b, which keeps its columns.
func framed(b *messages.TupleBatch) *messages.TupleBatch {
	c := &messages.TupleBatch{FromTask: b.FromTask, AnchorCounts: b.AnchorCounts, SpringIds: b.SpringIds, TupleIds: b.TupleIds,
		ValueCounts: b.ValueCounts, Values: b.Values, ContentIds: b.ContentIds, Times: b.Times}
	frame(c)
	return c
}

// A frame holds a tuple batch's columns as little-endian arrays, the
// 8-byte ones first:
//
//	header   8 × u32: n tuples, na anchors, nv values, nl lineage entries
//	         (0 or n), nr runs of equal times, the anchors and the values
//	         each tuple has when all have as many (most batches), else
//	         varies, and 0 (for a later layout to tell itself apart)
//	u64      spring_ids[na], tuple_ids[na], content_ids[nl]; i64 times[nr]
//	u32      run lengths[nr] (adding up to nl), anchor_counts[n] and
//	         value_counts[n] (each unless the header gives it), value
//	         lengths[nv]
//	bytes    the values, end to end
//
// Times go as runs: a spout stamps the roots of one read with one time,
// and their tuples travel together, so a batch holds a few times, not a
// column of them (a fifth of a word tuple's bytes).
const (
	frameHeader = 32
	varies      = 1<<32 - 1
)

// each returns the number every entry of col holds, or varies.
func each(col []uint32) uint32 {
	for _, x := range col {
		if x != col[0] || x == varies {
			return varies
		}
	}
	if len(col) == 0 {
		return 0
	}
	return col[0]
}

// frame moves b's columns into b.Frame.
func frame(b *messages.TupleBatch) {
	l := layOut(b)
	f := make([]byte, l.size)
	l.put(f, b)
	*b = messages.TupleBatch{FromTask: b.FromTask, Frame: f}
}

// encoded returns b framed in its wire form, what proto.Marshal makes of
// framed(b), written once into a buffer the remote gives back when it has
// sent it; b keeps its columns.
// Proto.Actor's serializer would copy a framed batch's frame again.
func encoded(b *messages.TupleBatch) *wire.Encoded {
	l := layOut(b)
	enc := wire.FramePrefix(wire.Buffer(16+l.size), b.FromTask, l.size)
	n := len(enc)
	enc = enc[:n+l.size]
	l.put(enc[n:], b)
	return &wire.Encoded{Type: wire.TupleBatch, Bytes: enc}
}

// frameLayout is what a frame of a batch holds: its header, the count
// columns it carries (nil where the header gives their one value), its
// runs of times and its size in bytes.
type frameLayout struct {
	header [8]uint32
	counts [2][]uint32
	nr     int
	size   int
}

func layOut(b *messages.TupleBatch) frameLayout {
	n, na, nv, nl, nr := len(b.AnchorCounts), len(b.SpringIds), len(b.Values), len(b.ContentIds), runCount(b.Times)
	l := frameLayout{counts: [2][]uint32{b.AnchorCounts, b.ValueCounts}, nr: nr}
	l.header = [8]uint32{uint32(n), uint32(na), uint32(nv), uint32(nl), uint32(nr), each(l.counts[0]), each(l.counts[1]), 0}
	l.size = frameHeader + 8*(2*na+nl) + 12*nr + 4*nv
	for i, col := range l.counts {
		if l.header[5+i] == varies {
			l.size += 4 * len(col)
		} else {
			l.counts[i] = nil
		}
	}
	for _, v := range b.Values {
		l.size += len(v)
	}
	return l
}

// put writes b's frame into f, of l.size bytes.
func (l *frameLayout) put(f []byte, b *messages.TupleBatch) {
	off := putColumn(f, l.header[:])
	for _, col := range [][]uint64{b.SpringIds, b.TupleIds, b.ContentIds} {
		off += putColumn(f[off:], col)
	}
	off += putRuns(f[off:], b.Times, l.nr)
	for _, col := range l.counts {
		off += putColumn(f[off:], col)
	}
	le := binary.LittleEndian
	for _, v := range b.Values {
		le.PutUint32(f[off:], uint32(len(v)))
		off += 4
	}
	for _, v := range b.Values {
		off += copy(f[off:], v)
	}
}

// runCount is the number of runs of equal times in ts.
func runCount(ts []int64) int {
	n := 0
	for i := range ts {
		if i == 0 || ts[i] != ts[i-1] {
			n++
		}
	}
	return n
}

// putRuns writes the nr runs of ts at the start of f, their times and then
// their lengths, and returns the bytes it took.
func putRuns(f []byte, ts []int64, nr int) int {
	le := binary.LittleEndian
	r := -1
	for i, t := range ts {
		if i > 0 && t == ts[i-1] {
			at := 8*nr + 4*r
			le.PutUint32(f[at:], le.Uint32(f[at:])+1)
			continue
		}
		r++
		le.PutUint64(f[8*r:], uint64(t))
		le.PutUint32(f[8*nr+4*r:], 1)
	}
	return 12 * nr
}

// putColumn writes col at the start of f, little-endian, and returns the
// bytes it took: one copy of the array on a little-endian machine.
func putColumn[T uint32 | uint64](f []byte, col []T) int {
	size := int(unsafe.Sizeof(T(0)))
	if littleEndian {
		return copy(f, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(col))), size*len(col)))
	}
	for i, x := range col {
		if size == 8 {
			binary.LittleEndian.PutUint64(f[8*i:], uint64(x))
		} else {
			binary.LittleEndian.PutUint32(f[4*i:], uint32(x))
		}
	}
	return size * len(col)
}

// unframe fills b's columns from b.Frame, if it has one, in the arrays of
// into (a recycled batch's, so that a member that takes batches from
// others does not make new arrays for each; nil: new ones). The numbers
// are copied out of the frame, so the columns can grow when the batch is
// used again, and the values are substrings of one copy of the frame's
// last part, which its tuples' users may keep (a counter's keys): a frame
// that came in a buffer of the remote's goes back to it (wire.Release).
func unframe(b, into *messages.TupleBatch) error {
	f := b.Frame
	if len(f) == 0 {
		return nil
	}
	if len(b.AnchorCounts)+len(b.SpringIds)+len(b.TupleIds)+len(b.ValueCounts)+len(b.Values)+len(b.ContentIds)+len(b.Times) != 0 {
		return fmt.Errorf("tuple batch from task %d: both a frame and columns", b.FromTask)
	}
	if len(f) < frameHeader {
		return fmt.Errorf("tuple batch from task %d: a frame of %d bytes, shorter than its header", b.FromTask, len(f))
	}
	le := binary.LittleEndian
	var h [8]uint64
	for i := range h {
		h[i] = uint64(le.Uint32(f[4*i:]))
	}
	n, na, nv, nl, nr := h[0], h[1], h[2], h[3], h[4]
	eachAnchors, eachValues := uint32(h[5]), uint32(h[6])
	if n > maxBatchSize { // count columns the header gives cost no bytes: bound what they make
		return fmt.Errorf("tuple batch from task %d: a frame of %d tuples, more than a batch holds (%d)", b.FromTask, n, maxBatchSize)
	}
	if nl != 0 && nl != n {
		return fmt.Errorf("tuple batch from task %d: %d tuples and %d lineage entries (want all or none)", b.FromTask, n, nl)
	}
	if nr > nl || h[7] != 0 {
		return fmt.Errorf("tuple batch from task %d: %d runs of times for %d lineage entries, reserved %d (want at most as many, and 0)",
			b.FromTask, nr, nl, h[7])
	}
	fixed := frameHeader + 8*(2*na+nl) + 12*nr + 4*nv // < 2^38: no overflow
	for _, e := range []uint32{eachAnchors, eachValues} {
		if e == varies {
			fixed += 4 * n
		}
	}
	if fixed > uint64(len(f)) {
		return fmt.Errorf("tuple batch from task %d: a frame of %d bytes, want at least %d for %d tuples", b.FromTask, len(f), fixed, n)
	}
	if into == nil {
		into = &messages.TupleBatch{}
	}
	off := frameHeader
	spring := readColumn(into.SpringIds, f, &off, na)
	tuple := readColumn(into.TupleIds, f, &off, na)
	content := readColumn(into.ContentIds, f, &off, nl)
	starts := f[off:]
	off += 8 * int(nr)
	times, err := unrun(into.Times, starts, f[off:], nr, nl)
	if err != nil {
		return fmt.Errorf("tuple batch from task %d: %w", b.FromTask, err)
	}
	off += 4 * int(nr)
	counts := func(dst []uint32, e uint32) []uint32 {
		if e == varies {
			return readColumn(dst, f, &off, n)
		}
		dst = slices.Grow(dst[:0], int(n))[:n]
		for i := range dst {
			dst[i] = e
		}
		return dst
	}
	anchors, values := counts(into.AnchorCounts, eachAnchors), counts(into.ValueCounts, eachValues)
	all := string(f[fixed:])
	vals, at := slices.Grow(into.Values[:0], int(nv))[:nv], 0
	for i := range vals {
		l := le.Uint32(f[off+4*i:])
		if uint64(l) > uint64(len(all)-at) {
			return fmt.Errorf("tuple batch from task %d: value %d runs past the frame's %d bytes of values", b.FromTask, i, len(all))
		}
		vals[i], at = all[at:at+int(l)], at+int(l)
	}
	if at != len(all) {
		return fmt.Errorf("tuple batch from task %d: %d bytes left over in the frame", b.FromTask, len(all)-at)
	}
	b.SpringIds, b.TupleIds, b.ContentIds, b.Times = spring, tuple, content, times
	b.AnchorCounts, b.ValueCounts, b.Values, b.Frame = anchors, values, vals, nil
	wire.Release(f)
	return nil
}

// unrun returns the column of nl times that nr runs give, in dst's array:
// the runs' first times are the u64s at the start of starts, their lengths
// the u32s at the start of lengths.
func unrun(dst []int64, starts, lengths []byte, nr, nl uint64) ([]int64, error) {
	le := binary.LittleEndian
	var sum uint64
	for i := range nr {
		l := le.Uint32(lengths[4*i:])
		if l == 0 {
			return nil, fmt.Errorf("run %d of times is empty", i)
		}
		sum += uint64(l)
	}
	if sum != nl {
		return nil, fmt.Errorf("runs of times for %d tuples, want %d", sum, nl)
	}
	if nl == 0 {
		return dst[:0], nil
	}
	times := slices.Grow(dst[:0], int(nl))
	for i := range nr {
		t := int64(le.Uint64(starts[8*i:]))
		for range le.Uint32(lengths[4*i:]) {
			times = append(times, t)
		}
	}
	return times, nil
}

// readColumn reads the k little-endian numbers at f[*off:] into dst's
// array, and moves *off past them: one copy on a little-endian machine.
func readColumn[T uint32 | uint64](dst []T, f []byte, off *int, k uint64) []T {
	size := int(unsafe.Sizeof(T(0)))
	src := f[*off : *off+size*int(k)]
	*off += len(src)
	dst = slices.Grow(dst[:0], int(k))[:k]
	if littleEndian {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(dst))), len(src)), src)
		return dst
	}
	for i := range dst {
		if size == 8 {
			dst[i] = T(binary.LittleEndian.Uint64(src[8*i:]))
		} else {
			dst[i] = T(binary.LittleEndian.Uint32(src[4*i:]))
		}
	}
	return dst
}

// littleEndian says whether this machine stores numbers as a frame does.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1
