package main

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"

	"github.com/acktor/acktor/sketch"
	"github.com/acktor/acktor/source"
)

// defaultBenchInput is the text of the second data set of bench sketch,
// relative to the current directory; when it is missing and --input was not
// given, that data set is skipped.
const defaultBenchInput = "topologies/wordcount/opticks.txt"

// The Zipf stream of bench sketch: the words of wordcount --generate.
const (
	benchZipfWordsPerLine = 10
	benchZipfSkew         = 1.1
	// maxBenchZipfLines bounds --zipf-lines: 10⁸ words, 400 MB of key ids.
	maxBenchZipfLines = 10_000_000
)

// benchSketchFlags are the flags of bench sketch.
type benchSketchFlags struct {
	input        string
	inputGiven   bool // --input was on the command line
	depth, width int
	ratios       string
	zipfLines    int64
	seed         uint64
	csv          string
}

// newBench returns the bench command, the parent of the benchmarks that put
// acktor's parts against the claims of the papers behind them.
func newBench(log *logrus.Logger) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure acktor's parts against the claims of the papers behind them",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newBenchSketch(log))
	cmd.AddCommand(newBenchAckers())
	cmd.AddCommand(newBenchQueue(log))
	return cmd
}

// newBenchSketch returns bench sketch, which measures Count-Min against the
// speed-layer paper's formulas and the exact Vector.
func newBenchSketch(log *logrus.Logger) *cobra.Command {
	var f benchSketchFlags
	cmd := &cobra.Command{
		Use:   "sketch",
		Short: "Count-Min against the speed-layer paper's formulas (5), (6) and (8) and the exact Vector, on real data",
		Long: `Reproduces the argument of the speed-layer paper (Grigoriev and Ermakov, formulas (5)-(8))
on two data sets: a Zipf stream of words (the words of wordcount --generate,
skew 1.1, seeded by --seed) and the words of a text file (split on white space,
as wordcount does). Once the number n of distinct keys exceeds w·d, almost every
Count-Min estimate is wrong (p = 0.997 at n = w·d+1 for d = 8) and light keys
are overestimated by hundreds of percent, so the paper keeps exact vectors.

For each data set and each ratio r of --ratios, the first n = ⌈r·w·d⌉ distinct
keys in stream order are taken with all their occurrences in the stream (so
1.0001 gives the paper's n = w·d+1 for w·d < 10000), and every occurrence is
added, in stream order, to a plain Count-Min of --width × --depth counters, to
a conservative-update one with the same hashes and to an exact sketch.Vector.
A data set with too few distinct keys for the largest ratio is measured with
a narrower w, the same for all its rows, and the note column says so.

Columns (the same in the table on stdout and in the --csv file):
  dataset               zipf, or text: and the file's name
  n, w, d, n/wd         distinct keys, width, depth, n/(w·d)
  p5, p6                share of keys whose estimate is not exact predicted
                        by formula (5), (1-(1-1/w)^(n-1))^d, and by its
                        approximation (6), exp(-d·e^(-(n-1)/w))
  inexact_plain, _cu    share of the n keys whose estimate differs from the
                        true count, plain and conservative update
  relerr8               formula (8), (n/w)·(mean/a) - 1, averaged over the
                        n keys, a a key's true count and mean that of all n
  relerr_plain, _cu     measured |estimate - a|/a averaged over the n keys
  relerr_vector         the same for the Vector: 0, it is exact
  cm_bytes              one Count-Min's counters, 8·w·d
  vector_bytes          the Vector's binary encoding: keys, varint counts
  vector_count_bytes    the Vector's counts alone, 8·n: the paper's
                        accounting, with the key dictionary shared
  note                  w narrowed to fit the data set

Same flags, same output.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.inputGiven = cmd.Flags().Changed("input")
			return runBenchSketch(f, cmd.OutOrStdout(), log)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.input, "input", defaultBenchInput, "text file whose words are the second data set (skipped if this default is missing)")
	fl.IntVar(&f.depth, "depth", 8, "rows of the Count-Min sketches, d (1 to 64)")
	fl.IntVar(&f.width, "width", 256, "counters per row of the Count-Min sketches, w (at least 1)")
	fl.StringVar(&f.ratios, "ratios", "0.25,0.5,1,1.0001,2,4", "comma-separated ratios r = n/(w·d), each > 0: one row per ratio and data set with n = ⌈r·w·d⌉ distinct keys")
	fl.Int64Var(&f.zipfLines, "zipf-lines", 20_000, "lines of the Zipf stream, 10 words a line on average (0 to 10000000; 0 skips the Zipf data set)")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the Zipf stream and of the sketches' hashes")
	fl.StringVar(&f.csv, "csv", "", "also write the rows as CSV to this file")
	return cmd
}

// usageError is a bad flag value: exit status 2, the message naming the flag.
func usageError(format string, args ...any) error {
	return &exitError{code: 2, msg: fmt.Sprintf(format, args...)}
}

// validate checks the flags and returns the parsed ratios.
func (f benchSketchFlags) validate() ([]float64, error) {
	switch {
	case f.depth < 1 || f.depth > sketch.MaxCountMinDepth:
		return nil, usageError("--depth %d: want 1 to %d", f.depth, sketch.MaxCountMinDepth)
	case f.width < 1:
		return nil, usageError("--width %d: want at least 1", f.width)
	case f.width > sketch.MaxCountMinCells/f.depth:
		return nil, usageError("--width %d × --depth %d: more than %d counters", f.width, f.depth, sketch.MaxCountMinCells)
	case f.zipfLines < 0 || f.zipfLines > maxBenchZipfLines:
		return nil, usageError("--zipf-lines %d: want 0 to %d", f.zipfLines, maxBenchZipfLines)
	}
	return parseRatios(f.ratios)
}

// parseRatios parses the comma-separated --ratios, naming a bad element.
func parseRatios(s string) ([]float64, error) {
	if strings.TrimSpace(s) == "" {
		return nil, usageError("--ratios %q: want a comma-separated list of ratios > 0", s)
	}
	var ratios []float64
	for i, e := range strings.Split(s, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(e), 64)
		if err != nil || !(r > 0) || math.IsInf(r, 0) {
			return nil, usageError("--ratios %q: element %d, %q, is not a finite number > 0", s, i+1, e)
		}
		ratios = append(ratios, r)
	}
	return ratios, nil
}

// benchKeys returns n = ⌈r·w·d⌉, the number of distinct keys of ratio r,
// ignoring floating-point noise in the last digits of r·w·d (0.1·2560 is
// 256, not 257). It saturates at math.MaxInt.
func benchKeys(r float64, w, d int) int {
	x := math.Ceil(r * float64(w) * float64(d) * (1 - 1e-12))
	if x >= math.MaxInt {
		return math.MaxInt
	}
	return int(x)
}

// runBenchSketch builds the data sets, measures every row and writes the
// table to out and, with --csv, the CSV file.
func runBenchSketch(f benchSketchFlags, out io.Writer, log *logrus.Logger) error {
	ratios, err := f.validate()
	if err != nil {
		return err
	}
	rmax := ratios[0]
	for _, r := range ratios {
		rmax = max(rmax, r)
	}
	if f.csv != "" { // find out now, not after the run, that it cannot be written
		fh, err := os.OpenFile(f.csv, os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("--csv: %w", err)
		}
		_ = fh.Close()
	}

	type input struct {
		ds   *dataset
		flag string // the flag that chooses the data set, for errors
	}
	var inputs []input
	if f.zipfLines > 0 {
		ds, err := zipfDataset(f.zipfLines, benchKeys(rmax, f.width, f.depth), f.seed)
		if err != nil {
			return fmt.Errorf("--zipf-lines %d: %w", f.zipfLines, err)
		}
		inputs = append(inputs, input{ds, fmt.Sprintf("--zipf-lines %d", f.zipfLines)})
	}
	switch ds, err := textDataset(f.input); {
	case errors.Is(err, os.ErrNotExist) && !f.inputGiven:
		log.Warnf("bench sketch: %s not found (run from the repository root or give --input); skipping the text data set", f.input)
	case err != nil:
		return usageError("--input: %v", err)
	default:
		inputs = append(inputs, input{ds, "--input " + f.input})
	}
	if len(inputs) == 0 {
		return usageError("no data set: --zipf-lines is 0 and there is no text (--input)")
	}

	var rows []benchRow
	for _, src := range inputs {
		ds := src.ds
		log.Infof("bench sketch: %s: %d words, %d distinct", ds.name, len(ds.stream), len(ds.keys))
		w, note := f.width, ""
		if need := benchKeys(rmax, w, f.depth); need > len(ds.keys) {
			w = narrowWidth(len(ds.keys), rmax, w, f.depth)
			if w < 1 {
				return usageError("%s: %s has %d distinct keys; ratio %v at depth %d needs at least %d even at width 1",
					src.flag, ds.name, len(ds.keys), rmax, f.depth, benchKeys(rmax, 1, f.depth))
			}
			note = fmt.Sprintf("w %d→%d: %d distinct keys, ratio %v needs %d", f.width, w, len(ds.keys), rmax, need)
			log.Warnf("bench sketch: %s: %s", ds.name, note)
		}
		for _, r := range ratios {
			row, err := measureSketch(ds, benchKeys(r, w, f.depth), w, f.depth, f.seed)
			if err != nil {
				return fmt.Errorf("%s, ratio %v: %w", ds.name, r, err)
			}
			row.note = note
			rows = append(rows, row)
		}
	}

	if err := writeBenchTable(out, rows); err != nil {
		return fmt.Errorf("writing the table: %w", err)
	}
	if f.csv != "" {
		if err := writeBenchCSV(f.csv, rows); err != nil {
			return fmt.Errorf("--csv: %w", err)
		}
	}
	return nil
}

// narrowWidth returns the largest width up to w at which ratio r needs no
// more than keys distinct keys at depth d, or 0 if even width 1 needs more.
func narrowWidth(keys int, r float64, w, d int) int {
	w = min(w, int(float64(keys)/(r*float64(d)))) // about right; rounding may leave it one too wide
	for w >= 1 && benchKeys(r, w, d) > keys {
		w--
	}
	return max(w, 0)
}

// dataset is a stream of keys, dictionary-encoded: keys[i] is the i-th
// distinct key in order of first appearance, counts[i] its number of
// occurrences, and stream holds the key ids in stream order, so the first n
// distinct keys are the ids below n.
type dataset struct {
	name   string
	keys   [][]byte
	counts []uint64
	stream []int32
	ids    map[string]int32
}

func newDataset(name string) *dataset {
	return &dataset{name: name, ids: make(map[string]int32)}
}

// add appends one occurrence of word to the stream.
func (ds *dataset) add(word string) error {
	id, ok := ds.ids[word]
	if !ok {
		if len(ds.keys) == math.MaxInt32 {
			return fmt.Errorf("more than %d distinct keys", math.MaxInt32)
		}
		id = int32(len(ds.keys))
		ds.ids[strings.Clone(word)] = id
		ds.keys = append(ds.keys, []byte(word))
		ds.counts = append(ds.counts, 0)
	}
	ds.counts[id]++
	ds.stream = append(ds.stream, id)
	return nil
}

// zipfDataset returns the words of lines generated lines, with a vocabulary
// of twice the largest number of distinct keys a row needs (at least 1000),
// so that the stream has enough distinct keys unless it is short.
func zipfDataset(lines int64, need int, seed uint64) (*dataset, error) {
	vocab := int(min(max(2*float64(need), 1000), math.MaxInt32))
	factory, err := source.Generator(source.GeneratorConfig{Lines: lines, WordsPerLine: benchZipfWordsPerLine,
		Vocabulary: vocab, Skew: benchZipfSkew, Seed: seed})
	if err != nil {
		return nil, err
	}
	src, err := factory(0, 1)
	if err != nil {
		return nil, err
	}
	defer func() { _ = src.Close() }()
	ds := newDataset("zipf")
	for {
		root, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		for w := range strings.FieldsSeq(root.Payload) {
			if err := ds.add(w); err != nil {
				return nil, err
			}
		}
	}
	return ds, nil
}

// textDataset returns the words of the text file at path, split on white
// space as wordcount splits them. A missing file gives an error wrapping
// os.ErrNotExist.
func textDataset(path string) (*dataset, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = fh.Close() }()
	if st, err := fh.Stat(); err != nil {
		return nil, err
	} else if st.IsDir() {
		return nil, fmt.Errorf("%s: is a directory", path)
	}
	ds := newDataset("text:" + filepath.Base(path))
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 0, 64<<10), source.MaxLineBytes)
	sc.Split(bufio.ScanWords)
	for sc.Scan() {
		if err := ds.add(sc.Text()); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return ds, nil
}

// benchRow is one row of the table: one data set at one ratio.
type benchRow struct {
	dataset                 string
	n, w, d                 int
	load, p5, p6            float64
	inexactPlain, inexactCU float64
	err8, errPlain, errCU   float64
	errVector               float64
	cmBytes, vecBytes       int
	vecCountBytes           int
	note                    string
}

// benchHeader names the columns of benchRow.cells.
var benchHeader = []string{"dataset", "n", "w", "d", "n/wd", "p5", "p6", "inexact_plain", "inexact_cu",
	"relerr8", "relerr_plain", "relerr_cu", "relerr_vector", "cm_bytes", "vector_bytes", "vector_count_bytes", "note"}

func (r benchRow) cells() []string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', 4, 64) }
	i := strconv.Itoa
	return []string{r.dataset, i(r.n), i(r.w), i(r.d), f(r.load), f(r.p5), f(r.p6), f(r.inexactPlain), f(r.inexactCU),
		f(r.err8), f(r.errPlain), f(r.errCU), f(r.errVector), i(r.cmBytes), i(r.vecBytes), i(r.vecCountBytes), r.note}
}

// approxInexactShare is the paper's formula (6), exp(−d·e^(−(n−1)/w)), the
// approximation of formula (5) (sketch.InexactShare) from which it derives
// p = 0.997 at n = w·d+1, d = 8; see sketch/paper.go.
func approxInexactShare(n, w, d int) float64 {
	if n <= 1 {
		return 0
	}
	return math.Exp(-float64(d) * math.Exp(-float64(n-1)/float64(w)))
}

// measureSketch adds every occurrence of the first n distinct keys of ds, in
// stream order, to a plain and a conservative Count-Min of w×d counters with
// the same seed and to a Vector, and compares their estimates of those n
// keys with the true counts and with the paper's formulas.
func measureSketch(ds *dataset, n, w, d int, seed uint64) (benchRow, error) {
	plain, err := sketch.NewCountMin(w, d, sketch.WithSeed(seed))
	if err != nil {
		return benchRow{}, err
	}
	cu, err := sketch.NewCountMin(w, d, sketch.WithSeed(seed), sketch.WithConservativeUpdate())
	if err != nil {
		return benchRow{}, err
	}
	vec := sketch.NewVector(sketch.WithMaxKeys(n))
	for _, id := range ds.stream {
		if int(id) < n {
			k := ds.keys[id]
			plain.Add(k, 1)
			cu.Add(k, 1)
			vec.Add(k, 1)
		}
	}
	var sum uint64
	for _, a := range ds.counts[:n] {
		sum += a
	}
	mean := float64(sum) / float64(n)
	relErr := func(est, a uint64) float64 { return math.Abs(float64(est)-float64(a)) / float64(a) }
	row := benchRow{dataset: ds.name, n: n, w: w, d: d, load: float64(n) / (float64(w) * float64(d)),
		p5: sketch.InexactShare(n, w, d), p6: approxInexactShare(n, w, d), cmBytes: 8 * w * d, vecCountBytes: 8 * n}
	for i, a := range ds.counts[:n] {
		k := ds.keys[i]
		p, c, v := plain.Estimate(k), cu.Estimate(k), vec.Estimate(k)
		row.inexactPlain += b2f(p != a)
		row.inexactCU += b2f(c != a)
		row.err8 += sketch.RelativeError(n, w, mean, float64(a))
		row.errPlain += relErr(p, a)
		row.errCU += relErr(c, a)
		row.errVector += relErr(v, a)
	}
	for _, x := range []*float64{&row.inexactPlain, &row.inexactCU, &row.err8, &row.errPlain, &row.errCU, &row.errVector} {
		*x /= float64(n)
	}
	enc, err := vec.MarshalBinary()
	if err != nil {
		return benchRow{}, fmt.Errorf("encoding the vector: %w", err)
	}
	row.vecBytes = len(enc)
	return row, nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// writeBenchTable writes rows as a table aligned on columns, without the
// padding tabwriter leaves before an empty last cell.
func writeBenchTable(out io.Writer, rows []benchRow) error {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(benchHeader, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r.cells(), "\t"))
	}
	if err := tw.Flush(); err != nil { // unreachable: writes to a bytes.Buffer do not fail
		return err
	}
	var trimmed bytes.Buffer
	for line := range bytes.Lines(b.Bytes()) {
		trimmed.Write(bytes.TrimRight(line, " \n"))
		trimmed.WriteByte('\n')
	}
	_, err := out.Write(trimmed.Bytes())
	return err
}

// writeBenchCSV writes rows as CSV, with a header line, to path.
func writeBenchCSV(path string, rows []benchRow) error {
	var b bytes.Buffer
	cw := csv.NewWriter(&b)
	_ = cw.Write(benchHeader) // writes to a bytes.Buffer fail only at Flush
	for _, r := range rows {
		_ = cw.Write(r.cells())
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
