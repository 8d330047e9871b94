//go:build !unix

package main

import (
	"os"
	"testing"
)

// minorFaults is not known here.
func minorFaults(*os.ProcessState) float64 { return 0 }

// pageFaultCost is not measured here.
func pageFaultCost(testing.TB) float64 { return 0 }
