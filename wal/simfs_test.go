package wal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// errPowerOff is what every operation of a simFS returns while the power is
// off.
var errPowerOff = fmt.Errorf("simulated power cut: %w", syscall.EIO)

// simFS is a file system in memory that loses, at a power cut, what a
// POSIX file system may lose (ext4 among them), the ways the log must
// survive:
//
//   - File data written since the file was last fsynced: the writes and
//     truncations since then survive up to a seeded point (none, some, or
//     all of them, in order), and the write after that point may survive
//     torn at any byte: cut short there, or with the file's size covering
//     it and zeros past the tear (its size was logged, its data not).
//   - Directory entries created, renamed or removed since the directory was
//     last fsynced: the changes survive up to a seeded point (a journal
//     commits them in order; a rename is one change). So a file or a
//     directory whose parent was not fsynced since its creation may vanish,
//     with all it holds, a removed file may come back, and a rename may
//     revert.
//
// An fsync of a file makes its data durable, not its name; an fsync of a
// directory makes its entries durable, not its files' data. Not modelled:
// a later unsynced write of a file surviving an earlier one that does not
// (pages written back out of order, leaving a hole).
//
// Every operation that changes something is a step. The power goes off at
// step cutAt (0: never; a write cut there is applied in part first): that
// operation and every one after it fail with errPowerOff, until crash
// decides what survived and boots again, or kill boots again with all
// that was written (the process died, not the machine). Paths are
// slash-separated and absolute; "/" is there from the start, durably.
type simFS struct {
	mu     sync.Mutex
	rng    *rand.Rand // the seeded choices of tears and of what survives
	now    func() time.Time
	root   *simInode
	boot   int   // handles opened before the last boot fail
	steps  int   // operations that changed something so far
	dirOps []int // the steps that changed a directory's entries
	cutAt  int
	off    bool
	locked map[string]bool
	// gate, if set, runs before each write to a segment (a .log file),
	// without the simFS's lock: tests hold the writer there.
	gate func()
}

// simInode is a file or a directory of a simFS.
type simInode struct {
	dir bool

	// A file.
	data    []byte     // what reads see
	synced  []byte     // what survives a power cut
	pending []simWrite // writes and truncations since the last fsync
	mtime   time.Time

	// A directory.
	entries map[string]*simInode // what lookups see
	durable map[string]*simInode // what survives a power cut
	changes []simChange          // entry changes since the last fsync
}

// simWrite is a write of data at off, or a truncation to size.
type simWrite struct {
	truncate bool
	off      int64
	data     []byte
	size     int64
}

func (w simWrite) apply(b []byte) []byte {
	if w.truncate {
		if w.size <= int64(len(b)) {
			return b[:w.size]
		}
		return append(b, make([]byte, w.size-int64(len(b)))...)
	}
	if end := w.off + int64(len(w.data)); end > int64(len(b)) {
		b = append(b, make([]byte, end-int64(len(b)))...)
	}
	copy(b[w.off:], w.data)
	return b
}

// simChange sets the entry name to ino, or removes it if ino is nil; a
// rename removes the entry from in the same change.
type simChange struct {
	name string
	ino  *simInode
	from string
}

func (c simChange) apply(entries map[string]*simInode) {
	if c.from != "" {
		delete(entries, c.from)
	}
	if c.ino == nil {
		delete(entries, c.name)
	} else {
		entries[c.name] = c.ino
	}
}

func newSimDir() *simInode {
	return &simInode{dir: true, entries: map[string]*simInode{}, durable: map[string]*simInode{}}
}

// newSimFS returns an empty simFS whose choices come from seed.
func newSimFS(seed uint64, now func() time.Time) *simFS {
	return &simFS{rng: rand.New(rand.NewPCG(seed, 0x5eed)), now: now, root: newSimDir(), locked: map[string]bool{}}
}

// clone returns a copy of s with the power on and no cut set, whose choices
// come from seed.
func (s *simFS) clone(seed uint64) *simFS {
	s.mu.Lock()
	defer s.mu.Unlock()
	copies := map[*simInode]*simInode{}
	var cp func(n *simInode) *simInode
	cp = func(n *simInode) *simInode {
		if n == nil {
			return nil
		}
		if c, ok := copies[n]; ok {
			return c
		}
		c := &simInode{dir: n.dir, data: slices.Clone(n.data), synced: slices.Clone(n.synced),
			pending: slices.Clone(n.pending), mtime: n.mtime}
		copies[n] = c
		if n.dir {
			c.entries, c.durable = map[string]*simInode{}, map[string]*simInode{}
			for k, v := range n.entries {
				c.entries[k] = cp(v)
			}
			for k, v := range n.durable {
				c.durable[k] = cp(v)
			}
			for _, ch := range n.changes {
				ch.ino = cp(ch.ino)
				c.changes = append(c.changes, ch)
			}
		}
		return c
	}
	c := newSimFS(seed, s.now)
	c.root, c.boot = cp(s.root), s.boot
	return c
}

// powerOff cuts the power now, if it is on.
func (s *simFS) powerOff() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.off = true
}

// isOff says whether the power is off.
func (s *simFS) isOff() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.off
}

// stepCount is the number of steps so far.
func (s *simFS) stepCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.steps
}

// step counts an operation that changes something. It returns errPowerOff
// if the power is off, or goes off now: then cut is true, and the
// operation may take effect in part. Called under s.mu.
func (s *simFS) step() (cut bool, err error) {
	if s.off {
		return false, errPowerOff
	}
	s.steps++
	if s.steps == s.cutAt {
		s.off = true
		return true, errPowerOff
	}
	return false, nil
}

// crash decides, with the seeded choices, what survived the power cut, and
// boots again: the power is on, the survivors are all there is (and
// durable), handles opened before fail and locks are free. It returns what
// the cut took, one line a file or directory.
func (s *simFS) crash() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.off, s.cutAt = false, 0
	s.boot++
	s.locked = map[string]bool{}
	var lost []string
	seen := map[*simInode]bool{}
	var survive func(p string, n *simInode)
	survive = func(p string, n *simInode) {
		if seen[n] {
			return
		}
		seen[n] = true
		if !n.dir {
			data := slices.Clone(n.synced)
			k := s.rng.IntN(len(n.pending) + 1)
			for _, w := range n.pending[:k] {
				data = w.apply(data)
			}
			tear := ""
			if k < len(n.pending) && !n.pending[k].truncate && s.rng.IntN(2) == 0 {
				w := n.pending[k]
				torn := simWrite{off: w.off, data: w.data[:s.rng.IntN(len(w.data)+1)]}
				data = torn.apply(data)
				tear = fmt.Sprintf(", the next torn after %d of its %d bytes", len(torn.data), len(w.data))
				if s.rng.IntN(2) == 0 { // the size got there, the data not
					data = simWrite{truncate: true, size: max(int64(len(data)), w.off+int64(len(w.data)))}.apply(data)
					tear += " with zeros past the tear"
				}
			}
			if k < len(n.pending) {
				lost = append(lost, fmt.Sprintf("%s: kept %d of %d unsynced writes%s: %d bytes, was %d", p, k, len(n.pending), tear, len(data), len(n.data)))
			}
			n.data, n.synced, n.pending = data, slices.Clone(data), nil
			return
		}
		entries := maps.Clone(n.durable)
		k := s.rng.IntN(len(n.changes) + 1)
		for _, c := range n.changes[:k] {
			c.apply(entries)
		}
		if k < len(n.changes) {
			var undone []string
			for _, c := range n.changes[k:] {
				switch {
				case c.from != "":
					undone = append(undone, "rename "+c.from+" to "+c.name)
				case c.ino == nil:
					undone = append(undone, "removal of "+c.name)
				default:
					undone = append(undone, "creation of "+c.name)
				}
			}
			lost = append(lost, fmt.Sprintf("%s: undid %s", p, strings.Join(undone, ", ")))
		}
		n.entries, n.durable, n.changes = entries, maps.Clone(entries), nil
		for _, name := range slices.Sorted(maps.Keys(entries)) {
			survive(path.Join(p, name), entries[name])
		}
	}
	survive("/", s.root)
	return lost
}

// kill ends the process, not the machine: what it wrote stays as it is,
// durable or not, for the next boot to find (and a later cut to take), and
// its handles and locks are gone.
func (s *simFS) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.off, s.cutAt = false, 0
	s.boot++
	s.locked = map[string]bool{}
}

// lookup finds the inode at p. Called under s.mu.
func (s *simFS) lookup(p string) (*simInode, error) {
	n := s.root
	for _, name := range strings.Split(strings.Trim(path.Clean(p), "/"), "/") {
		if name == "" {
			continue
		}
		if !n.dir {
			return nil, syscall.ENOTDIR
		}
		if n = n.entries[name]; n == nil {
			return nil, fs.ErrNotExist
		}
	}
	return n, nil
}

// parent finds the directory holding p, and p's name in it. Called under
// s.mu.
func (s *simFS) parent(p string) (*simInode, string, error) {
	p = path.Clean(p)
	d, err := s.lookup(path.Dir(p))
	if err == nil && !d.dir {
		err = syscall.ENOTDIR
	}
	return d, path.Base(p), err
}

// change changes an entry of directory d, at the step just counted.
// Called under s.mu.
func (s *simFS) change(d *simInode, c simChange) {
	c.apply(d.entries)
	d.changes = append(d.changes, c)
	s.dirOps = append(s.dirOps, s.steps)
}

// dirSteps returns the steps after from that changed a directory's entries.
func (s *simFS) dirSteps(from int) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, _ := slices.BinarySearch(s.dirOps, from+1)
	return slices.Clone(s.dirOps[i:])
}

// write writes or truncates file n. Called under s.mu.
func (n *simInode) write(w simWrite, now time.Time) {
	w.data = slices.Clone(w.data)
	n.data = w.apply(n.data)
	n.pending = append(n.pending, w)
	n.mtime = now
}

func (s *simFS) OpenFile(name string, flag int, perm fs.FileMode) (file, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.off {
		return nil, errPowerOff
	}
	pathErr := func(err error) error { return &fs.PathError{Op: "open", Path: name, Err: err} }
	d, base, err := s.parent(name)
	if err != nil {
		return nil, pathErr(err)
	}
	n := d.entries[base]
	switch {
	case n == nil && flag&os.O_CREATE == 0:
		return nil, pathErr(fs.ErrNotExist)
	case n != nil && flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL:
		return nil, pathErr(fs.ErrExist)
	case n != nil && n.dir:
		return nil, pathErr(syscall.EISDIR)
	case n == nil:
		if _, err := s.step(); err != nil {
			return nil, err
		}
		n = &simInode{mtime: s.now()}
		s.change(d, simChange{name: base, ino: n})
	case flag&os.O_TRUNC != 0:
		if _, err := s.step(); err != nil {
			return nil, err
		}
		n.write(simWrite{truncate: true}, s.now())
	}
	return &simFile{fs: s, ino: n, name: name, boot: s.boot, writable: flag&(os.O_WRONLY|os.O_RDWR) != 0}, nil
}

func (s *simFS) ReadFile(name string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.off {
		return nil, errPowerOff
	}
	n, err := s.lookup(name)
	switch {
	case err != nil:
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	case n.dir:
		return nil, &fs.PathError{Op: "read", Path: name, Err: syscall.EISDIR}
	}
	return slices.Clone(n.data), nil
}

func (s *simFS) ReadDir(name string) ([]fs.DirEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.off {
		return nil, errPowerOff
	}
	d, err := s.lookup(name)
	if err == nil && !d.dir {
		err = syscall.ENOTDIR
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	var out []fs.DirEntry
	for _, base := range slices.Sorted(maps.Keys(d.entries)) {
		out = append(out, fs.FileInfoToDirEntry(infoOf(base, d.entries[base])))
	}
	return out, nil
}

func (s *simFS) Mkdir(name string, perm fs.FileMode) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.off {
		return errPowerOff
	}
	d, base, err := s.parent(name)
	if err == nil && d.entries[base] != nil {
		err = fs.ErrExist
	}
	if err != nil {
		return &fs.PathError{Op: "mkdir", Path: name, Err: err}
	}
	if _, err := s.step(); err != nil {
		return err
	}
	s.change(d, simChange{name: base, ino: newSimDir()})
	return nil
}

func (s *simFS) Rename(oldpath, newpath string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.off {
		return errPowerOff
	}
	linkErr := func(err error) error { return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err} }
	d, from, err := s.parent(oldpath)
	if err != nil {
		return linkErr(err)
	}
	d2, to, err := s.parent(newpath)
	switch {
	case err != nil:
		return linkErr(err)
	case d2 != d:
		return linkErr(errors.New("simFS: renames across directories are not modelled"))
	case d.entries[from] == nil:
		return linkErr(fs.ErrNotExist)
	case d.entries[from].dir:
		return linkErr(errors.New("simFS: renames of directories are not modelled"))
	}
	if _, err := s.step(); err != nil {
		return err
	}
	s.change(d, simChange{name: to, ino: d.entries[from], from: from})
	return nil
}

func (s *simFS) Remove(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.off {
		return errPowerOff
	}
	d, base, err := s.parent(name)
	if err == nil && d.entries[base] == nil {
		err = fs.ErrNotExist
	}
	if err == nil && d.entries[base].dir {
		err = errors.New("simFS: removing directories is not modelled")
	}
	if err != nil {
		return &fs.PathError{Op: "remove", Path: name, Err: err}
	}
	if _, err := s.step(); err != nil {
		return err
	}
	s.change(d, simChange{name: base})
	return nil
}

func (s *simFS) SyncDir(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.off {
		return errPowerOff
	}
	d, err := s.lookup(name)
	if err == nil && !d.dir {
		err = syscall.ENOTDIR
	}
	if err != nil {
		return &fs.PathError{Op: "open", Path: name, Err: err}
	}
	if _, err := s.step(); err != nil {
		return err
	}
	d.durable, d.changes = maps.Clone(d.entries), nil
	return nil
}

func (s *simFS) Lock(dir string) (func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dir = path.Clean(dir)
	if s.locked[dir] {
		return nil, fmt.Errorf("simFS: %s is locked", dir)
	}
	s.locked[dir] = true
	boot := s.boot
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.boot == boot {
			delete(s.locked, dir)
		}
	}, nil
}

// simFile is an open file of a simFS.
type simFile struct {
	fs       *simFS
	ino      *simInode
	name     string
	boot     int
	writable bool
	closed   bool
}

// check says why the file cannot be used now, if it cannot. Called under
// f.fs.mu.
func (f *simFile) check(op string) error {
	var err error
	switch {
	case f.fs.off:
		return errPowerOff
	case f.closed:
		err = os.ErrClosed
	case f.boot != f.fs.boot:
		err = errors.New("simFS: file opened before a power cut")
	}
	if err != nil {
		return &fs.PathError{Op: op, Path: f.name, Err: err}
	}
	return nil
}

func (f *simFile) Name() string { return f.name }

func (f *simFile) ReadAt(b []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read"); err != nil {
		return 0, err
	}
	if off >= int64(len(f.ino.data)) {
		return 0, io.EOF
	}
	n := copy(b, f.ino.data[off:])
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

func (f *simFile) WriteAt(b []byte, off int64) (int, error) {
	if f.fs.gate != nil && strings.HasSuffix(f.name, segmentSuffix) {
		f.fs.gate()
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write"); err != nil {
		return 0, err
	}
	if !f.writable {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: syscall.EBADF}
	}
	if cut, err := f.fs.step(); err != nil {
		if cut { // the power went off during this write
			k := f.fs.rng.IntN(len(b) + 1)
			f.ino.write(simWrite{off: off, data: b[:k]}, f.fs.now())
		}
		return 0, err
	}
	f.ino.write(simWrite{off: off, data: b}, f.fs.now())
	return len(b), nil
}

func (f *simFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate"); err != nil {
		return err
	}
	if !f.writable {
		return &fs.PathError{Op: "truncate", Path: f.name, Err: syscall.EINVAL}
	}
	if _, err := f.fs.step(); err != nil {
		return err
	}
	f.ino.write(simWrite{truncate: true, size: size}, f.fs.now())
	return nil
}

func (f *simFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("sync"); err != nil {
		return err
	}
	if _, err := f.fs.step(); err != nil {
		return err
	}
	f.ino.synced, f.ino.pending = slices.Clone(f.ino.data), nil
	return nil
}

func (f *simFile) Stat() (fs.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("stat"); err != nil {
		return nil, err
	}
	return infoOf(path.Base(f.name), f.ino), nil
}

func (f *simFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return &fs.PathError{Op: "close", Path: f.name, Err: os.ErrClosed}
	}
	f.closed = true
	return nil
}

// simInfo is the fs.FileInfo of an inode of a simFS, as it was when taken.
type simInfo struct {
	name  string
	dir   bool
	size  int64
	mtime time.Time
}

func infoOf(name string, n *simInode) simInfo {
	return simInfo{name: name, dir: n.dir, size: int64(len(n.data)), mtime: n.mtime}
}

func (i simInfo) Name() string       { return i.name }
func (i simInfo) Size() int64        { return i.size }
func (i simInfo) ModTime() time.Time { return i.mtime }
func (i simInfo) IsDir() bool        { return i.dir }
func (i simInfo) Sys() any           { return nil }

func (i simInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}

// The simFS loses at a power cut what it says it may, and only that: over
// seeds, each outcome it allows comes up, and none it does not.
func TestSimFS(t *testing.T) {
	now := func() time.Time { return time.Unix(0, 0) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// writeSynced makes the file name hold data, fsynced (its directory not).
	writeSynced := func(s *simFS, name, data string) {
		t.Helper()
		f, err := s.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
		must(err)
		_, err = f.WriteAt([]byte(data), 0)
		must(err)
		must(f.Sync())
	}
	for _, tc := range []struct {
		name string
		// do prepares /d (created and fsynced) and leaves it as the power
		// cut finds it.
		do func(s *simFS)
		// outcome names what survived in /d.
		outcome func(s *simFS) string
		want    []string // every outcome seen over the seeds, sorted
		killed  string   // the outcome of a kill: all that was written
	}{
		{
			name: "unsynced writes",
			do: func(s *simFS) {
				f, err := s.OpenFile("/d/f", os.O_RDWR|os.O_CREATE, 0o644)
				must(err)
				must(s.SyncDir("/d"))
				_, err = f.WriteAt([]byte("synced."), 0)
				must(err)
				must(f.Sync())
				_, err = f.WriteAt([]byte("one."), 7)
				must(err)
				_, err = f.WriteAt([]byte("two."), 11)
				must(err)
			},
			outcome: func(s *simFS) string {
				b, err := s.ReadFile("/d/f")
				must(err)
				switch got := string(b); {
				case got == "synced.", got == "synced.one.", got == "synced.one.two.":
					return got
				case strings.HasPrefix("synced.one.two.", got):
					return "torn"
				case strings.HasPrefix(got, "synced.") && strings.HasSuffix(got, "\x00") &&
					(len(got) == len("synced.one.") || len(got) == len("synced.one.two.")):
					return "torn with zeros"
				}
				return fmt.Sprintf("%q", b)
			},
			want:   []string{"synced.", "synced.one.", "synced.one.two.", "torn", "torn with zeros"},
			killed: "synced.one.two.",
		},
		{
			name: "creation not fsynced in its directory",
			do:   func(s *simFS) { writeSynced(s, "/d/f", "data") },
			outcome: func(s *simFS) string {
				b, err := s.ReadFile("/d/f")
				if errors.Is(err, fs.ErrNotExist) {
					return "vanished"
				}
				must(err)
				return string(b)
			},
			want:   []string{"data", "vanished"},
			killed: "data",
		},
		{
			name: "rename not fsynced in its directory",
			do: func(s *simFS) {
				for _, name := range []string{"/d/f", "/d/f.tmp"} {
					writeSynced(s, name, path.Base(name))
				}
				must(s.SyncDir("/d"))
				must(s.Rename("/d/f.tmp", "/d/f"))
			},
			outcome: func(s *simFS) string {
				entries, err := s.ReadDir("/d")
				must(err)
				b, err := s.ReadFile("/d/f")
				must(err)
				return fmt.Sprintf("%d entries, f holds %s", len(entries), b)
			},
			want:   []string{"1 entries, f holds f.tmp", "2 entries, f holds f"},
			killed: "1 entries, f holds f.tmp",
		},
		{
			name: "everything fsynced",
			do: func(s *simFS) {
				writeSynced(s, "/d/f", "data")
				must(s.Mkdir("/d/sub", 0o755))
				must(s.SyncDir("/d"))
			},
			outcome: func(s *simFS) string {
				b, err := s.ReadFile("/d/f")
				must(err)
				entries, err := s.ReadDir("/d")
				must(err)
				return fmt.Sprintf("%s, %d entries", b, len(entries))
			},
			want:   []string{"data, 2 entries"},
			killed: "data, 2 entries",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := map[string]bool{}
			for seed := range uint64(64) {
				s := newSimFS(seed, now)
				must(s.Mkdir("/d", 0o755))
				must(s.SyncDir("/"))
				tc.do(s)
				// What a kill leaves is all that was written.
				k := s.clone(seed)
				k.kill()
				if got := tc.outcome(k); got != tc.killed {
					t.Fatalf("seed %d: after a kill, %s; want %s", seed, got, tc.killed)
				}
				s.crash()
				seen[tc.outcome(s)] = true
			}
			if got := slices.Sorted(maps.Keys(seen)); !slices.Equal(got, tc.want) {
				t.Fatalf("outcomes over 64 seeds: %q, want %q", got, tc.want)
			}
		})
	}
	// While the power is off every operation fails; after it, files opened
	// before fail, and the step cut was taken is counted.
	s := newSimFS(1, now)
	f, err := s.OpenFile("/f", os.O_RDWR|os.O_CREATE, 0o644)
	must(err)
	s.cutAt = s.stepCount() + 1
	if _, err := f.WriteAt([]byte("x"), 0); !errors.Is(err, errPowerOff) {
		t.Fatalf("write at the cut: %v", err)
	}
	if err := s.SyncDir("/"); !errors.Is(err, errPowerOff) {
		t.Fatalf("SyncDir with the power off: %v", err)
	}
	s.crash()
	if _, err := f.WriteAt([]byte("x"), 0); err == nil || errors.Is(err, errPowerOff) {
		t.Fatalf("write to a file opened before the cut: %v", err)
	}
}
