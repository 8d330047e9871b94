package wal

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name    string
		time    int64
		payload []byte
	}{
		{"empty", 0, nil},
		{"one byte", 1, []byte{0}},
		{"text", 1_700_000_000_000_000_000, []byte("hello, wal")},
		{"negative time", -5, []byte("before 1970")},
		{"4 KiB", 42, bytes.Repeat([]byte{0xff}, 4096)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := []byte("prefix")
			b := AppendFrame(append([]byte(nil), prefix...), tc.time, tc.payload)
			if !bytes.Equal(b[:len(prefix)], prefix) {
				t.Fatal("AppendFrame changed dst's bytes")
			}
			frame := b[len(prefix):]
			if len(frame) != HeaderSize+len(tc.payload) || FrameSize(frame) != int64(len(frame)) {
				t.Fatalf("frame is %d bytes, FrameSize says %d, want %d", len(frame), FrameSize(frame), HeaderSize+len(tc.payload))
			}
			tm, p, n, err := DecodeFrame(append(frame, "trailing"...))
			if err != nil || tm != tc.time || !bytes.Equal(p, tc.payload) || n != len(frame) {
				t.Fatalf("DecodeFrame = %d, %q, %d, %v; want %d, %q, %d, nil", tm, p, n, err, tc.time, tc.payload, len(frame))
			}
		})
	}
}

// Every prefix of a frame is incomplete, and every flipped bit is caught.
func TestDecodeFrameDetectsDamage(t *testing.T) {
	frame := AppendFrame(nil, 123456789, []byte("the quick brown fox"))
	for cut := range len(frame) {
		if _, _, _, err := DecodeFrame(frame[:cut]); !errors.Is(err, ErrIncomplete) {
			t.Errorf("cut at %d: err %v, want ErrIncomplete", cut, err)
		}
	}
	for i := range len(frame) {
		for bit := range 8 {
			b := append([]byte(nil), frame...)
			b[i] ^= 1 << bit
			_, _, _, err := DecodeFrame(b)
			// A flipped length bit makes the frame longer (incomplete) or
			// shorter (checksum over the wrong bytes).
			if !errors.Is(err, ErrChecksum) && !errors.Is(err, ErrIncomplete) {
				t.Errorf("byte %d bit %d flipped: err %v, want ErrChecksum or ErrIncomplete", i, bit, err)
			}
		}
	}
}

// frames builds a segment of n records whose payloads are "record i".
func frames(n int) (seg []byte, ends []int64) {
	for i := range n {
		seg = AppendFrame(seg, int64(i), fmt.Appendf(nil, "record %d", i))
		ends = append(ends, int64(len(seg)))
	}
	return seg, ends
}

func TestScan(t *testing.T) {
	seg, ends := frames(5)
	flipped := append([]byte(nil), seg...)
	flipped[ends[2]+HeaderSize] ^= 0x40 // in the payload of record 3
	for _, tc := range []struct {
		name      string
		b         []byte
		wantCount uint64
		wantValid int64
		wantErr   error
	}{
		{"empty", nil, 0, 0, nil},
		{"whole", seg, 5, ends[4], nil},
		{"torn header", seg[:ends[3]+5], 4, ends[3], ErrIncomplete},
		{"torn payload", seg[:ends[4]-1], 4, ends[3], ErrIncomplete},
		{"zeros after the records", append(append([]byte(nil), seg...), make([]byte, 100)...), 5, ends[4], ErrChecksum},
		{"few zeros after the records", append(append([]byte(nil), seg...), make([]byte, 10)...), 5, ends[4], ErrIncomplete},
		{"flipped byte in record 3", flipped, 3, ends[2], ErrChecksum},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := scan(bytes.NewReader(tc.b), int64(len(tc.b)), 100)
			if res.count != tc.wantCount || res.valid != tc.wantValid || !errors.Is(res.err, tc.wantErr) {
				t.Fatalf("scan = %d records, %d bytes, err %v; want %d, %d, %v", res.count, res.valid, res.err, tc.wantCount, tc.wantValid, tc.wantErr)
			}
			var ce *CorruptError
			if tc.wantErr != nil && (!errors.As(res.err, &ce) || ce.Pos != tc.wantValid || ce.Offset != 100+tc.wantCount) {
				t.Fatalf("err %#v, want a *CorruptError at byte %d, offset %d", res.err, tc.wantValid, 100+tc.wantCount)
			}
		})
	}
}

// A length field that claims gigabytes is incomplete, not an allocation.
func TestScanHugeLength(t *testing.T) {
	b := AppendFrame(nil, 0, []byte("x"))
	b[4], b[5], b[6], b[7] = 0xff, 0xff, 0xff, 0xff
	res := scan(bytes.NewReader(b), int64(len(b)), 0)
	if res.count != 0 || !errors.Is(res.err, ErrIncomplete) {
		t.Fatalf("scan = %d records, %v; want 0, ErrIncomplete", res.count, res.err)
	}
	if allocs := testing.AllocsPerRun(10, func() { scan(bytes.NewReader(b), int64(len(b)), 0) }); allocs > 10 {
		t.Fatalf("%v allocations", allocs)
	}
}

// Records larger than a scan chunk are read whole.
func TestScanLargeRecords(t *testing.T) {
	var seg []byte
	for i := range 3 {
		seg = AppendFrame(seg, int64(i), bytes.Repeat([]byte{byte(i)}, scanChunk+100))
	}
	res := scan(bytes.NewReader(seg), int64(len(seg)), 0)
	if res.count != 3 || res.err != nil || res.valid != int64(len(seg)) {
		t.Fatalf("scan = %d records, %d bytes, %v", res.count, res.valid, res.err)
	}
}

func TestIndexLookup(t *testing.T) {
	x := newIndex(10)
	// Records of 1000 bytes: entries at offsets 10 (byte 0), 15 (5000), 20 (10000), ...
	for i := range 30 {
		x.add(10+uint64(i), int64(i)*1000)
	}
	for off := uint64(10); off < 40; off++ {
		e := x.lookup(off)
		if e.off > off || off-e.off > indexInterval/1000+1 || e.pos != int64(e.off-10)*1000 {
			t.Errorf("lookup(%d) = %+v", off, e)
		}
	}
}
