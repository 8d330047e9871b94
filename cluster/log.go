package cluster

import (
	"context"
	"log/slog"

	"github.com/sirupsen/logrus"
)

// slogHandler routes Proto.Actor's slog records into logrus, so that one
// process has one log format.
type slogHandler struct {
	log    *logrus.Logger
	fields logrus.Fields
	group  string
}

// NewSlogLogger returns an slog.Logger that writes through log.
func NewSlogLogger(log *logrus.Logger) *slog.Logger {
	return slog.New(&slogHandler{log: log, fields: logrus.Fields{}})
}

func level(l slog.Level) logrus.Level {
	switch {
	case l >= slog.LevelError:
		return logrus.ErrorLevel
	case l >= slog.LevelWarn:
		return logrus.WarnLevel
	case l >= slog.LevelInfo:
		return logrus.InfoLevel
	default:
		return logrus.DebugLevel
	}
}

func (h *slogHandler) Enabled(_ context.Context, l slog.Level) bool {
	return h.log.IsLevelEnabled(level(l))
}

// demoted are Proto.Actor's messages that say, at error level, what a
// healthy cluster does, with the level that fits: a clean run logs no
// error. Membership tells when a member is gone; these do not.
var demoted = map[string]slog.Level{
	// the gRPC stream to a member that left closing
	"EndpointWriter lost connection": slog.LevelInfo,
}

func (h *slogHandler) Handle(_ context.Context, r slog.Record) error {
	if l, ok := demoted[r.Message]; ok && r.Level > l {
		if r.Level = l; !h.log.IsLevelEnabled(level(l)) {
			return nil
		}
	}
	fields := make(logrus.Fields, len(h.fields)+r.NumAttrs())
	for k, v := range h.fields {
		fields[k] = v
	}
	r.Attrs(func(a slog.Attr) bool {
		h.add(fields, a)
		return true
	})
	e := h.log.WithFields(fields)
	if !r.Time.IsZero() {
		e = e.WithTime(r.Time)
	}
	e.Log(level(r.Level), r.Message)
	return nil
}

func (h *slogHandler) add(fields logrus.Fields, a slog.Attr) {
	addAttr(fields, h.group, a)
}

// addAttr flattens a into fields under prefix, as slog's handlers do:
// empty attributes are dropped and groups become dotted keys.
func addAttr(fields logrus.Fields, prefix string, a slog.Attr) {
	v := a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	key := a.Key
	if prefix != "" && key != "" {
		key = prefix + "." + key
	} else if key == "" {
		key = prefix
	}
	if v.Kind() == slog.KindGroup {
		for _, g := range v.Group() {
			addAttr(fields, key, g)
		}
		return
	}
	if key == "" {
		return
	}
	fields[key] = v.Any()
}

func (h *slogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	n := &slogHandler{log: h.log, fields: make(logrus.Fields, len(h.fields)+len(attrs)), group: h.group}
	for k, v := range h.fields {
		n.fields[k] = v
	}
	for _, a := range attrs {
		h.add(n.fields, a)
	}
	return n
}

func (h *slogHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	g := name
	if h.group != "" {
		g = h.group + "." + name
	}
	return &slogHandler{log: h.log, fields: h.fields, group: g}
}
