package wal

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// file is what the log does with an open file: segments and the temporary
// file of a commit. *os.File is one; tests put other file layers under the
// log (see hooks.fs).
type file interface {
	io.ReaderAt
	io.WriterAt
	Truncate(size int64) error
	Sync() error
	Stat() (fs.FileInfo, error)
	Close() error
	Name() string
}

// fileSystem is what the log does with its directory: the operations of
// package os it uses, on the paths it uses them on. osFS, the real one, is
// the default; tests put other file layers under the log (see hooks.fs).
type fileSystem interface {
	// OpenFile is os.OpenFile. A failed open returns a nil file.
	OpenFile(name string, flag int, perm fs.FileMode) (file, error)
	ReadFile(name string) ([]byte, error)
	ReadDir(name string) ([]fs.DirEntry, error)
	// Mkdir is os.Mkdir: its errors match fs.ErrExist and fs.ErrNotExist.
	Mkdir(name string, perm fs.FileMode) error
	Rename(oldpath, newpath string) error
	Remove(name string) error
	// SyncDir fsyncs a directory, making the creations, renames and
	// deletions of entries in it durable.
	SyncDir(name string) error
	// Lock takes the lock of lockDir on the log in dir; unlock releases it.
	Lock(dir string) (unlock func(), err error)
}

// osFS is the file system of the operating system.
type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (file, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // not a nil *os.File in a non-nil file
	}
	return f, nil
}

func (osFS) ReadFile(name string) ([]byte, error)       { return os.ReadFile(name) }
func (osFS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }
func (osFS) Mkdir(name string, perm fs.FileMode) error  { return os.Mkdir(name, perm) }
func (osFS) Rename(oldpath, newpath string) error       { return os.Rename(oldpath, newpath) }
func (osFS) Remove(name string) error                   { return os.Remove(name) }

func (osFS) SyncDir(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func (osFS) Lock(dir string) (func(), error) {
	f, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	return func() { unlockDir(f) }, nil
}

// makeDir creates dir and its missing parents, as os.MkdirAll does, and
// fsyncs the parent of each directory it creates, and of dir if it was
// there: until then a new entry is not durable (dir may have been made by a
// process killed before its fsync), and a power cut could take the log's
// directory, with every segment fsynced in it, away.
func makeDir(fsys fileSystem, dir string) error {
	dir = filepath.Clean(dir)
	err := fsys.Mkdir(dir, 0o755)
	if parent := filepath.Dir(dir); errors.Is(err, fs.ErrNotExist) && parent != dir {
		if err := makeDir(fsys, parent); err != nil {
			return err
		}
		err = fsys.Mkdir(dir, 0o755)
	}
	if err != nil && !errors.Is(err, fs.ErrExist) { // a file there fails the lock
		return err
	}
	return fsys.SyncDir(filepath.Dir(dir))
}
