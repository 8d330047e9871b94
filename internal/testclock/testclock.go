// Package testclock is a clock tests move by hand, safe for the goroutines
// of the code under test to read.
package testclock

import (
	"sync"
	"time"
)

// Clock reads the time a test set; its zero value reads the zero time.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a Clock reading t.
func New(t time.Time) *Clock { return &Clock{now: t} }

// Now is the time the test set, for an injected now func.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Add moves the clock by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
