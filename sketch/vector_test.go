package sketch_test

import (
	"errors"
	"math"
	"testing"

	"github.com/acktor/acktor/sketch"
)

// A Vector is exact: every estimate equals the true count, whatever the
// number of distinct keys.
func TestVectorExact(t *testing.T) {
	v := sketch.NewVector()
	updates, exact := stream(1, 20000, 1000)
	var total uint64
	for _, u := range updates {
		v.Add(u.key, u.count)
		total += u.count
	}
	for k, a := range exact {
		if got := v.Estimate([]byte(k)); got != a {
			t.Fatalf("key %x: estimate %d, true %d", k, got, a)
		}
	}
	if v.Len() != len(exact) || v.Total() != total || v.Dropped() != 0 {
		t.Errorf("Len %d, Total %d, Dropped %d; want %d, %d, 0", v.Len(), v.Total(), v.Dropped(), len(exact), total)
	}
	if v.Estimate([]byte("never added")) != 0 {
		t.Error("a key never added has a count")
	}
	v.Add([]byte("zero"), 0)
	if v.Len() != len(exact) {
		t.Error("Add with count 0 created a column")
	}
}

// Beyond MaxKeys new keys are dropped, counted in Dropped; known keys still
// count.
func TestVectorMaxKeys(t *testing.T) {
	v := sketch.NewVector(sketch.WithMaxKeys(2))
	for _, k := range []string{"a", "b", "c", "a", "d"} {
		v.Add([]byte(k), 10)
	}
	if v.Len() != 2 || v.Estimate([]byte("a")) != 20 || v.Estimate([]byte("c")) != 0 || v.Total() != 30 || v.Dropped() != 20 {
		t.Errorf("Len %d, a %d, c %d, Total %d, Dropped %d; want 2, 20, 0, 30, 20",
			v.Len(), v.Estimate([]byte("a")), v.Estimate([]byte("c")), v.Total(), v.Dropped())
	}
	if sketch.NewVector(sketch.WithMaxKeys(0)).MaxKeys() != sketch.DefaultVectorMaxKeys || new(sketch.Vector).MaxKeys() != sketch.DefaultVectorMaxKeys {
		t.Error("the default bound is not DefaultVectorMaxKeys")
	}
	s := sketch.NewVector()
	s.Add([]byte("a"), math.MaxUint64-1)
	s.Add([]byte("a"), 2)
	if s.Estimate([]byte("a")) != math.MaxUint64 || s.Total() != math.MaxUint64 {
		t.Error("counts do not saturate")
	}
}

// Merging the vectors of the parts of a stream gives the vector of the whole
// stream, dictionary order included.
func TestVectorMergeIsVectorOfConcatenation(t *testing.T) {
	updates, _ := stream(2, 3000, 100)
	whole, merged := sketch.NewVector(), sketch.NewVector()
	for _, u := range updates {
		whole.Add(u.key, u.count)
	}
	for p := range 3 {
		part := sketch.NewVector()
		for _, u := range updates[p*len(updates)/3 : (p+1)*len(updates)/3] {
			part.Add(u.key, u.count)
		}
		if err := merged.Merge(part); err != nil {
			t.Fatal(err)
		}
	}
	if !sameEncoding(t, merged, whole) {
		t.Error("merged vector differs from the vector of the whole stream")
	}
	if err := merged.Merge(merged); err != nil || merged.Total() != 2*whole.Total() {
		t.Errorf("self-merge: %v, total %d, want %d", err, merged.Total(), 2*whole.Total())
	}
	if err := merged.Merge(nil); !errors.Is(err, sketch.ErrMismatch) {
		t.Errorf("Merge(nil) error = %v, want ErrMismatch", err)
	}
}

func TestVectorRoundTrip(t *testing.T) {
	for _, v := range []*sketch.Vector{new(sketch.Vector), sketch.NewVector(sketch.WithMaxKeys(5))} {
		for i := range uint64(9) {
			v.Add(key(i%7), i+1)
		}
		v.Add(nil, 3) // the empty key is a key
		var back sketch.Vector
		if err := back.UnmarshalBinary(mustMarshal(t, v)); err != nil {
			t.Fatal(err)
		}
		if !sameEncoding(t, v, &back) || back.Estimate(key(1)) != v.Estimate(key(1)) || back.MaxKeys() != v.MaxKeys() {
			t.Error("round trip changed the vector")
		}
	}
}

func TestVectorUnmarshalRejects(t *testing.T) {
	v := sketch.NewVector(sketch.WithMaxKeys(4))
	v.Add([]byte("ab"), 5)
	v.Add([]byte("cd"), 6)
	good := mustMarshal(t, v) // "VEC" 1, max 4, total 11, dropped 0, n 2, 2 "ab" 5, 2 "cd" 6
	edit := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"cut header", good[:6]},
		{"zero max keys", edit(func(b []byte) { b[4] = 0 })},
		{"more columns than max keys", edit(func(b []byte) { b[4] = 1 })},
		{"columns cannot fit", edit(func(b []byte) { b[4], b[7] = 100, 50 })},
		{"cut column", good[:len(good)-1]},
		{"key longer than data", edit(func(b []byte) { b[12] = 50 })},
		{"repeated key", edit(func(b []byte) { b[13], b[14] = 'a', 'b' })},
		{"zero count", edit(func(b []byte) { b[len(b)-1] = 0 })},
		{"total mismatch", edit(func(b []byte) { b[5] = 12 })},
		{"trailing byte", append(append([]byte(nil), good...), 0)},
		{"overlong varint", append(append([]byte(nil), good[:4]...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var back sketch.Vector
			err := back.UnmarshalBinary(tc.data)
			if !errors.Is(err, sketch.ErrCorrupt) {
				t.Fatalf("error = %v, want ErrCorrupt", err)
			}
			t.Log(err)
		})
	}
}

func TestVectorZeroAllocs(t *testing.T) {
	v := sketch.NewVector()
	k := []byte("some key")
	v.Add(k, 1)
	if n := testing.AllocsPerRun(100, func() { v.Add(k, 1); _ = v.Estimate(k) }); n != 0 {
		t.Errorf("Add and Estimate of a known key: %v allocations", n)
	}
}
