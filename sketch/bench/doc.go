// Package bench compares the sketch package with other Go libraries:
// Count-Min against github.com/tylertreat/BoomFilters, and the HyperLogLog
// and Bloom wrappers against the bare libraries they wrap. It is a separate
// module so that BoomFilters stays out of acktor's own build; run
//
//	go test -run '^$' -bench . -benchtime 200ms -count 3
//
// in this directory. All benchmarks cycle through the same 2²⁰ random 8-byte
// keys.
package bench
