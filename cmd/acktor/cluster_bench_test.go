package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/acktor/acktor/gateway"
	"github.com/acktor/acktor/internal/testserver"
)

// runStats is what a run's --stats file says of its speed.
type runStats struct {
	Completed    uint64  `json:"completed"`
	Tuples       uint64  `json:"tuples"`
	TuplesPerSec float64 `json:"tuples_per_second"`
	Ackers       []struct {
		Member  string `json:"member"`
		Tracked uint64 `json:"tracked"`
	} `json:"ackers"`
}

// shareOn is the share of the roots that ackers on the member at addr
// tracked. A spout task gives its roots to the acker on its own member
// while every member hosts one (the benchmark's three ackers are dealt out
// over its three members), so it is the share of the input that member's
// spout task read, replays counted again.
func (st runStats) shareOn(addr string) float64 {
	var on, all uint64
	for _, a := range st.Ackers {
		all += a.Tracked
		if a.Member == addr {
			on += a.Tracked
		}
	}
	if all == 0 {
		return 0
	}
	return float64(on) / float64(all)
}

func readRunStats(tb testing.TB, path string) runStats {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var st runStats
	if err := json.Unmarshal(b, &st); err != nil {
		tb.Fatal(err)
	}
	return st
}

// BenchmarkClusterWordcount counts the same 1M lines on an embedded member
// and on three `acktor node` processes on this machine (the same tasks and
// ackers: 3 spout, 3 split and 2 count tasks, 3 ackers, the default max
// pending), each a fresh process, in the same iteration. It reports both runs'
// tuples/s (the runs alone, as their --stats give them, not process or
// member start) and the cluster's over the embedded's: what crossing
// members costs (the goal is x-embedded >= 0.6). It also reports the CPU
// time each took per tuple: the embedded process's, and that of the three
// members together, each over its whole life; and the share of the lines
// the driver's spout task read (driver-lines-%): the counters of a batch
// job live on the driver, so the words of every other line cross to it,
// and the share moves the cluster's cost from run to run. And the minor
// page faults each run took (the three members' together), beside what one
// costs on this machine, timed in the same iteration (fault-us, µs): each
// member's heap grows from nothing while the run is timed, and where a
// fault is dear (a virtual machine) three heaps weigh on the cluster.
func BenchmarkClusterWordcount(b *testing.B) {
	const lines = 1_000_000
	dir := b.TempDir()
	input, _ := writeInput(b, dir, lines)
	var embedded, clustered, embCPU, clusterCPU, driverShare, embFaults, clusterFaults, faultCost float64
	for i := range b.N {
		emb := filepath.Join(dir, "embedded-"+strconv.Itoa(i)+".json")
		cmd := exec.Command(os.Args[0], "wordcount", "--input", input, "--output", os.DevNull, "--stats", emb,
			"--progress", "none", "--ackers", "3", "--spouts", "3", "--splitters", "3", "--counters", "2")
		cmd.Env = append(os.Environ(), asMain+"=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("embedded word count: %v\n%s", err, out)
		}
		e := readRunStats(b, emb)
		embCPU += cpu(cmd.ProcessState) / float64(e.Tuples)
		embFaults += minorFaults(cmd.ProcessState)

		sub := filepath.Join(dir, "cluster-"+strconv.Itoa(i))
		if err := os.Mkdir(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		paths, addrs := writeNodeConfigs(b, sub, input, "30s", "")
		defaultPending(b, paths)
		w1, _ := startNode(b, paths[1])
		w2, _ := startNode(b, paths[2])
		driver, stderr := startDriver(b, paths[0])
		var tail []byte
		buf := make([]byte, 1<<16)
		for { // the driver's log, kept for an error
			n, err := stderr.Read(buf)
			tail = append(tail[max(0, len(tail)-4096):], buf[:n]...)
			if err != nil {
				break
			}
		}
		if err := driver.Wait(); err != nil {
			b.Fatalf("driver: %v\n%s", err, tail)
		}
		spent, faults := cpu(driver.ProcessState), minorFaults(driver.ProcessState)
		for _, w := range []*exec.Cmd{w1, w2} {
			_ = w.Process.Kill()
			st, _ := w.Process.Wait()
			spent, faults = spent+cpu(st), faults+minorFaults(st)
		}
		clusterFaults += faults
		faultCost += pageFaultCost(b)
		c := readRunStats(b, filepath.Join(sub, "stats.json"))
		clusterCPU += spent / float64(c.Tuples)
		driverShare += c.shareOn(addrs[0])
		if e.Completed != lines || c.Completed != lines {
			b.Fatalf("completed %d embedded and %d in the cluster, want %d", e.Completed, c.Completed, lines)
		}
		embedded += e.TuplesPerSec
		clustered += c.TuplesPerSec
	}
	b.ReportMetric(embedded/float64(b.N), "embedded-tuples/s")
	b.ReportMetric(clustered/float64(b.N), "cluster-tuples/s")
	b.ReportMetric(clustered/embedded, "x-embedded")
	b.ReportMetric(embCPU/float64(b.N), "embedded-cpu-ns/tuple")
	b.ReportMetric(clusterCPU/float64(b.N), "cluster-cpu-ns/tuple")
	b.ReportMetric(100*driverShare/float64(b.N), "driver-lines-%")
	b.ReportMetric(embFaults/float64(b.N), "embedded-faults")
	b.ReportMetric(clusterFaults/float64(b.N), "cluster-faults")
	b.ReportMetric(faultCost/float64(b.N), "fault-us")
}

// defaultPending takes the max pending of 1024 that writeNodeConfigs
// writes out of the members' configs, so that they run the default, as the
// embedded run does.
func defaultPending(tb testing.TB, paths []string) {
	tb.Helper()
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		cut := bytes.Replace(data, []byte("  max_pending: 1024\n"), nil, 1)
		if len(cut) == len(data) {
			tb.Fatalf("%s: no max_pending to take out", p)
		}
		if err := os.WriteFile(p, cut, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// cpu is the CPU time a finished process took, user and system, in ns: all
// of its life, start and end included.
func cpu(st *os.ProcessState) float64 {
	if st == nil {
		return 0
	}
	return float64((st.UserTime() + st.SystemTime()).Nanoseconds())
}

// BenchmarkClusterService serves the speed layer over the same generated
// orders on an embedded member (a batch job: its --stats) and as a service
// of three `acktor node` processes on this machine (3 spout, 2 parse and 4
// counter tasks, 3 ackers), in the same iteration, and reports both
// orders/s and the service's over the embedded's. The service's rate is
// taken from its lead's progress (any member's /api/status) between 10 %
// and all of the orders completed, so that start-up does not count. The
// service runs twice, with standby replicas of its counter tasks (the
// default) and without (job.standby: false): x-no-standby is what they
// leave of the orders/s.
func BenchmarkClusterService(b *testing.B) {
	const orders = 1_000_000
	job := fmt.Sprintf(`job:
  topology: speedlayer
  spouts: 3
  parsers: 2
  counters: 4
  source: generator
  lines: %d
`, orders)
	var embedded, served, bare float64
	for range b.N {
		dir := b.TempDir()
		emb, stats := filepath.Join(dir, "embedded.yaml"), filepath.Join(dir, "embedded.json")
		if err := os.WriteFile(emb, []byte("cluster:\n  provider: embedded\ntracker:\n  ackers: 3\n  progress: none\n"+job+
			"  driver: true\n  output: "+os.DevNull+"\n  stats: "+stats+"\n"), 0o644); err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "node", "--config", emb)
		cmd.Env = append(os.Environ(), asMain+"=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("embedded speed layer: %v\n%s", err, out)
		}
		var e struct {
			Completed      uint64  `json:"completed"`
			ElapsedSeconds float64 `json:"elapsed_seconds"`
		}
		if data, err := os.ReadFile(stats); err != nil || json.Unmarshal(data, &e) != nil || e.Completed != orders {
			b.Fatalf("embedded stats %s: %+v, %v", data, e, err)
		}
		embedded += float64(e.Completed) / e.ElapsedSeconds

		served += serveOrders(b, dir+"/standby", job, orders)
		bare += serveOrders(b, dir+"/bare", job+"  standby: false\n", orders)
	}
	b.ReportMetric(embedded/float64(b.N), "embedded-orders/s")
	b.ReportMetric(served/float64(b.N), "service-orders/s")
	b.ReportMetric(bare/float64(b.N), "no-standby-orders/s")
	b.ReportMetric(served/embedded, "x-embedded")
	b.ReportMetric(served/bare, "x-no-standby")
}

// serveOrders runs job as a service on three acktor node processes in dir
// and returns its orders/s from the tenth of orders completed to the last.
func serveOrders(b *testing.B, dir, job string, orders uint64) float64 {
	b.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	ports := testserver.FreePorts(b, 4)
	peers := fmt.Sprintf("127.0.0.1:%d, 127.0.0.1:%d, 127.0.0.1:%d", ports[0], ports[1], ports[2])
	for m := range 3 {
		gw := ""
		if m == 0 {
			gw = fmt.Sprintf("gateway:\n  address: 127.0.0.1:%d\n", ports[3])
		}
		path := filepath.Join(dir, fmt.Sprintf("service%d.yaml", m))
		cfg := fmt.Sprintf("cluster:\n  name: bench\n  automanaged:\n    port: %d\n    peers: [%s]\n    refresh: 500ms\ntracker:\n  ackers: 3\n%s%s  mode: service\n",
			ports[m], peers, gw, job)
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			b.Fatal(err)
		}
		p, _ := startNode(b, path)
		defer func() { _ = p.Process.Kill(); _, _ = p.Process.Wait() }()
	}
	status := fmt.Sprintf("http://127.0.0.1:%d/api/status", ports[3])
	var t0 time.Time
	var c0 uint64
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		var st gateway.Status
		if res, err := http.Get(status); err == nil {
			_ = json.NewDecoder(res.Body).Decode(&st)
			res.Body.Close()
		}
		if st.Run != nil && t0.IsZero() && st.Run.Completed >= orders/10 {
			t0, c0 = time.Now(), st.Run.Completed
		}
		if st.Run != nil && st.Run.Completed >= orders {
			return float64(st.Run.Completed-c0) / time.Since(t0).Seconds()
		}
		if time.Now().After(deadline) {
			b.Fatalf("the service did not complete %d orders in 5 min", orders)
		}
	}
}
