// Package assert states the invariants of acktor's pure cores (the ledger,
// the ring, the acker). A broken invariant is a bug in acktor, not bad
// input: bad input gets an error or a counter where it enters. That panics,
// loudly, so that a test driving the core fails at the broken step; what an
// actor does with such a panic is decided once, in package actors
// (panics.go).
package assert

import "fmt"

// Invariant is the panic of a broken invariant.
type Invariant struct{ What string }

func (i Invariant) Error() string { return "acktor: invariant broken: " + i.What }

// That panics with the Invariant what unless cond holds. what is a
// constant, so that a check that holds costs a compare and nothing else
// (no formatting, no allocation): it runs on hot paths.
func That(cond bool, what string) {
	if !cond {
		panic(Invariant{What: what})
	}
}

// Failf panics with a broken Invariant described by format and args, for a
// caller that tested the condition itself.
func Failf(format string, args ...any) {
	panic(Invariant{What: fmt.Sprintf(format, args...)})
}
