//go:build unix

package main

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// minorFaults is how many minor page faults a finished process took: pages
// it touched for the first time, most of them its heap's as it grew.
func minorFaults(st *os.ProcessState) float64 {
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
		return float64(ru.Minflt)
	}
	return 0
}

// pageFaultCost is what a first touch of a page of fresh anonymous memory
// costs on this machine, in µs: 64 MB mapped and written a byte a page.
// A virtual machine can make it tens of times a bare one's.
func pageFaultCost(tb testing.TB) float64 {
	const size = 64 << 20
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		tb.Fatalf("mapping memory to time page faults: %v", err)
	}
	defer func() { _ = syscall.Munmap(mem) }()
	page := os.Getpagesize()
	start := time.Now()
	for i := 0; i < size; i += page {
		mem[i] = 1
	}
	return float64(time.Since(start).Nanoseconds()) / float64(size/page) / 1e3
}
