package member

import (
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/acktor/acktor/source"
)

// countingSource hands out n roots and counts Closes.
type countingSource struct {
	n, next int
	done    []uint64
	closes  int
}

func (s *countingSource) Next() (source.Root, error) {
	if s.next == s.n {
		return source.Root{}, source.ErrNotReady
	}
	s.next++
	return source.Root{ID: uint64(s.next - 1), Payload: "x"}, nil
}
func (s *countingSource) Replay(uint64) (string, error) { return "x", nil }
func (s *countingSource) Done(id uint64)                { s.done = append(s.done, id) }
func (s *countingSource) Total() int64                  { return -1 }
func (s *countingSource) Close() error                  { s.closes++; return nil }

// TestIngestDrainSource: after stop the source hands out nothing more and
// closes (commits) its inner source once the roots out are done, before
// the spout's own Close.
func TestIngestDrainSource(t *testing.T) {
	inner := &countingSource{n: 3}
	f, stop := drainable(func(int, int) (source.Source, error) { return inner, nil })
	s, err := f(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := s.Next(); err != nil {
			t.Fatal(err)
		}
	}
	s.Done(0)
	stop()
	stop() // twice is fine
	if _, err := s.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("Next after stop: %v, want io.EOF", err)
	}
	if inner.closes != 0 {
		t.Fatal("closed with a root out")
	}
	s.Done(1)
	if inner.closes != 1 || !slices.Equal(inner.done, []uint64{0, 1}) {
		t.Fatalf("after the last root: %d closes, done %v", inner.closes, inner.done)
	}
	if err := s.Close(); err != nil || inner.closes != 1 {
		t.Fatalf("Close: %v, %d closes of the inner source", err, inner.closes)
	}
	if _, err := s.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("Next after Close: %v", err)
	}
}
