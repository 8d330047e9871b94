//go:build unix

package member

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestWriteSpecialInPlace: an output that is no regular file (/dev/null,
// a named pipe) is written in place; a rename over it would leave a
// regular file where the device or the pipe was. A regular file is still
// replaced whole.
func TestWriteSpecialInPlace(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no named pipes here: %v", err)
	}
	got := make(chan string, 1)
	go func() {
		f, err := os.Open(fifo)
		if err != nil {
			got <- err.Error()
			return
		}
		defer f.Close()
		b, _ := io.ReadAll(f)
		got <- string(b)
	}()
	regular := filepath.Join(t.TempDir(), "out.txt")
	if err := os.WriteFile(regular, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		mode os.FileMode // the type it must keep
	}{{os.DevNull, os.ModeCharDevice}, {fifo, os.ModeNamedPipe}, {regular, 0}} {
		if err := checkWritable(tc.path); err != nil {
			t.Fatalf("checkWritable(%s): %v", tc.path, err)
		}
		if err := writeAtomic(tc.path, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }); err != nil {
			t.Fatalf("writeAtomic(%s): %v", tc.path, err)
		}
		st, err := os.Stat(tc.path)
		if err != nil || st.Mode().Type()&tc.mode != tc.mode || (tc.mode == 0 && !st.Mode().IsRegular()) {
			t.Fatalf("%s is %v after the write (%v), want it to stay of type %v", tc.path, st.Mode(), err, tc.mode)
		}
	}
	if s := <-got; s != "new" {
		t.Errorf("the pipe's reader got %q, want \"new\"", s)
	}
	if b, err := os.ReadFile(regular); err != nil || string(b) != "new" {
		t.Errorf("the regular file holds %q, %v; want \"new\"", b, err)
	}
}
