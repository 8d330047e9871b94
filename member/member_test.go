package member

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"go.yaml.in/yaml/v3"

	"github.com/acktor/acktor/actors"
	"github.com/acktor/acktor/gateway"
	"github.com/acktor/acktor/internal/testserver"
)

// firstLetters is a user's topology of its own: it counts the lines of
// its input by their first letter, with one setting (job.letters: how many
// of the first letters make the key).
type firstLetters struct {
	Letters int `yaml:"letters"`
	Tasks   int `yaml:"tasks"`
}

// prefix emits each line's first n letters, anchored to it.
type prefix struct{ n int }

func (p prefix) Process(t *actors.Tuple, c *actors.Collector) {
	line := t.Values()[0]
	if err := c.Emit([]*actors.Tuple{t}, line[:min(p.n, len(line))]); err != nil {
		c.Fail(t)
		return
	}
	c.Ack(t)
}

func firstLettersTopology() Topology {
	return Topology{Name: "first-letters", Build: func(j *Job) (*actors.Topology, error) {
		o := firstLetters{Letters: 1, Tasks: 1}
		if err := j.Decode(&o); err != nil {
			return nil, err
		}
		if o.Letters < 1 {
			return nil, &actors.FieldError{Field: "Letters", Value: o.Letters, Want: ">= 1"}
		}
		var b actors.Builder
		b.Spout("lines", j.Spouts, j.Source)
		b.Processor("prefix", 1, func(actors.TaskInfo) (actors.Processor, error) { return prefix{o.Letters}, nil }).Shuffle("lines")
		b.Counter("by-letter", o.Tasks, actors.CounterOptions{Window: j.Window, ExactlyOnce: j.ExactlyOnce, Value: -1}, nil).Fields("prefix", 0)
		return b.Build()
	}}
}

// embedded is the config of a member that runs job over input in this
// process, writing dir/out.tsv.
func embedded(t *testing.T, input string, job map[string]any) Config {
	t.Helper()
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(in, []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Default()
	cfg.Cluster.Provider = "embedded"
	cfg.Tracker.Progress = "none"
	cfg.Job.Topology, cfg.Job.Driver, cfg.Job.Input = "first-letters", true, in
	cfg.Job.Output, cfg.Job.Stats = filepath.Join(dir, "out.tsv"), filepath.Join(dir, "stats.json")
	for k, v := range job {
		if err := cfg.Job.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	return cfg
}

func quiet() *logrus.Logger {
	log := logrus.New()
	log.SetOutput(&bytes.Buffer{})
	return log
}

// TestRunUserTopology: a program registers a topology of its own and runs
// it with Run, its settings read from the job section, its results the
// counters' keys and counts.
func TestRunUserTopology(t *testing.T) {
	for _, tc := range []struct {
		name string
		job  map[string]any
		want string
	}{
		{"defaults", nil, "a\t3\nb\t1\n"},
		{"its own settings", map[string]any{"letters": 2, "tasks": 3}, "ab\t2\nac\t1\nbd\t1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := embedded(t, "abc\nabd\nacx\nbdd\n", tc.job)
			if err := Run(context.Background(), cfg, quiet(), firstLettersTopology()); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(cfg.Job.Output)
			if err != nil || string(got) != tc.want {
				t.Fatalf("output %q (%v), want %q", got, err, tc.want)
			}
			if st, err := os.ReadFile(cfg.Job.Stats); err != nil || !strings.Contains(string(st), `"completed": 4`) {
				t.Fatalf("stats %s (%v)", st, err)
			}
		})
	}
}

// TestRunSettingErrors: a wrong setting, the member's or the topology's,
// is a *SettingError naming its key, before anything runs.
func TestRunSettingErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		job  map[string]any
		edit func(*Config)
		key  string
		rest string
	}{
		{"unknown key", map[string]any{"letter": 2}, nil, "job.letter", "field letter not found"},
		{"wrong type", map[string]any{"letters": "two"}, nil, "job.letters", `"two" is not a whole number`},
		{"a fraction", map[string]any{"tasks": 1.5}, nil, "job.tasks", "1.5 is not a whole number"},
		{"the topology's limit", map[string]any{"letters": 0}, nil, "job.letters", " 0, want >= 1"},
		{"the runtime's limit", nil, func(c *Config) { c.Tracker.Ackers = -1 }, "tracker.ackers", " -1, want"},
		{"no such topology", nil, func(c *Config) { c.Job.Topology = "join" }, "job.topology", `"join": want one of [first-letters]`},
		{"no such input", nil, func(c *Config) { c.Job.Input += ".gone" }, "job.input", "no such file"},
		{"a mode", nil, func(c *Config) { c.Job.Mode = "forever" }, "job.mode", `"forever": want batch`},
		{"a service with a driver", nil, func(c *Config) { c.Job.Mode = "service" }, "job.driver", "job.mode is service, which has no driver"},
		{"a service with an output", nil, func(c *Config) { c.Job.Mode, c.Job.Driver = "service", false }, "job.output", "writes no results"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := embedded(t, "abc\n", tc.job)
			if tc.edit != nil {
				tc.edit(&cfg)
			}
			err := Run(context.Background(), cfg, quiet(), firstLettersTopology())
			var se *SettingError
			if !errors.As(err, &se) || se.Key != tc.key || !strings.Contains(se.Rest, tc.rest) {
				t.Fatalf("error %v, want a SettingError of %s saying %q", err, tc.key, tc.rest)
			}
			if _, err := os.Stat(cfg.Job.Output); err == nil && tc.key != "job.output" {
				if b, _ := os.ReadFile(cfg.Job.Output); len(b) != 0 {
					t.Fatalf("output written: %q", b)
				}
			}
		})
	}
}

// TestOutcome: a run of no root is no failure, but says so; a dead letter
// or an unfinished root is.
func TestOutcome(t *testing.T) {
	var buf bytes.Buffer
	log := logrus.New()
	log.SetOutput(&buf)
	b := &batch{dead: &deadLetters{}, log: log}
	if err := b.outcome(&actors.RunStats{}, "lines"); err != nil || !strings.Contains(buf.String(), "no lines to count: the input is empty") {
		t.Fatalf("outcome %v, logged %q", err, buf.String())
	}
	b.dead.DeadLetter(actors.DeadLetter{Component: "lines", RootID: 7, Reason: "bad"})
	st := &actors.RunStats{Progress: actors.Progress{Roots: 2, Completed: 1, DeadLettered: 1}}
	if err := b.outcome(st, "lines"); err == nil || err.Error() != "1 of 2 lines dead-lettered (first: root 7 of lines: bad)" {
		t.Fatalf("outcome %v", err)
	}
	st.DeadLettered = 0
	if err := b.outcome(st, "lines"); err == nil || err.Error() != "1 of 2 lines finished" {
		t.Fatalf("outcome %v", err)
	}
}

// TestLoad: a file is read over the defaults; a key of the job the member
// does not know is left to the topology, any other unknown key is an
// error naming its line.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text, err string
		ok              func(Config) bool // with no error
	}{
		{"a topology's key", "job:\n  input: in.txt\n  letters: 2\n", "", func(c Config) bool {
			return c.Job.Options["letters"].Value == "2" && c.Tracker.Timeout == 30*time.Second
		}},
		{"unknown key", "tracker:\n  ackerz: 2\njob:\n  input: in.txt\n", "line 2: tracker.ackerz: no such key", nil},
		{"unknown key in a source", "job:\n  source: jetstream\n  jetstream:\n    url: nats://x\n    brokers: [a]\n", "line 5: job.jetstream.brokers: no such key", nil},
		{"a YAML merge", "tracker: &t\n  ackers: 2\ngateway:\n  <<: {address: \"127.0.0.1:7070\"}\njob:\n  input: in.txt\n", "", func(c Config) bool {
			return c.Gateway.Address == "127.0.0.1:7070"
		}},
		{"unknown key in a list", "cluster:\n  automanaged:\n    peerz: [a]\njob:\n  input: in.txt\n", "line 3: cluster.automanaged.peerz: no such key", nil},
		{"no input", "job:\n  topology: x\n", "job.input: empty", nil},
		{"a duration", "tracker:\n  timeout: soon\njob:\n  input: in.txt\n", `line 2: tracker.timeout: "soon" is not a duration`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml")
			if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := Load(path)
			if tc.err == "" {
				if err != nil || !tc.ok(cfg) {
					t.Fatalf("Load: %v, %+v", err, cfg.Job)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one saying %q", err, tc.err)
			}
		})
	}
}

// TestRunService: a service on an embedded member runs until stopped; its
// results are read from the gateway while it runs.
func TestRunService(t *testing.T) {
	cfg := embedded(t, "abc\nabd\nacx\nbdd\n", nil)
	cfg.Job.Mode, cfg.Job.Driver, cfg.Job.Output, cfg.Job.Stats = "service", false, "", ""
	cfg.Gateway.Address = fmt.Sprintf("127.0.0.1:%d", testserver.FreePorts(t, 1)[0])
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- Run(ctx, cfg, quiet(), firstLettersTopology()) }()
	url := "http://" + cfg.Gateway.Address + "/api/counters/by-letter?top=10"
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var a gateway.CounterAnswer
		if res, err := http.Get(url); err == nil {
			err = json.NewDecoder(res.Body).Decode(&a)
			res.Body.Close()
			if err == nil && len(a.Top) == 2 && a.Top[0].Key == "a" && a.Top[0].Count == 3 && a.Top[1].Count == 1 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the service's counts did not reach the truth in 20 s")
		}
	}
	select {
	case err := <-ran:
		t.Fatalf("the service ended by itself: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
}

// TestSharedText: what members compare is the settings' values, not how a
// file spells them (comments, quotes), and not a member's own settings.
func TestSharedText(t *testing.T) {
	with := func(value string, own bool) string {
		cfg := Default()
		cfg.Job.Input = "in.txt"
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte("min: "+value), &doc); err != nil {
			t.Fatal(err)
		}
		cfg.Job.Options = map[string]yaml.Node{"min": *doc.Content[0].Content[1]}
		if own {
			cfg.Job.Driver, cfg.Job.Output, cfg.Tracker.Progress = true, "out.tsv", "bar"
		}
		return cfg.sharedText()
	}
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"3", "3 # words", true},
		{"'x'", `"x"`, true},
		{"3", "4", false},
		{"3", `"3"`, false}, // a number and a string
	} {
		if got := with(tc.a, false) == with(tc.b, true); got != tc.same {
			t.Errorf("min: %s and min: %s compare equal %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}

// TestExampleConfigs: every member config the repository ships loads and
// validates as it is.
func TestExampleConfigs(t *testing.T) {
	paths, err := filepath.Glob("../examples/*/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range paths {
		if filepath.Base(p) == "client.yaml" { // a remote client's, not a member's
			continue
		}
		n++
		if _, err := Load(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if n < 8 {
		t.Fatalf("%d member configs found under examples/, want at least 8", n)
	}
}

// TestGatewayHTTPS: with gateway.cert and gateway.key the gateway serves
// HTTPS only, and an admin token may then be used off loopback.
func TestGatewayHTTPS(t *testing.T) {
	certs := testserver.Certs(t, t.TempDir(), "gateway")
	cfg := embedded(t, "abc\n", nil)
	cfg.Job.Mode, cfg.Job.Driver, cfg.Job.Output, cfg.Job.Stats = "service", false, "", ""
	cfg.Gateway.Address = fmt.Sprintf("127.0.0.1:%d", testserver.FreePorts(t, 1)[0])
	cfg.Gateway.Cert, cfg.Gateway.Key = certs.Cert, certs.Key
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- Run(ctx, cfg, quiet(), firstLettersTopology()) }()
	defer func() { cancel(); <-ran }()
	pem, err := os.ReadFile(certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}, Timeout: 2 * time.Second}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		res, err := client.Get("https://" + cfg.Gateway.Address + "/api/status")
		if err == nil {
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status over HTTPS: %s", res.Status)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no HTTPS answer in 20 s: %v", err)
		}
	}
	if res, err := http.Get("http://" + cfg.Gateway.Address + "/api/status"); err == nil && res.StatusCode == http.StatusOK {
		t.Fatal("plain HTTP answered 200 too")
	}
	off := cfg
	off.Gateway.Address, off.Gateway.Token = "10.1.2.3:7070", "s3cret"
	if err := off.Validate(); err != nil {
		t.Fatalf("a token off loopback over HTTPS: %v", err)
	}
	off.Gateway.Key = ""
	var se *SettingError
	if err := off.Validate(); !errors.As(err, &se) || se.Key != "gateway.cert" {
		t.Fatalf("a certificate without its key: %v", err)
	}
}
