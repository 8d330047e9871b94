package source

import (
	"fmt"
	"io"
	"math"
	randv1 "math/rand"
	"math/rand/v2"
	"os"
	"time"

	"github.com/acktor/acktor/internal/mix"
)

// maxWordsPerLine bounds GeneratorConfig.WordsPerLine, which keeps every
// generated line well under MaxLineBytes.
const maxWordsPerLine = 1 << 16

// maxSkew bounds GeneratorConfig.Skew; beyond it nearly every word is the
// rank-1 word anyway and the Zipf sampler loses precision.
const maxSkew = 64

// syllables holds the 20 two-letter syllables that are the base-20 digits of
// generated words.
const syllables = "kalominuperasotivuzebadofiguhejakolimane"

// GeneratorConfig describes the stream of a Generator. The zero value is not
// valid; every field but Seed must be set.
type GeneratorConfig struct {
	// Lines is the number of lines of the whole stream, over all tasks. It
	// must not be negative.
	Lines int64
	// WordsPerLine is the mean number of words per line, from 1 to 65536.
	// Each line has a number of words drawn uniformly from
	// [1, 2*WordsPerLine-1].
	WordsPerLine int
	// Vocabulary is the number of distinct words, at least 1.
	Vocabulary int
	// Skew is the exponent s of the Zipf distribution of words: the word of
	// rank r has probability proportional to 1/r^s. It must be greater than 1
	// (e.g. 1.1) and at most 64.
	Skew float64
	// Seed selects the stream; the same configuration always yields the same
	// text.
	Seed uint64
	// EventStep, when positive, gives line j the event time
	// EventStart + j*EventStep (a zero EventStart is the unix epoch), so that windows over a generated stream are
	// reproducible; 0 leaves the time to the spout (ingestion time).
	EventStep  time.Duration
	EventStart time.Time
}

// validate reports the first invalid field of c.
func (c GeneratorConfig) validate() error {
	switch {
	case c.Lines < 0:
		return fmt.Errorf("source: generator: Lines is %d, want >= 0", c.Lines)
	case c.WordsPerLine < 1 || c.WordsPerLine > maxWordsPerLine:
		return fmt.Errorf("source: generator: WordsPerLine is %d, want 1 to %d", c.WordsPerLine, maxWordsPerLine)
	case c.Vocabulary < 1:
		return fmt.Errorf("source: generator: Vocabulary is %d, want >= 1", c.Vocabulary)
	case !(c.Skew > 1 && c.Skew <= maxSkew): // also rejects NaN
		return fmt.Errorf("source: generator: Skew is %v, want 1 < Skew <= %d", c.Skew, maxSkew)
	case c.EventStep < 0:
		return fmt.Errorf("source: generator: EventStep is %v, want >= 0", c.EventStep)
	}
	return nil
}

// Generator returns a Factory for a synthetic stream of cfg.Lines lines of
// pronounceable words ("ka", "lomi", ...) whose frequencies follow a Zipf
// distribution, for benchmarks and tests. It returns an error naming the
// first invalid field of cfg.
//
// The lines are dealt to tasks round-robin: task i yields the global line
// numbers i, i+tasks, i+2*tasks, ..., and Root.ID is the global line number.
// The text of line j depends only on cfg.Seed and j, so Replay regenerates
// it and nothing is kept in memory. Total is the number of lines of the task.
func Generator(cfg GeneratorConfig) (Factory, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	table := newZipfTable(cfg.Skew, uint64(cfg.Vocabulary), headRanks)
	return func(task, tasks int) (Source, error) {
		if err := CheckTask(task, tasks); err != nil {
			return nil, fmt.Errorf("source: generator: %w", err)
		}
		return &generatorSource{
			lines: newLineGen(cfg, table),
			total: cfg.Lines,
			task:  int64(task),
			tasks: int64(tasks),
			next:  int64(task),
			step:  int64(cfg.EventStep),
			epoch: epochOf(cfg.EventStart),
		}, nil
	}, nil
}

// GeneratorTruth returns how often each word occurs in the whole stream of
// Generator(cfg), over all tasks: the exact result of a word count. It takes
// time proportional to cfg.Lines*cfg.WordsPerLine.
func GeneratorTruth(cfg GeneratorConfig) (map[string]int64, error) {
	return GeneratorTruthLines(cfg, 0, cfg.Lines)
}

// GeneratorTruthLines is GeneratorTruth over the lines first..last-1 only:
// with EventStep, the truth of a time window.
func GeneratorTruthLines(cfg GeneratorConfig, first, last int64) (map[string]int64, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	g := newLineGen(cfg, newZipfTable(cfg.Skew, uint64(cfg.Vocabulary), headRanks))
	ranks := make(map[uint64]int64)
	for j := max(first, 0); j < min(last, cfg.Lines); j++ {
		for n := g.start(j); n > 0; n-- {
			ranks[g.rank()]++
		}
	}
	counts := make(map[string]int64, len(ranks))
	var buf []byte
	for r, c := range ranks {
		buf = appendWord(buf[:0], r)
		counts[string(buf)] = c
	}
	return counts, nil
}

// epochOf is t in unix nanoseconds; the zero time means the unix epoch.
func epochOf(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// generatorSource is the Source of one task of Generator.
type generatorSource struct {
	lines  *lineGen
	total  int64 // lines of the whole stream
	task   int64
	tasks  int64
	next   int64 // global number of the next line
	step   int64 // event time step, ns; 0: none
	epoch  int64 // event time of line 0, unix ns
	buf    []byte
	closed bool
}

// Next generates the task's next line.
func (s *generatorSource) Next() (Root, error) {
	if s.closed {
		return Root{}, fmt.Errorf("source: generator: %w", os.ErrClosed)
	}
	if s.next >= s.total {
		return Root{}, io.EOF
	}
	j := s.next
	s.next += s.tasks
	s.buf = s.lines.appendLine(s.buf[:0], j)
	r := Root{ID: uint64(j), Payload: string(s.buf)}
	if s.step > 0 {
		r.Time = s.epoch + j*s.step
	}
	return r, nil
}

// Position is the global number of the task's next line.
func (s *generatorSource) Position() uint64 { return uint64(s.next) }

// Seek continues at global line pos, one of this task's lines (or past the
// last).
func (s *generatorSource) Seek(pos uint64) error {
	if pos%uint64(s.tasks) != uint64(s.task) || pos > uint64(s.total)+uint64(s.tasks) {
		return fmt.Errorf("source: generator: line %d is not a line of task %d of %d", pos, s.task, s.tasks)
	}
	s.next = int64(pos)
	return nil
}

// Replay regenerates line id, which must be one of this task's lines.
func (s *generatorSource) Replay(id uint64) (string, error) {
	if id >= uint64(s.total) || id%uint64(s.tasks) != uint64(s.task) {
		return "", fmt.Errorf("source: generator: line %d is not a line of task %d of %d over %d lines: %w",
			id, s.task, s.tasks, s.total, ErrUnknownRoot)
	}
	s.buf = s.lines.appendLine(s.buf[:0], int64(id))
	return string(s.buf), nil
}

// Done does nothing: lines are regenerated, not kept.
func (s *generatorSource) Done(uint64) {}

// Total is the number of lines of this task.
func (s *generatorSource) Total() int64 {
	if s.total <= s.task {
		return 0
	}
	return (s.total-s.task-1)/s.tasks + 1
}

// Close marks the source closed; there is nothing to release.
func (s *generatorSource) Close() error {
	s.closed = true
	return nil
}

// headRanks is how many of the most frequent ranks a Generator draws from a
// table; rarer ranks are drawn by rejection-inversion.
const headRanks = 4096

// zipfTable is the read-only part of the word sampler, built once per
// Generator and shared by its tasks.
//
// The ranks 1 to len(cdf), which carry most of the probability mass, are
// drawn by inverting the tabulated distribution function with a guide table
// (a constant expected number of steps, no floating-point functions). The
// rest are drawn by the rejection-inversion sampler of math/rand (Hörmann and
// Derflinger), restricted to the tail; math/rand/v2 has no Zipf sampler.
type zipfTable struct {
	skew  float64
	vocab uint64
	cdf   []float64 // cdf[k]: probability that the rank is at most k+1
	guide []int32   // guide[i]: first k with cdf[k] > i/len(guide)
	words []byte    // the words of ranks 1 to len(cdf), back to back
	ends  []int32   // ends[k]: end of the word of rank k+1 in words
}

func newZipfTable(skew float64, vocab uint64, head int) *zipfTable {
	h := int(min(vocab, uint64(head)))
	t := &zipfTable{
		skew:  skew,
		vocab: vocab,
		cdf:   make([]float64, h),
		guide: make([]int32, h),
		ends:  make([]int32, h),
	}
	var sum float64
	for k := range h {
		sum += math.Pow(float64(k+1), -skew)
		t.cdf[k] = sum
		t.words = appendWord(t.words, uint64(k+1))
		t.ends[k] = int32(len(t.words))
	}
	total := sum
	if vocab > uint64(h) {
		// The mass of ranks h+1 to vocab, by the midpoint rule as in the
		// rejection-inversion sampler: the integral of x^-s over
		// [h+0.5, vocab+0.5].
		total += (math.Pow(float64(vocab)+0.5, 1-skew) - math.Pow(float64(h)+0.5, 1-skew)) / (1 - skew)
	}
	for k := range t.cdf {
		t.cdf[k] /= total
	}
	if vocab == uint64(h) {
		t.cdf[h-1] = 1 // no tail, whatever the rounding
	}
	k := 0
	for i := range t.guide {
		for k < h-1 && t.cdf[k] <= float64(i)/float64(h) {
			k++
		}
		t.guide[i] = int32(k)
	}
	return t
}

// headRank returns the rank drawn by u in [0, 1), or false if u falls in the
// tail.
func (t *zipfTable) headRank(u float64) (int, bool) {
	h := len(t.cdf)
	if u >= t.cdf[h-1] {
		return 0, false
	}
	k := int(t.guide[min(int(u*float64(h)), h-1)])
	for t.cdf[k] <= u {
		k++
	}
	return k + 1, true
}

// lineGen generates the words of a line j from a PCG seeded with (Seed, j).
type lineGen struct {
	seed     uint64
	maxWords int // words per line are uniform in [1, maxWords]
	table    *zipfTable
	pcg      rand.PCG
	rnd      *rand.Rand
	tail     *randv1.Zipf // ranks past the table, from the same PCG; nil if none
}

func newLineGen(cfg GeneratorConfig, table *zipfTable) *lineGen {
	g := &lineGen{seed: cfg.Seed, maxWords: 2*cfg.WordsPerLine - 1, table: table}
	g.rnd = rand.New(&g.pcg)
	if h := uint64(len(table.cdf)); table.vocab > h {
		// With v = h+1 the sampler yields k with probability proportional
		// to (h+1+k)^-s, for k up to vocab-h-1: rank h+1+k.
		g.tail = randv1.NewZipf(randv1.New(pcgSource{&g.pcg}), table.skew, float64(h+1), table.vocab-h-1)
	}
	return g
}

// start seeds the PRNG for line j and returns the line's number of words.
func (g *lineGen) start(j int64) int {
	g.pcg.Seed(g.seed, mix64(uint64(j)))
	return 1 + g.rnd.IntN(g.maxWords)
}

// rank draws the rank, from 1, of the next word of the line.
func (g *lineGen) rank() uint64 {
	if r, ok := g.table.headRank(g.rnd.Float64()); ok || g.tail == nil {
		return uint64(r)
	}
	return g.tail.Uint64() + uint64(len(g.table.cdf)) + 1
}

// appendLine appends the text of line j to b.
func (g *lineGen) appendLine(b []byte, j int64) []byte {
	t := g.table
	for n := g.start(j); n > 0; n-- {
		if r := g.rank(); r <= uint64(len(t.ends)) {
			start := int32(0)
			if r > 1 {
				start = t.ends[r-2]
			}
			b = append(b, t.words[start:t.ends[r-1]]...)
		} else {
			b = appendWord(b, r)
		}
		if n > 1 {
			b = append(b, ' ')
		}
	}
	return b
}

// appendWord appends the word of rank r >= 1: r-1 written in base 20 with a
// syllable per digit, so ranks 1 to 20 are "ka" to "ne", rank 21 is "loka".
func appendWord(b []byte, r uint64) []byte {
	n := r - 1
	digits := 1
	for m := n / 20; m > 0; m /= 20 {
		digits++
	}
	b = append(b, make([]byte, 2*digits)...)
	w := b[len(b)-2*digits:]
	for i := digits - 1; i >= 0; i-- {
		d := n % 20
		n /= 20
		w[2*i], w[2*i+1] = syllables[2*d], syllables[2*d+1]
	}
	return b
}

// mix64 is SplitMix64's step from x: it spreads consecutive line numbers
// over the PCG seed space.
func mix64(x uint64) uint64 { return mix.Splitmix64(x + mix.Golden) }

// pcgSource lets math/rand (v1) draw from a math/rand/v2 PCG.
type pcgSource struct{ p *rand.PCG }

func (s pcgSource) Uint64() uint64 { return s.p.Uint64() }
func (s pcgSource) Int63() int64   { return int64(s.p.Uint64() >> 1) }
func (s pcgSource) Seed(seed int64) {
	s.p.Seed(uint64(seed), 0)
}
