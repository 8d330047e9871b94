package source

import (
	"errors"
	"io"
	"math"
	"strings"
	"testing"
)

func testConfig() GeneratorConfig {
	return GeneratorConfig{Lines: 1000, WordsPerLine: 10, Vocabulary: 500, Skew: 1.1, Seed: 42}
}

func mustGenerator(t testing.TB, cfg GeneratorConfig) Factory {
	t.Helper()
	f, err := Generator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestGeneratorConfigValidation(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*GeneratorConfig)
		field string
	}{
		{"negative lines", func(c *GeneratorConfig) { c.Lines = -1 }, "Lines"},
		{"zero words", func(c *GeneratorConfig) { c.WordsPerLine = 0 }, "WordsPerLine"},
		{"too many words", func(c *GeneratorConfig) { c.WordsPerLine = maxWordsPerLine + 1 }, "WordsPerLine"},
		{"zero vocabulary", func(c *GeneratorConfig) { c.Vocabulary = 0 }, "Vocabulary"},
		{"negative vocabulary", func(c *GeneratorConfig) { c.Vocabulary = -3 }, "Vocabulary"},
		{"skew one", func(c *GeneratorConfig) { c.Skew = 1 }, "Skew"},
		{"skew below one", func(c *GeneratorConfig) { c.Skew = 0.5 }, "Skew"},
		{"skew NaN", func(c *GeneratorConfig) { c.Skew = math.NaN() }, "Skew"},
		{"skew infinite", func(c *GeneratorConfig) { c.Skew = math.Inf(1) }, "Skew"},
		{"zero value", func(c *GeneratorConfig) { *c = GeneratorConfig{} }, "WordsPerLine"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			tc.edit(&cfg)
			if _, err := Generator(cfg); err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("Generator: %v, want an error naming %s", err, tc.field)
			}
			if _, err := GeneratorTruth(cfg); err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("GeneratorTruth: %v, want an error naming %s", err, tc.field)
			}
		})
	}
	for _, tc := range []struct{ task, tasks int }{{0, 0}, {-1, 1}, {3, 3}} {
		if _, err := mustGenerator(t, testConfig())(tc.task, tc.tasks); err == nil {
			t.Errorf("task %d of %d: no error", tc.task, tc.tasks)
		}
	}
}

func TestGeneratorDeterminism(t *testing.T) {
	cfg := testConfig()
	read := func(cfg GeneratorConfig, task, tasks int) []Root {
		src, err := mustGenerator(t, cfg)(task, tasks)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		return readAll(t, src)
	}
	a, b := read(cfg, 0, 1), read(cfg, 0, 1)
	if len(a) != int(cfg.Lines) {
		t.Fatalf("read %d lines, want %d", len(a), cfg.Lines)
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("line %d differs between runs: %q vs %q", i, a[i].Payload, b[i].Payload)
		}
		if a[i].ID != uint64(i) {
			t.Fatalf("line %d has ID %d", i, a[i].ID)
		}
	}
	// A split yields the very same lines as a single task.
	for _, r := range read(cfg, 2, 3) {
		if r.ID%3 != 2 || a[r.ID].Payload != r.Payload {
			t.Fatalf("task 2 of 3: line %d = %q, want %q", r.ID, r.Payload, a[r.ID].Payload)
		}
	}
	// Another seed yields another text.
	other := cfg
	other.Seed++
	same := 0
	for i, r := range read(other, 0, 1) {
		if r.Payload == a[i].Payload {
			same++
		}
	}
	if same > len(a)/10 {
		t.Errorf("seed %d and %d share %d of %d lines", cfg.Seed, other.Seed, same, len(a))
	}
}

func TestGeneratorReplayAndTotal(t *testing.T) {
	for _, lines := range []int64{0, 1, 7, 100} {
		cfg := testConfig()
		cfg.Lines = lines
		for tasks := 1; tasks <= 5; tasks++ {
			var sum int64
			for task := range tasks {
				src, err := mustGenerator(t, cfg)(task, tasks)
				if err != nil {
					t.Fatal(err)
				}
				roots := readAll(t, src)
				if src.Total() != int64(len(roots)) {
					t.Errorf("lines=%d task %d of %d: Total()=%d, read %d", lines, task, tasks, src.Total(), len(roots))
				}
				sum += src.Total()
				for i := len(roots) - 1; i >= 0; i-- { // replay out of order
					r := roots[i]
					if r.ID%uint64(tasks) != uint64(task) {
						t.Errorf("task %d of %d yielded line %d", task, tasks, r.ID)
					}
					src.Done(r.ID) // forgetting changes nothing for a generator
					if got, err := src.Replay(r.ID); err != nil || got != r.Payload {
						t.Errorf("Replay(%d) = %q, %v; want %q", r.ID, got, err, r.Payload)
					}
				}
				for _, bad := range []uint64{uint64(task + 1), uint64(lines), uint64(lines) + uint64(task), math.MaxUint64} {
					if tasks == 1 && bad < uint64(lines) {
						continue
					}
					if _, err := src.Replay(bad); !errors.Is(err, ErrUnknownRoot) {
						t.Errorf("lines=%d task %d of %d: Replay(%d) = %v, want ErrUnknownRoot", lines, task, tasks, bad, err)
					}
				}
				if err := src.Close(); err != nil {
					t.Fatal(err)
				}
				if _, err := src.Next(); err == nil || errors.Is(err, io.EOF) {
					t.Errorf("Next after Close: %v", err)
				}
			}
			if sum != lines {
				t.Errorf("lines=%d tasks=%d: Totals sum to %d", lines, tasks, sum)
			}
		}
	}
}

func TestGeneratorShape(t *testing.T) {
	cfg := GeneratorConfig{Lines: 5000, WordsPerLine: 4, Vocabulary: 1000, Skew: 1.1, Seed: 7}
	src, err := mustGenerator(t, cfg)(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	vocab := make(map[string]uint64)
	var b []byte
	for r := uint64(1); r <= uint64(cfg.Vocabulary); r++ {
		b = appendWord(b[:0], r)
		if _, dup := vocab[string(b)]; dup {
			t.Fatalf("word %q for two ranks", b)
		}
		vocab[string(b)] = r
	}
	counts := make(map[string]int64)
	lengths := make(map[int]int)
	for _, r := range readAll(t, src) {
		words := strings.Split(r.Payload, " ")
		lengths[len(words)]++
		for _, w := range words {
			if _, ok := vocab[w]; !ok {
				t.Fatalf("line %d: word %q not in the vocabulary", r.ID, w)
			}
			counts[w]++
		}
	}
	for n := 1; n <= 2*cfg.WordsPerLine-1; n++ {
		if lengths[n] < int(cfg.Lines)/(2*cfg.WordsPerLine-1)/2 {
			t.Errorf("%d lines of %d words; want roughly uniform lengths: %v", lengths[n], n, lengths)
		}
	}
	if len(lengths) != 2*cfg.WordsPerLine-1 {
		t.Errorf("line lengths %v, want 1 to %d", lengths, 2*cfg.WordsPerLine-1)
	}
	// Zipf: rank 1 is the most frequent word, and ranks 1 and 2 are about
	// 2^s apart.
	top := appendWord(nil, 1)
	for w, c := range counts {
		if w != string(top) && c >= counts[string(top)] {
			t.Errorf("word %q (rank %d) occurs %d times, rank 1 %q only %d", w, vocab[w], c, top, counts[string(top)])
		}
	}
	ratio := float64(counts["ka"]) / float64(counts["lo"])
	if want := math.Pow(2, cfg.Skew); math.Abs(ratio-want) > 0.3 {
		t.Errorf("count(rank 1)/count(rank 2) = %.2f, want about %.2f", ratio, want)
	}
}

func TestAppendWord(t *testing.T) {
	for r, want := range map[uint64]string{1: "ka", 2: "lo", 20: "ne", 21: "loka", 22: "lolo", 400: "nene", 401: "lokaka"} {
		if got := string(appendWord([]byte("x"), r)); got != "x"+want {
			t.Errorf("appendWord(%d) = %q, want %q", r, got, "x"+want)
		}
	}
}

func TestGeneratorTruth(t *testing.T) {
	cases := []GeneratorConfig{
		testConfig(),
		{Lines: 333, WordsPerLine: 1, Vocabulary: 1, Skew: 2, Seed: 1},
		{Lines: 0, WordsPerLine: 3, Vocabulary: 10, Skew: 1.5},
		{Lines: 2000, WordsPerLine: 3, Vocabulary: 1 << 30, Skew: 1.01, Seed: 99},
	}
	for _, cfg := range cases {
		truth, err := GeneratorTruth(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for tasks := 1; tasks <= 4; tasks++ {
			counts := make(map[string]int64)
			for task := range tasks {
				src, err := mustGenerator(t, cfg)(task, tasks)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range readAll(t, src) {
					for w := range strings.SplitSeq(r.Payload, " ") {
						counts[w]++
					}
				}
				src.Close()
			}
			if len(counts) != len(truth) {
				t.Errorf("%+v tasks=%d: %d distinct words, truth has %d", cfg, tasks, len(counts), len(truth))
			}
			for w, c := range truth {
				if counts[w] != c {
					t.Errorf("%+v tasks=%d: %q counted %d, truth %d", cfg, tasks, w, counts[w], c)
				}
			}
		}
	}
}

func TestGeneratorNextAllocs(t *testing.T) {
	cfg := testConfig()
	cfg.Lines = 1 << 20
	src, err := mustGenerator(t, cfg)(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(1000, func() { _, _ = src.Next() }); allocs > 1 {
		t.Errorf("Next allocates %v times per line, want at most 1", allocs)
	}
}

func BenchmarkGeneratorNext(b *testing.B) {
	cfg := GeneratorConfig{Lines: math.MaxInt64, WordsPerLine: 10, Vocabulary: 10000, Skew: 1.1, Seed: 1}
	src, err := mustGenerator(b, cfg)(0, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := src.Next(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestZipfTableDistribution compares the sampler, with a small table so that
// both the table and the tail sampler are exercised, with the Zipf law.
func TestZipfTableDistribution(t *testing.T) {
	const (
		vocab   = 40
		head    = 8
		skew    = 1.5
		samples = 200000
	)
	cfg := GeneratorConfig{Lines: 1, WordsPerLine: 1, Vocabulary: vocab, Skew: skew, Seed: 3}
	g := newLineGen(cfg, newZipfTable(skew, vocab, head))
	counts := make([]float64, vocab+1)
	g.start(0)
	for range samples {
		r := g.rank()
		if r < 1 || r > vocab {
			t.Fatalf("rank %d out of [1, %d]", r, vocab)
		}
		counts[r]++
	}
	var z float64
	for r := 1; r <= vocab; r++ {
		z += math.Pow(float64(r), -skew)
	}
	for r := 1; r <= vocab; r++ {
		p := math.Pow(float64(r), -skew) / z
		want := p * samples
		sigma := math.Sqrt(samples * p * (1 - p))
		// 5 sigma, plus 2% for the midpoint-rule estimate of the tail mass.
		if math.Abs(counts[r]-want) > 5*sigma+0.02*want {
			t.Errorf("rank %d drawn %v times, want about %.0f", r, counts[r], want)
		}
	}
}
