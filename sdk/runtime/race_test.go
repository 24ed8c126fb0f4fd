//go:build race

package runtime_test

// raceEnabled: the race detector slows the host side of every call (instantiation, the Go guest's start-up
// through wazero's Go code) several times, so containment tests give healthy calls more time.
const raceEnabled = true
