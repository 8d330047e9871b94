package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/acktor/acktor/actors"
	"github.com/acktor/acktor/member"
	"github.com/acktor/acktor/source"
)

// This file is not part of the topology: it is the stream of access log
// lines that job.source generator reads, so that the example can run as a
// service for as long as one likes to query it.

// generate is the topology's stream for job.source generator: lines
// access log lines over all spout tasks, seeded by tracker.seed, at
// job.rate lines per second per spout task (0: as fast as they go).
func generate(j *member.Job, lines int64) (source.Factory, error) {
	var s settings
	if err := j.Decode(&s); err != nil {
		return nil, err
	}
	if s.Rate < 0 {
		return nil, &actors.FieldError{Field: "Rate", Value: fmt.Sprint(s.Rate), Want: ">= 0 lines per second per spout task"}
	}
	return func(task, tasks int) (source.Source, error) {
		if err := source.CheckTask(task, tasks); err != nil {
			return nil, err
		}
		return &accessLines{seed: j.Seed, lines: uint64(lines), rate: s.Rate,
			task: uint64(task), next: uint64(task), step: uint64(tasks)}, nil
	}, nil
}

var (
	methods = []string{"GET", "GET", "GET", "GET", "GET", "GET", "POST", "POST", "HEAD", "PUT"}
	paths   = []string{"/", "/index.html", "/about.html", "/login", "/api/items", "/api/items/42",
		"/static/app.js", "/static/style.css", "/img/logo.png", "/favicon.ico"}
	// malformed are lines parse rejects: they go to the dead letters.
	malformed = []string{"GET /index.html 200", "GET /index.html 200 5k", "-", "GET /index.html HTTP/1.1 200 512 extra"}
)

// accessLine is line i of the stream: it depends only on the seed and i,
// so a replay makes it again. About one line in 500 is malformed; the
// statuses are about 78% 200, 12% 304, 8% 404 and 2% 500.
func accessLine(seed, i uint64) string {
	r := rand.New(rand.NewPCG(seed, i))
	if r.IntN(500) == 0 {
		return malformed[r.IntN(len(malformed))]
	}
	method, path := methods[r.IntN(len(methods))], paths[r.IntN(len(paths))]
	status, bytes := 200, 200+r.IntN(20_000)
	switch p := r.IntN(100); {
	case p >= 98:
		status, bytes = 500, 300+r.IntN(200)
	case p >= 90:
		status, bytes = 404, 150+r.IntN(50)
	case p >= 78:
		status, bytes = 304, 0
	}
	return fmt.Sprintf("%s %s %d %d", method, path, status, bytes)
}

// accessLines is the source of one spout task: task i of n reads lines
// i, i+n, i+2n, ... (a line's number is its root's id).
type accessLines struct {
	seed, lines      uint64
	rate             float64
	task, next, step uint64
	due              time.Time // paced: when the next line may go
}

func (a *accessLines) Next() (source.Root, error) {
	if a.next >= a.lines {
		return source.Root{}, io.EOF
	}
	if a.rate > 0 {
		now := time.Now()
		if now.Before(a.due) {
			return source.Root{}, source.ErrNotReady
		}
		if lag := now.Add(-time.Second); a.due.Before(lag) {
			a.due = lag // after a stall, catch up one second's worth at most
		}
		a.due = a.due.Add(time.Duration(float64(time.Second) / a.rate))
	}
	r := source.Root{ID: a.next, Payload: accessLine(a.seed, a.next)} // Time 0: the time the spout reads it
	a.next += a.step
	return r, nil
}

func (a *accessLines) Replay(id uint64) (string, error) {
	if id >= a.lines || id%a.step != a.task {
		return "", fmt.Errorf("accesslog: line %d is not one of task %d of %d: %w", id, a.task, a.step, source.ErrUnknownRoot)
	}
	return accessLine(a.seed, id), nil
}

func (a *accessLines) Done(uint64)  {}
func (a *accessLines) Close() error { return nil }

func (a *accessLines) Total() int64 {
	if a.task >= a.lines {
		return 0
	}
	return int64((a.lines - a.task + a.step - 1) / a.step)
}

// Position and Seek let a spout task move to another member (a join, a
// leave) and go on where it was.
func (a *accessLines) Position() uint64 { return a.next }

func (a *accessLines) Seek(pos uint64) error {
	if pos%a.step != a.task {
		return fmt.Errorf("accesslog: line %d is not one of task %d of %d", pos, a.task, a.step)
	}
	a.next = pos
	return nil
}
