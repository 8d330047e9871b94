//go:build !unix

package wal

import "os"

// lockDir does not lock on this platform: the caller must make sure that
// one Log at a time opens a directory.
func lockDir(string) (*os.File, error) { return nil, nil }

func unlockDir(*os.File) {}
