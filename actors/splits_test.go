package actors

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acktor/acktor/source"
)

// slowSplits is a file task's source that takes a while for each root, as
// a spout task on a busy member does.
type slowSplits struct {
	source.Source
	source.Splits
	read *atomic.Int64
}

func (s slowSplits) Next() (source.Root, error) {
	r, err := s.Source.Next()
	if err == nil {
		time.Sleep(100 * time.Microsecond)
		s.read.Add(1)
	}
	return r, err
}

// TestRunSharesSplits: a run hands a file's splits out to the spout tasks
// that ask, so a slow task reads little and a fast one the rest, every
// line exactly once.
func TestRunSharesSplits(t *testing.T) {
	const lines = 4000
	var text strings.Builder
	for i := range lines {
		fmt.Fprintf(&text, "line %d\n", i)
	}
	path := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(path, []byte(text.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	var slow atomic.Int64
	var mu sync.Mutex
	seen := map[string]int{}
	var b Builder
	b.Spout("lines", 2, func(task, tasks int) (source.Source, error) {
		src, err := source.File(path)(task, tasks)
		if err != nil || task != 0 {
			return src, err
		}
		return slowSplits{src, src.(source.Splits), &slow}, nil
	})
	b.Processor("p", 2, func(TaskInfo) (Processor, error) {
		return procFunc(func(tp *Tuple, c *Collector) {
			mu.Lock()
			seen[tp.Values()[0]]++
			mu.Unlock()
			c.Ack(tp)
		}), nil
	}).Shuffle("lines")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(2)
	cfg.Timeout = 10 * time.Second
	st := runTopology(t, topo, cfg)
	if st.Completed != lines || st.Replayed != 0 || len(seen) != lines {
		t.Fatalf("completed %d, replayed %d, %d distinct lines; want %d, 0, %d", st.Completed, st.Replayed, len(seen), lines, lines)
	}
	for line, n := range seen {
		if n != 1 {
			t.Errorf("%q processed %d times", line, n)
		}
	}
	if n := slow.Load(); n > lines/4 {
		t.Errorf("the slow spout task read %d of %d lines, want at most a quarter: the fast one should take its splits", n, lines)
	}
	t.Logf("the slow spout task read %d of %d lines", slow.Load(), lines)
}

// TestRunRefusesMixedSharing: a spout whose tasks' sources do not all share
// their splits (a wrapper that hides source.Splits on one) would read some
// splits twice; the run fails and says why.
func TestRunRefusesMixedSharing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(path, []byte(strings.Repeat("a line\n", 2000)), 0o600); err != nil {
		t.Fatal(err)
	}
	var b Builder
	b.Spout("lines", 2, func(task, tasks int) (source.Source, error) {
		src, err := source.File(path)(task, tasks)
		if err != nil || task != 0 {
			return src, err
		}
		return struct{ source.Source }{src}, nil // hides Splits
	})
	b.Processor("p", 1, func(TaskInfo) (Processor, error) {
		return procFunc(func(tp *Tuple, c *Collector) { c.Ack(tp) }), nil
	}).Shuffle("lines")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	_, err = tryTopology(t, topo, testConfig(1))
	if want := "spout lines: task 1 shares its source's splits and task 0 does not"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Run = %v, want an error saying %q", err, want)
	}
}
