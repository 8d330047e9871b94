package wal

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// logModel is what the log must hold: the payload of every offset from 0
// (deleted ones included) and the committed offsets.
type logModel struct {
	payloads [][]byte
	commits  map[string]uint64
}

// Random sequences of appends, clean reopens, crashes that cut or damage the
// tail, commits and retention keep the offsets dense and the payloads
// intact: whatever is readable is exactly what was appended.
func TestPropertyDenseAndIntact(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 10
	}
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 0x3a1))
		policies := []SyncPolicy{NoSync, EveryAppend, Grouped(0), Grouped(time.Millisecond)}
		opts := Options{Sync: policies[rng.IntN(len(policies))], SegmentBytes: MinSegmentBytes}
		if rng.IntN(3) == 0 {
			opts.MaxBytes = 3 * MinSegmentBytes
		}
		dir := t.TempDir()
		l := openLog(t, dir, opts)
		m := logModel{commits: map[string]uint64{}}
		var trace []string
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d (%v), after %v: "+format, append([]any{seed, opts.Sync, trace}, args...)...)
		}
		for range 60 {
			switch op := rng.IntN(10); {
			case op < 5: // append
				k := rng.IntN(9)
				batch := make([][]byte, k)
				for i := range batch {
					batch[i] = make([]byte, rng.IntN(300))
					for j := range batch[i] {
						batch[i][j] = byte(rng.Uint32())
					}
				}
				trace = append(trace, "append")
				first, err := l.Append(ctx, batch)
				if err != nil || first != uint64(len(m.payloads)) {
					fail("Append = %d, %v; want %d", first, err, len(m.payloads))
				}
				m.payloads = append(m.payloads, batch...)
			case op == 5: // clean reopen
				trace = append(trace, "reopen")
				closeLog(t, l)
				l = openLog(t, dir, opts)
				if r := l.Recovered(); r != (Recovery{}) {
					fail("Recovered %+v after a clean close", r)
				}
			case op == 6 || op == 7: // crash: cut or damage the last segment's tail
				closeLog(t, l)
				segs := segmentFiles(t, dir)
				last := segs[len(segs)-1]
				base, _ := parseSegmentName(filepath.Base(last))
				b, err := os.ReadFile(last)
				if err != nil {
					t.Fatal(err)
				}
				if len(b) == 0 {
					l = openLog(t, dir, opts)
					continue
				}
				var ends []int // frame ends of the records in the last segment
				for i, e := base, 0; i < uint64(len(m.payloads)); i++ {
					e += HeaderSize + len(m.payloads[i])
					ends = append(ends, e)
				}
				var keep int // records that survive
				if op == 6 {
					cut := len(b) - 1 - rng.IntN(min(len(b), 400))
					for keep < len(ends) && ends[keep] <= cut {
						keep++
					}
					b = b[:cut]
					trace = append(trace, "cut")
				} else {
					keep = len(ends) - 1
					lastStart := 0
					if keep > 0 {
						lastStart = ends[keep-1]
					}
					b[lastStart+rng.IntN(len(b)-lastStart)] ^= byte(1 + rng.IntN(255))
					trace = append(trace, "flip")
				}
				if base+uint64(keep) < maxCommit(m.commits) {
					// A committed record is durable; a crash cannot lose it.
					l = openLog(t, dir, opts)
					continue
				}
				if err := os.WriteFile(last, b, 0o644); err != nil {
					t.Fatal(err)
				}
				l = openLog(t, dir, opts)
				m.payloads = m.payloads[:base+uint64(keep)]
				r := l.Recovered()
				validEnd := 0
				if keep > 0 {
					validEnd = ends[keep-1]
				}
				if r.TruncatedBytes != int64(len(b)-validEnd) || (len(b) > validEnd) != (r.Segment == last) {
					fail("Recovered %+v, want %d bytes truncated", r, len(b)-validEnd)
				}
			case op == 8: // commit
				reader := []string{"a", "b"}[rng.IntN(2)]
				// Readers move forward from where they are (or from Start).
				lo := max(m.commits[reader], l.Start())
				off := lo + uint64(rng.IntN(len(m.payloads)-int(lo)+1))
				trace = append(trace, "commit")
				if err := l.Commit(reader, off); err != nil {
					fail("Commit(%s, %d): %v", reader, off, err)
				}
				m.commits[reader] = off
			default: // retention
				trace = append(trace, "retain")
				if err := l.Retain(); err != nil {
					fail("Retain: %v", err)
				}
			}
			// Check: dense offsets, intact payloads, nothing deleted that a
			// reader needs (unless MaxBytes).
			st := l.Stats()
			if st.End != uint64(len(m.payloads)) || st.Written != st.End {
				fail("Stats %+v, want End %d", st, len(m.payloads))
			}
			if mc, ok := minCommit(m.commits); ok && opts.MaxBytes == 0 && st.Start > mc {
				fail("Start %d past the smallest committed offset %d", st.Start, mc)
			}
			if len(m.commits) == 0 && opts.MaxBytes == 0 && st.Start != 0 {
				fail("Start %d with no reader", st.Start)
			}
			for next := st.Start; next < st.End; {
				recs, err := l.Read(next, 1+rng.IntN(50))
				if err != nil || len(recs) == 0 {
					fail("Read(%d) = %d records, %v", next, len(recs), err)
				}
				for _, r := range recs {
					if r.Offset != next || !bytes.Equal(r.Payload, m.payloads[next]) {
						fail("record %d: offset %d, payload of %d bytes, want %d bytes", next, r.Offset, len(r.Payload), len(m.payloads[next]))
					}
					next++
				}
			}
		}
		closeLog(t, l)
	}
}

func minCommit(c map[string]uint64) (uint64, bool) {
	first := true
	var m uint64
	for _, v := range c {
		if first || v < m {
			m, first = v, false
		}
	}
	return m, !first
}

func maxCommit(c map[string]uint64) uint64 {
	var m uint64
	for _, v := range c {
		m = max(m, v)
	}
	return m
}
