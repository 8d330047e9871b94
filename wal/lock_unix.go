//go:build unix

package wal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes an exclusive flock on dir/lock, so that a second Open of the
// same log, in this process or another, fails instead of corrupting it. The
// kernel drops the lock when the process dies.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("wal: %s is open elsewhere (%s is locked)", dir, path)
		}
		return nil, fmt.Errorf("wal: locking %s: %w", path, err)
	}
	return f, nil
}

// unlockDir releases the lock of lockDir.
func unlockDir(f *os.File) {
	if f != nil {
		_ = f.Close()
	}
}
