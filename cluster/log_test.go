package cluster

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
)

func TestSlogIntoLogrus(t *testing.T) {
	for _, tc := range []struct {
		name  string
		level logrus.Level
		log   func(*slog.Logger)
		want  []string // substrings of the output; none means no output
	}{
		{"info with attrs", logrus.InfoLevel, func(l *slog.Logger) {
			l.Info("member started", slog.String("address", "127.0.0.1:1"), slog.Int("n", 3))
		}, []string{"level=info", `msg="member started"`, "address=", "n=3"}},
		{"groups and With", logrus.InfoLevel, func(l *slog.Logger) {
			l.With("kind", "acker").WithGroup("g").Warn("slow", "ms", 12)
		}, []string{"level=warning", "kind=acker", "g.ms=12"}},
		{"error", logrus.InfoLevel, func(l *slog.Logger) { l.Error("boom") }, []string{"level=error", "msg=boom"}},
		{"group attrs flattened", logrus.InfoLevel, func(l *slog.Logger) {
			l.WithGroup("").Info("x", slog.Group("req", slog.Int("id", 7)), slog.Any("", nil))
		}, []string{"req.id=7"}},
		{"below the level", logrus.WarnLevel, func(l *slog.Logger) { l.Info("chatter"); l.Debug("more") }, nil},
		{"a demoted message at its level", logrus.DebugLevel, func(l *slog.Logger) {
			l.Error("EndpointWriter lost connection")
		}, []string{"level=info"}},
		{"a lost connection, info", logrus.InfoLevel, func(l *slog.Logger) {
			l.Error("EndpointWriter lost connection", "address", "127.0.0.1:2")
		}, []string{"level=info", "address="}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			lg := logrus.New()
			lg.SetOutput(&buf)
			lg.SetLevel(tc.level)
			lg.SetFormatter(&logrus.TextFormatter{DisableColors: true})
			tc.log(NewSlogLogger(lg))
			out := buf.String()
			if len(tc.want) == 0 && out != "" {
				t.Fatalf("logged %q", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Fatalf("output %q lacks %q", out, w)
				}
			}
		})
	}
}

func TestStartEmbedded(t *testing.T) {
	lg := logrus.New()
	var buf bytes.Buffer
	lg.SetOutput(&buf)
	n, err := StartEmbedded("t", nil, lg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	if addr := n.System.Address(); !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("member listens on %s, want 127.0.0.1", addr)
	}
	if n.Cluster.MemberList.Members().Len() != 1 {
		t.Fatalf("%d members, want 1", n.Cluster.MemberList.Members().Len())
	}
}
