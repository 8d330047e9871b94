package tracker

import (
	"testing"

	"github.com/acktor/acktor/tracker/ring"
)

func TestSpringID(t *testing.T) {
	for _, c := range []struct {
		task uint32
		seq  uint64
	}{{0, 0}, {1, 1}, {ClientTasks, 1<<SpringBits - 1}, {1<<24 - 1, 1 << SpringBits}} {
		id := SpringID(c.task, c.seq)
		if TaskOf(id) != c.task || id&(1<<SpringBits-1) != c.seq&(1<<SpringBits-1) {
			t.Errorf("SpringID(%d, %d) = %#x: task %d", c.task, c.seq, id, TaskOf(id))
		}
	}
}

func TestAckerNumber(t *testing.T) {
	for _, c := range []struct {
		id   string
		n    int
		isOK bool
	}{
		{"acker/0", 0, true},
		{"acker/4095", 4095, true},
		{AckerIdentity(17), 17, true},
		{"acker/4096", 0, false},
		{"acker/-1", 0, false},
		{"acker/01", 0, false},
		{"acker/+1", 0, false},
		{"acker/", 0, false},
		{"spout/1", 0, false},
		{"ACKER/1", 0, false},
	} {
		if n, ok := AckerNumber(c.id); n != c.n || ok != c.isOK {
			t.Errorf("AckerNumber(%q) = %d, %v; want %d, %v", c.id, n, ok, c.n, c.isOK)
		}
	}
}

func TestParseRouting(t *testing.T) {
	for _, c := range []struct {
		name             string
		routing          uint64
		ackers, replicas int
		ok               bool
	}{
		{"of this scheme", RoutingOf(7, 64), 7, 64, true},
		{"the most", RoutingOf(MaxAckers, ring.MaxReplicas), MaxAckers, ring.MaxReplicas, true},
		{"another scheme", (RingScheme+1)<<48 | 7<<32 | 64, 0, 0, false},
		{"no ackers", RoutingOf(0, 64), 0, 0, false},
		{"too many ackers", RoutingOf(MaxAckers+1, 64), 0, 0, false},
		{"no replicas", RoutingOf(7, 0), 0, 0, false},
		{"too many replicas", RoutingOf(7, ring.MaxReplicas+1), 0, 0, false},
		{"none", 0, 0, 0, false},
	} {
		a, r, ok := ParseRouting(c.routing)
		if ok != c.ok || ok && (a != c.ackers || r != c.replicas) {
			t.Errorf("%s: ParseRouting(%#x) = %d, %d, %v", c.name, c.routing, a, r, ok)
		}
	}
}

// A directory routes every springId to one of its ackers, as a ring of the
// same ackers does, and directories of equal routing route alike.
func TestDirectory(t *testing.T) {
	d := NewDirectory(3, 5, 0)
	if d.Routing != RoutingOf(5, ring.DefaultReplicas) {
		t.Fatalf("routing %#x", d.Routing)
	}
	r := ring.New(0)
	for n := range 5 {
		r.Add(AckerIdentity(n))
		_ = r.SetState(AckerIdentity(n), ring.Running)
	}
	again := NewDirectory(9, 5, ring.DefaultReplicas)
	seen := map[int]int{}
	for s := range uint64(20_000) {
		id := SpringID(uint32(s%4), s*7919)
		n := d.AckerOf(id)
		if want, _ := r.Locate(id); AckerIdentity(n) != want || again.AckerOf(id) != n {
			t.Fatalf("springId %#x: acker %d, the ring says %s, an equal directory %d", id, n, want, again.AckerOf(id))
		}
		seen[n]++
	}
	if len(seen) != 5 {
		t.Fatalf("roots reached %d of 5 ackers", len(seen))
	}
	for _, c := range []struct {
		version, routing uint64
		newer            bool
	}{
		{4, 0, true}, {2, ^uint64(0), false}, {3, d.Routing + 1, true}, {3, d.Routing, false}, {3, d.Routing - 1, false},
	} {
		if got := d.OlderThan(c.version, c.routing); got != c.newer {
			t.Errorf("OlderThan(%d, %#x) = %v", c.version, c.routing, got)
		}
	}
	if off := NewDirectory(1, 0, 0); off.Routing != 0 {
		t.Errorf("no ackers: routing %#x, want 0", off.Routing)
	}
}
