package main

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/acktor/acktor/tracker"
	"github.com/acktor/acktor/tracker/ledger"
	"github.com/acktor/acktor/tracker/ring"
)

// The shape of the roots of bench ackers, as a spout task makes them
// (tracker.SpringID), each counting up from a random start.
const (
	benchAckersSpoutTasks = 4
	// benchAckersGenerations is the ledger's Generations, the runtime's
	// default: it sizes nothing, a ledger only needs a valid one.
	benchAckersGenerations = 3
	// benchAckersPaperAckers is the number of ackers of experiment 3.
	benchAckersPaperAckers = 6
	// Bounds of the flags.
	maxBenchAckersRoots = 10_000_000
	maxBenchAckers      = 64
)

// benchAckersPaperRoots are the root counts of experiment 3 (§4.3).
var benchAckersPaperRoots = []int{100_000, 200_000, 300_000}

// benchAckersFlags are the flags of bench ackers.
type benchAckersFlags struct {
	roots, maxAckers        int
	replicas, paperReplicas int
	seed                    uint64
	csv                     string
}

// newBenchAckers returns bench ackers, which reproduces the paper's
// experiments 2 and 3 on the acker ring and ledger.
func newBenchAckers() *cobra.Command {
	var f benchAckersFlags
	cmd := &cobra.Command{
		Use:   "ackers",
		Short: "Memory and load per acker against the tracking paper's experiments 2 and 3 (§4.2, §4.3)",
		Long: `Reproduces experiments 2 and 3 of the tracking paper (§4.2, §4.3, figures 4(b) and
4(c)) with acktor's own parts: acktor-shaped springIds (task<<40 | seq, four
spout tasks, each counting up from a start drawn from --seed, as actors/spout.go
makes them) are placed on ackers "acker/0" … "acker/k-1", all running, by the
consistent-hash ring (tracker/ring), and each acker opens one ledger record
(tracker/ledger) per root it owns.

Experiment 2: --roots roots (the paper's 500 000) on k = 1 … --max-ackers
ackers with --replicas points each. Every root stays open, the worst case: in
the paper roots complete and leave while others arrive, which is why its
experiment 1 measures less than 20 B a record (0.86 MB for 100k roots, 1.59 MB
for 200k, ~16 MB for 900k against ~69 MB without the tracker). The paper reads
"slightly under 7 MB" for one acker and 500 000 roots, decreasing with more
ackers and flattening beyond six; figure 4(b) gives no other number.

Experiment 3: six ackers, 100k, 200k and 300k roots, once with
--paper-replicas points per acker (the paper's example: 2) and once with
--replicas. The paper's figure 4(c) shows the counts evening out with more
roots; it gives no number.

Columns (the --csv file has them all, one row per table row, with the
experiment, 2 or 3, first; a cell that does not apply is empty):
  ackers, replicas, roots  k, points per acker, roots placed
  counts                   roots per acker, acker/0 first
  max/mean, min/mean       largest and smallest count over the mean
  max_share                largest ring share (ring.Owned) times k
  mean_bytes, max_bytes    ledger table heap (ledger.Bytes) per acker, each
                           ledger pre-sized for the expected share roots/k
                           (ExpectedInFlight), as the runtime pre-sizes
  mean_mb, max_mb          the same in MB of 2^20 bytes, as the paper counts
  bytes/record             all tables' heap over all records
  grown                    ackers whose pre-sized table had to grow (their
                           share exceeded roots/k): a growth adds half
  unsized_*                the same without pre-sizing (ExpectedInFlight 0)
  theory_mb                the paper's 20 B a record for the mean share
  paper                    the paper's reading, where it gives one

Same flags, same output.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBenchAckers(f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.roots, "roots", 500_000, fmt.Sprintf("roots of experiment 2 (1 to %d)", maxBenchAckersRoots))
	fl.IntVar(&f.maxAckers, "max-ackers", 8, fmt.Sprintf("experiment 2 runs k = 1 … this many ackers (1 to %d)", maxBenchAckers))
	fl.IntVar(&f.replicas, "replicas", ring.DefaultReplicas, fmt.Sprintf("points per acker on the ring (1 to %d)", ring.MaxReplicas))
	fl.IntVar(&f.paperReplicas, "paper-replicas", 2, fmt.Sprintf("points per acker of experiment 3's comparison row, the paper's example (1 to %d)", ring.MaxReplicas))
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the spout tasks' sequence starts")
	fl.StringVar(&f.csv, "csv", "", "also write the rows of both tables as CSV to this file")
	return cmd
}

// validate checks the flags, naming the bad one.
func (f benchAckersFlags) validate() error {
	switch {
	case f.roots < 1 || f.roots > maxBenchAckersRoots:
		return usageError("--roots %d: want 1 to %d", f.roots, maxBenchAckersRoots)
	case f.maxAckers < 1 || f.maxAckers > maxBenchAckers:
		return usageError("--max-ackers %d: want 1 to %d", f.maxAckers, maxBenchAckers)
	case f.replicas < 1 || f.replicas > ring.MaxReplicas:
		return usageError("--replicas %d: want 1 to %d", f.replicas, ring.MaxReplicas)
	case f.paperReplicas < 1 || f.paperReplicas > ring.MaxReplicas:
		return usageError("--paper-replicas %d: want 1 to %d", f.paperReplicas, ring.MaxReplicas)
	}
	return nil
}

// ackersRow is one row of either table of bench ackers.
type ackersRow struct {
	experiment               int
	ackers, replicas, roots  int
	counts                   []int
	maxMean, minMean, share  float64
	memory                   bool // experiment 2: the fields below are set
	meanBytes, maxBytes      float64
	bytesPerRecord           float64
	grown                    int
	unsizedMean, unsizedMax  float64
	unsizedPerRecord, theory float64
	paper                    string
}

// Columns of the two tables; the CSV header is ackersCSVHeader.
var (
	ackersExp2Columns = []string{"ackers", "replicas", "roots", "max/mean", "min/mean", "mean_bytes", "max_bytes", "mean_mb", "max_mb",
		"bytes/record", "grown", "unsized_mean_bytes", "unsized_max_bytes", "unsized_bytes/record", "theory_mb", "paper"}
	ackersExp3Columns = []string{"ackers", "replicas", "roots", "counts", "max/mean", "min/mean", "max_share"}
	ackersCSVHeader   = []string{"experiment", "ackers", "replicas", "roots", "counts", "max/mean", "min/mean", "max_share",
		"mean_bytes", "max_bytes", "mean_mb", "max_mb", "bytes/record", "grown",
		"unsized_mean_bytes", "unsized_max_bytes", "unsized_bytes/record", "theory_mb", "paper"}
)

// cell returns the column col of r, "" where it does not apply.
func (r ackersRow) cell(col string) string {
	f := func(x float64, prec int) string { return strconv.FormatFloat(x, 'f', prec, 64) }
	mb := func(b float64) string { return f(b/(1<<20), 2) }
	switch col {
	case "experiment":
		return strconv.Itoa(r.experiment)
	case "ackers":
		return strconv.Itoa(r.ackers)
	case "replicas":
		return strconv.Itoa(r.replicas)
	case "roots":
		return strconv.Itoa(r.roots)
	case "counts":
		cs := make([]string, len(r.counts))
		for i, c := range r.counts {
			cs[i] = strconv.Itoa(c)
		}
		return strings.Join(cs, " ")
	case "max/mean":
		return f(r.maxMean, 3)
	case "min/mean":
		return f(r.minMean, 3)
	case "max_share":
		return f(r.share, 3)
	}
	if !r.memory {
		return ""
	}
	switch col {
	case "mean_bytes":
		return f(r.meanBytes, 0)
	case "max_bytes":
		return f(r.maxBytes, 0)
	case "mean_mb":
		return mb(r.meanBytes)
	case "max_mb":
		return mb(r.maxBytes)
	case "bytes/record":
		return f(r.bytesPerRecord, 2)
	case "grown":
		return strconv.Itoa(r.grown)
	case "unsized_mean_bytes":
		return f(r.unsizedMean, 0)
	case "unsized_max_bytes":
		return f(r.unsizedMax, 0)
	case "unsized_bytes/record":
		return f(r.unsizedPerRecord, 2)
	case "theory_mb":
		return mb(r.theory)
	case "paper":
		return r.paper
	}
	return ""
}

func (r ackersRow) cells(cols []string) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = r.cell(c)
	}
	return out
}

// benchSpringIDs returns n acktor-shaped springIds: benchAckersSpoutTasks
// tasks, each counting up from a start drawn from seed, the last task taking
// the remainder.
func benchSpringIDs(n int, seed uint64) []uint64 {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	ids := make([]uint64, 0, n)
	for task := range uint64(benchAckersSpoutTasks) {
		seq := rng.Uint64() >> (64 - tracker.SpringBits + 1) // leave room to count, as the spout does
		m := n / benchAckersSpoutTasks
		if task == benchAckersSpoutTasks-1 {
			m = n - len(ids)
		}
		for range m {
			seq++
			ids = append(ids, tracker.SpringID(uint32(task), seq))
		}
	}
	return ids
}

// benchRing returns a ring of k running ackers "acker/0" … "acker/k-1" and
// their ids.
func benchRing(k, replicas int) (*ring.Ring, []string, error) {
	r := ring.New(replicas)
	ids := make([]string, k)
	for i := range ids {
		ids[i] = tracker.AckerIdentity(i)
		r.Add(ids[i])
		if err := r.SetState(ids[i], ring.Running); err != nil {
			return nil, nil, fmt.Errorf("starting %s: %w", ids[i], err)
		}
	}
	return r, ids, nil
}

// placeRoots returns, for each root, the index of its acker, and the roots
// per acker, with the spread of the counts and of the ring shares.
func placeRoots(r *ring.Ring, ids []string, springs []uint64) (owner []int, row ackersRow, err error) {
	index := make(map[string]int, len(ids))
	for i, id := range ids {
		index[id] = i
	}
	owner = make([]int, len(springs))
	counts := make([]int, len(ids))
	for j, s := range springs {
		a, ok := r.Locate(s)
		if !ok {
			return nil, ackersRow{}, fmt.Errorf("springId %d: no running acker", s)
		}
		owner[j] = index[a]
		counts[owner[j]]++
	}
	k := float64(len(ids))
	mean := float64(len(springs)) / k
	lo, hi, share := counts[0], counts[0], 0.0
	for i, c := range counts {
		lo, hi = min(lo, c), max(hi, c)
		share = max(share, r.Owned(ids[i]))
	}
	row = ackersRow{ackers: len(ids), replicas: r.Replicas(), roots: len(springs), counts: counts,
		maxMean: float64(hi) / mean, minMean: float64(lo) / mean, share: share * k}
	return owner, row, nil
}

// fillLedgers opens one record per root in its acker's ledger, each ledger
// made with ExpectedInFlight expect, and returns the mean and largest table
// heap, the heap per record and how many tables grew.
func fillLedgers(springs []uint64, owner []int, k, expect int) (mean, most, perRecord float64, grown int, err error) {
	ls := make([]*ledger.Ledger, k)
	for i := range ls {
		cfg := ledger.Config{Generations: benchAckersGenerations, ExpectedInFlight: expect}
		if err := cfg.Validate(); err != nil {
			return 0, 0, 0, 0, err
		}
		ls[i] = ledger.New(cfg)
	}
	for j, s := range springs {
		xor := s ^ 0x9e3779b97f4a7c15 // any nonzero XOR keeps the record open
		if xor == 0 {
			xor = 1
		}
		if o := ls[owner[j]].Init(s, tracker.TaskOf(s), xor); o.Status != ledger.Pending {
			return 0, 0, 0, 0, fmt.Errorf("springId %d: init %v, want pending", s, o.Status)
		}
	}
	total, records := 0, 0
	for _, l := range ls {
		b := l.Bytes()
		total += b
		records += l.Len()
		most = max(most, float64(b))
		if l.Stats().Resizes > 0 {
			grown++
		}
	}
	return float64(total) / float64(k), most, float64(total) / float64(records), grown, nil
}

// experiment2 measures the ledger heap per acker for k = 1 … max-ackers.
func experiment2(f benchAckersFlags, progress io.Writer) ([]ackersRow, error) {
	start := time.Now()
	springs := benchSpringIDs(f.roots, f.seed)
	var rows []ackersRow
	for k := 1; k <= f.maxAckers; k++ {
		r, ids, err := benchRing(k, f.replicas)
		if err != nil {
			return nil, err
		}
		owner, row, err := placeRoots(r, ids, springs)
		if err != nil {
			return nil, fmt.Errorf("%d ackers: %w", k, err)
		}
		expect := (f.roots + k - 1) / k
		row.experiment, row.memory, row.paper = 2, true, "—"
		if row.meanBytes, row.maxBytes, row.bytesPerRecord, row.grown, err = fillLedgers(springs, owner, k, expect); err != nil {
			return nil, fmt.Errorf("%d ackers: %w", k, err)
		}
		if row.unsizedMean, row.unsizedMax, row.unsizedPerRecord, _, err = fillLedgers(springs, owner, k, 0); err != nil {
			return nil, fmt.Errorf("%d ackers, unsized: %w", k, err)
		}
		row.theory = 20 * float64(f.roots) / float64(k)
		if k == 1 {
			row.paper = "< 7 MB (500k roots)"
		}
		fmt.Fprintf(progress, "experiment 2: %d of %d ackers done, %d roots placed and opened twice (%.1f s)\n",
			k, f.maxAckers, f.roots, time.Since(start).Seconds())
		rows = append(rows, row)
	}
	return rows, nil
}

// experiment3 measures the roots per acker of six ackers for the paper's
// root counts, with paper-replicas and with replicas points per acker.
func experiment3(f benchAckersFlags) ([]ackersRow, error) {
	reps := []int{f.paperReplicas}
	if f.replicas != f.paperReplicas {
		reps = append(reps, f.replicas)
	}
	var rows []ackersRow
	for _, n := range reps {
		r, ids, err := benchRing(benchAckersPaperAckers, n)
		if err != nil {
			return nil, err
		}
		for _, roots := range benchAckersPaperRoots {
			_, row, err := placeRoots(r, ids, benchSpringIDs(roots, f.seed))
			if err != nil {
				return nil, fmt.Errorf("%d replicas, %d roots: %w", n, roots, err)
			}
			row.experiment = 3
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// runBenchAckers runs both experiments and writes the tables to out and,
// with --csv, the CSV file; a line to progress as each acker count is done.
func runBenchAckers(f benchAckersFlags, out, progress io.Writer) error {
	if err := f.validate(); err != nil {
		return err
	}
	if f.csv != "" { // find out now, not after the run, that it cannot be written
		fh, err := os.OpenFile(f.csv, os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("--csv: %w", err)
		}
		_ = fh.Close()
	}
	exp2, err := experiment2(f, progress)
	if err != nil {
		return fmt.Errorf("experiment 2: %w", err)
	}
	exp3, err := experiment3(f)
	if err != nil {
		return fmt.Errorf("experiment 3: %w", err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "Experiment 2 (§4.2, figure 4(b)): ledger heap per acker, %d roots, all open\n", f.roots)
	if err := writeAckersTable(&b, ackersExp2Columns, exp2); err != nil {
		return fmt.Errorf("writing the table: %w", err)
	}
	fmt.Fprintf(&b, "\nExperiment 3 (§4.3, figure 4(c)): roots per acker, %d ackers\n", benchAckersPaperAckers)
	if err := writeAckersTable(&b, ackersExp3Columns, exp3); err != nil {
		return fmt.Errorf("writing the table: %w", err)
	}
	if _, err := out.Write(b.Bytes()); err != nil {
		return fmt.Errorf("writing the tables: %w", err)
	}
	if f.csv != "" {
		if err := writeAckersCSV(f.csv, append(exp2, exp3...)); err != nil {
			return fmt.Errorf("--csv: %w", err)
		}
	}
	return nil
}

// writeAckersTable writes rows as a table of the columns cols, aligned,
// without trailing blanks.
func writeAckersTable(out *bytes.Buffer, cols []string, rows []ackersRow) error {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(cols, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r.cells(cols), "\t"))
	}
	if err := tw.Flush(); err != nil { // unreachable: writes to a bytes.Buffer do not fail
		return err
	}
	for line := range bytes.Lines(b.Bytes()) {
		out.Write(bytes.TrimRight(line, " \n"))
		out.WriteByte('\n')
	}
	return nil
}

// writeAckersCSV writes rows as CSV, with the header ackersCSVHeader, to path.
func writeAckersCSV(path string, rows []ackersRow) error {
	var b bytes.Buffer
	cw := csv.NewWriter(&b)
	_ = cw.Write(ackersCSVHeader) // writes to a bytes.Buffer fail only at Flush
	for _, r := range rows {
		_ = cw.Write(r.cells(ackersCSVHeader))
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
