package member

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/acktor/acktor/actors"
	"github.com/acktor/acktor/window"
)

// WriteCounts writes the counts of every counter of a finished run as
// key<TAB>count lines, sorted bytewise by key; with more than one counter
// component each line starts with the component's name and a tab.
func WriteCounts(w io.Writer, st *actors.RunStats) error {
	names := make([]string, 0, len(st.Counters))
	for name := range st.Counters {
		names = append(names, name)
	}
	slices.Sort(names)
	bw := bufio.NewWriterSize(w, 1<<16)
	for _, name := range names {
		prefix := ""
		if len(names) > 1 {
			prefix = name + "\t"
		}
		top := slices.Clone(st.Counters[name].Top)
		slices.SortFunc(top, func(a, b window.Entry) int { return strings.Compare(a.Key, b.Key) })
		for _, e := range top {
			fmt.Fprintf(bw, "%s%s\t%d\n", prefix, e.Key, e.Count)
		}
	}
	return bw.Flush()
}

// statsJSON is the job.stats file.
type statsJSON struct {
	Roots          uint64              `json:"roots"`
	Completed      uint64              `json:"completed"`
	Failed         uint64              `json:"failed"`
	Replayed       uint64              `json:"replayed"`
	TimedOut       uint64              `json:"timed_out"`
	DeadLettered   uint64              `json:"dead_lettered"`
	Tuples         uint64              `json:"tuples"`
	PeakInFlight   uint64              `json:"peak_in_flight"`
	ElapsedSeconds float64             `json:"elapsed_seconds"`
	TuplesPerSec   float64             `json:"tuples_per_second"`
	Ackers         []actors.AckerStats `json:"ackers"`
	Counted        uint64              `json:"counted"`    // updates folded into the counters
	Duplicates     uint64              `json:"duplicates"` // dropped by job.exactly_once
	Late           uint64              `json:"late"`       // older than the window when they arrived
	Refused        uint64              `json:"refused"`    // refused by a counter limit: failed, replayed
	Window         *windowJSON         `json:"window,omitempty"`
}

// windowJSON is the window the counts cover.
type windowJSON struct {
	Start       time.Time `json:"start"`
	End         time.Time `json:"end"`
	SizeSeconds float64   `json:"size_seconds"`
	PaneSeconds float64   `json:"pane_seconds"`
}

// writeStats writes the run's statistics as JSON to path; the counters'
// figures are summed over the counter components, the window is the first
// one's that has one.
func writeStats(path string, st *actors.RunStats, win window.Config) error {
	s := statsJSON{Roots: st.Roots, Completed: st.Completed, Failed: st.Failed, Replayed: st.Replayed,
		TimedOut: st.TimedOut, DeadLettered: st.DeadLettered, Tuples: st.Tuples, PeakInFlight: st.PeakInFlight,
		ElapsedSeconds: st.Elapsed.Seconds(), Ackers: st.Ackers}
	names := make([]string, 0, len(st.Counters))
	for name := range st.Counters {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		c := st.Counters[name]
		s.Counted, s.Duplicates, s.Late, s.Refused = s.Counted+c.Applied, s.Duplicates+c.Duplicates, s.Late+c.Late, s.Refused+c.Refused
		if win != (window.Config{}) && c.HasWindow && s.Window == nil {
			s.Window = &windowJSON{Start: time.Unix(0, c.Start).UTC(), End: time.Unix(0, c.End).UTC(),
				SizeSeconds: win.Size.Seconds(), PaneSeconds: win.Pane.Seconds()}
		}
	}
	if s.Ackers == nil {
		s.Ackers = []actors.AckerStats{}
	}
	if st.Elapsed > 0 {
		s.TuplesPerSec = float64(st.Tuples) / st.Elapsed.Seconds()
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(path, func(w io.Writer) error { _, err := w.Write(append(b, '\n')); return err })
}

// deadLetters remembers the first dead letter for the exit message.
type deadLetters struct {
	mu      sync.Mutex
	n       int
	firstDL *actors.DeadLetter
}

func (d *deadLetters) DeadLetter(l actors.DeadLetter) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.n++
	if d.firstDL == nil {
		d.firstDL = &l
	}
}

func (d *deadLetters) first() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.firstDL == nil {
		return "none"
	}
	return fmt.Sprintf("root %d of %s: %s", d.firstDL.RootID, d.firstDL.Component, d.firstDL.Reason)
}

// progress shows a run on stderr: a one-line bar on a terminal, log lines
// otherwise. Rates are over the last second or more, so that the reports of
// many tasks arriving unevenly do not make them jump.
type progress struct {
	mode       string
	prev       actors.Progress // where the current rate window started
	rate       float64
	last       actors.Progress
	logged     actors.Progress // the last one a log line showed
	loggedRate float64         // ... and the rate it showed
}

func newProgress(mode string) *progress {
	p := &progress{mode: mode}
	if mode == "auto" {
		p.mode = "log"
		if term.IsTerminal(int(os.Stderr.Fd())) {
			p.mode = "bar"
		}
	}
	return p
}

func (p *progress) update(pr actors.Progress) {
	p.last = pr
	dt := (pr.Elapsed - p.prev.Elapsed).Seconds()
	if dt < 1 {
		if p.mode == "bar" {
			p.draw(pr)
		}
		return
	}
	p.rate = float64(pr.Tuples-p.prev.Tuples) / dt
	p.prev = pr
	switch p.mode {
	case "bar":
		p.draw(pr)
	case "log":
		if idle(p.logged, pr) && p.loggedRate == 0 { // an idle run (an ingest node waiting for records) logs once at 0/s, then nothing
			return
		}
		p.logged, p.loggedRate = pr, p.rate
		fmt.Fprintf(os.Stderr, "%s progress: roots %d/%s, %.0f tuples/s, in flight %d, replays %d, dead-lettered %d\n",
			time.Now().Format(time.TimeOnly), pr.Completed, total(pr), p.rate, pr.InFlight, pr.Replayed, pr.DeadLettered)
	}
}

// idle says whether nothing a progress line shows moved from a to b.
func idle(a, b actors.Progress) bool {
	return a.Roots == b.Roots && a.Completed == b.Completed && a.Tuples == b.Tuples && a.InFlight == b.InFlight &&
		a.Replayed == b.Replayed && a.DeadLettered == b.DeadLettered && a.Failed == b.Failed && a.Total == b.Total
}

func (p *progress) draw(pr actors.Progress) {
	fmt.Fprintf(os.Stderr, "\r%s roots %d/%s | %.2fM tuples/s | in flight %d | replays %d | dead %d   ",
		bar(pr.Completed, pr.Total), pr.Completed, total(pr), p.rate/1e6, pr.InFlight, pr.Replayed, pr.DeadLettered)
}

// end closes the bar with the whole run's average rate.
func (p *progress) end() {
	if p.mode != "bar" || p.last.Elapsed == 0 {
		return
	}
	p.rate = float64(p.last.Tuples) / p.last.Elapsed.Seconds()
	p.draw(p.last)
	fmt.Fprintln(os.Stderr, "(average)")
}

func total(pr actors.Progress) string {
	if pr.Total < 0 {
		return "?"
	}
	return fmt.Sprint(pr.Total)
}

func bar(done uint64, total int64) string {
	const width = 20
	if total <= 0 {
		return "[" + strings.Repeat("?", width) + "]"
	}
	n := min(int(done*width/uint64(total)), width)
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}

// writeAtomic writes path through a temporary file renamed over it, so
// that it holds the previous contents until the new ones are whole; "" and
// "-" are stdout. A path that is no regular file (/dev/null, a named pipe,
// a terminal) is written in place: a rename would put a file where the
// device was, for the whole machine when run as root.
func writeAtomic(path string, write func(io.Writer) error) error {
	if path == "" || path == "-" {
		return write(os.Stdout)
	}
	if special(path) {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		err = write(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	err = write(tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
	return err
}

// checkWritable finds out now, not after the run, that path cannot be
// written as writeAtomic writes it (a file made beside it, renamed over
// it); it changes nothing. "" and "-" are stdout.
func checkWritable(path string) error {
	if path == "" || path == "-" {
		return nil
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s: is a directory", path)
	}
	if special(path) { // opened only when written: a named pipe's reader may come later
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_ = tmp.Close()
	return os.Remove(tmp.Name())
}

// special says whether path exists and is not a regular file: a device,
// a named pipe, a socket.
func special(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.Mode().IsRegular() && !st.IsDir()
}
