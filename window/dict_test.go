package window

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// dictModel drives a dict as Sliding does (keys[col] set before insert,
// remove before keys[col] changes) beside a Go map.
type dictModel struct {
	d    dict
	want map[string]uint32
	free []uint32 // columns whose key was removed
}

func newDictModel() *dictModel { return &dictModel{d: newDict(), want: map[string]uint32{}} }

func (m *dictModel) put(t *testing.T, key string) {
	t.Helper()
	h := m.d.hash([]byte(key))
	at, ok := m.d.find([]byte(key), h)
	if _, known := m.want[key]; ok != known {
		t.Fatalf("find(%q) = %v, the map says %v", key, ok, known)
	}
	if ok {
		return
	}
	col := uint32(len(m.d.keys))
	if n := len(m.free); n > 0 {
		col, m.free = m.free[n-1], m.free[:n-1]
		m.d.keys[col] = key
	} else {
		m.d.keys = append(m.d.keys, key)
	}
	m.d.insert([]byte(key), h, at, col)
	m.want[key] = col
}

func (m *dictModel) remove(key string) {
	col, ok := m.want[key]
	if !ok {
		return
	}
	m.d.remove(col)
	m.d.keys[col] = ""
	delete(m.want, key)
	m.free = append(m.free, col)
}

// check compares every key the dict ever held with the map, and the slot
// count with the map's size.
func (m *dictModel) check(t *testing.T, keys []string) {
	t.Helper()
	for _, k := range keys {
		col, ok := m.d.lookup([]byte(k))
		if want, known := m.want[k]; ok != known || col != want {
			t.Fatalf("lookup(%q) = %d, %v; want %d, %v", k, col, ok, want, known)
		}
	}
	used := 0
	for _, s := range m.d.slots {
		if s.col != 0 {
			used++
		}
	}
	if used != len(m.want) || m.d.n != len(m.want) {
		t.Fatalf("%d slots used, n = %d, %d keys", used, m.d.n, len(m.want))
	}
}

func TestDictKeyLengths(t *testing.T) {
	long := strings.Repeat("k", inlineKey)
	for _, tc := range []struct {
		name string
		keys []string
	}{
		{"empty key", []string{"", "a"}},
		{"inline and long at the boundary", []string{long[:inlineKey-1], long, long + "x", long + "y", long + "xy"}},
		{"long keys sharing the inline prefix", []string{long + "1", long + "2", long + "12", long + "21"}},
		{"same bytes, other lengths", []string{"ab", "ab\x00", "a", "abc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newDictModel()
			for _, k := range tc.keys {
				m.put(t, k)
				m.check(t, tc.keys)
			}
			for _, k := range tc.keys {
				m.remove(k)
				m.check(t, tc.keys)
			}
		})
	}
}

// TestDictProperty: random inserts and removes (which shift slots back)
// over a key space small enough to collide often, across resizes, with
// inline and long keys, always agree with a Go map.
func TestDictProperty(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 9))
			keys := make([]string, 50+rng.IntN(2000))
			for i := range keys {
				keys[i] = fmt.Sprintf("%0*d", 1+rng.IntN(30), i)
			}
			m := newDictModel()
			for op := range 20 * len(keys) {
				k := keys[rng.IntN(len(keys))]
				if rng.IntN(3) == 0 {
					m.remove(k)
				} else {
					m.put(t, k)
				}
				if op%97 == 0 {
					m.check(t, keys)
				}
			}
			m.check(t, keys)
		})
	}
}
