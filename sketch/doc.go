// Package sketch holds the speed layer's summaries of a stream: Count-Min
// (per-key counts, with optional conservative update), HyperLogLog
// (distinct counts), Bloom (seen before?) and Vector, the exact per-key
// counter that the speed-layer paper (Grigoriev and Ermakov) proposes instead of a
// sketch once the number of distinct keys n exceeds w·d; InexactShare and
// RelativeError compute that paper's formulas (5)–(8).
//
// Like the rest of acktor's cores these are plain data structures: no
// goroutines, clocks, I/O or global state, and none is safe for concurrent
// use — an actor owns each. All of them:
//   - Merge: combine the summaries of two shards or panes, failing (with an
//     error wrapping ErrMismatch) when their shapes differ; the merge equals
//     the summary of the concatenated stream, which is why a conservative
//     Count-Min, whose update is not linear, refuses to merge;
//   - implement encoding.BinaryMarshaler and BinaryUnmarshaler with a
//     versioned format (a three-letter magic and a version byte) whose
//     decoder validates untrusted input, rejecting it with an error wrapping
//     ErrCorrupt rather than panicking or allocating beyond the input;
//   - bound their memory: MaxCountMinCells, MaxBloomBits,
//     MaxHyperLogLogPrecision, and each Vector's MaxKeys.
//
// Constructors return errors wrapping ErrArgument that name the argument.
// HyperLogLog and Bloom wrap github.com/axiomhq/hyperloglog and
// github.com/bits-and-blooms/bloom/v3; Count-Min is this package's own, with
// zero allocations per Add and Estimate and pairwise-independent rows.
package sketch
