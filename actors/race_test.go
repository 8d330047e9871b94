//go:build race

package actors

// raceEnabled: the race detector drops sync.Pool's objects at random.
const raceEnabled = true
