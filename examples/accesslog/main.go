// Command accesslog is a program of its own that runs acktor members: it
// registers one topology, "accesslog", which reads web server access log
// lines ("GET /index.html 200 5120"), and counts requests and bytes per
// status code, each line tracked as a root. Run three copies with
// node0.yaml (the driver), node1.yaml and node2.yaml to run it on a
// cluster of three members as a batch job over access.log, or with
// service0.yaml, service1.yaml and service2.yaml to serve it over
// generated lines (generate.go) until stopped; see README.md.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/acktor/acktor/actors"
	"github.com/acktor/acktor/member"
	"github.com/acktor/acktor/window"
)

// settings are the topology's own keys of the job section.
type settings struct {
	Parsers  int     `yaml:"parsers"`
	Counters int     `yaml:"counters"`
	Rate     float64 `yaml:"rate"` // job.source generator: lines/s per spout task (generate.go)
}

// parse emits (status, bytes) for each well-formed line; a malformed line
// is rejected: its root is dead-lettered, not replayed.
type parse struct{}

func (parse) Process(t *actors.Tuple, c *actors.Collector) {
	f := strings.Fields(t.Values()[0])
	if len(f) != 4 {
		c.Reject(t, fmt.Sprintf("want METHOD PATH STATUS BYTES, got %d fields", len(f)))
		return
	}
	if _, err := strconv.ParseUint(f[3], 10, 63); err != nil {
		c.Reject(t, "bytes: "+err.Error())
		return
	}
	if err := c.Emit([]*actors.Tuple{t}, f[2], f[3]); err != nil {
		c.Fail(t)
		return
	}
	c.Ack(t)
}

func topology() member.Topology {
	return member.Topology{Name: "accesslog", Build: func(j *member.Job) (*actors.Topology, error) {
		s := settings{Parsers: 2, Counters: 2}
		if err := j.Decode(&s); err != nil {
			return nil, err
		}
		var b actors.Builder
		b.Spout("lines", j.Spouts, j.Source)
		b.Processor("parse", s.Parsers, func(actors.TaskInfo) (actors.Processor, error) { return parse{}, nil }).LocalOrShuffle("lines")
		b.Counter("status", s.Counters, actors.CounterOptions{Key: 0, Value: 1, Window: j.Window, ExactlyOnce: j.ExactlyOnce}, nil).Fields("parse", 0)
		return b.Build()
	}, Results: results, Generate: generate}
}

// results writes status<TAB>requests<TAB>bytes, by status.
func results(w io.Writer, st *actors.RunStats) error {
	top := slices.Clone(st.Counters["status"].Top)
	slices.SortFunc(top, func(a, b window.Entry) int { return strings.Compare(a.Key, b.Key) })
	bw := bufio.NewWriter(w)
	for _, e := range top {
		fmt.Fprintf(bw, "%s\t%d\t%d\n", e.Key, e.Count, e.Sum)
	}
	return bw.Flush()
}

func main() {
	path := flag.String("config", "examples/accesslog/node0.yaml", "the member's config")
	level := flag.String("log-level", "warning", "debug, info, warning or error")
	flag.Parse()
	log := logrus.New()
	lvl, err := logrus.ParseLevel(*level)
	log.SetLevel(lvl)
	var cfg member.Config
	if err == nil {
		cfg, err = member.Load(*path)
	}
	if err == nil {
		err = member.Run(context.Background(), cfg, log, topology())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "accesslog:", err)
		os.Exit(1)
	}
}
