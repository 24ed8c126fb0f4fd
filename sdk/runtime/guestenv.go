package runtime

import (
	"encoding/binary"
	"math/rand/v2"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
)

// guestEnv is where an instance's clocks and random source start. Both are deterministic — renders must be
// reproducible, so the guest learns neither the host's time nor real randomness — and an instance started from
// a snapshot continues them from where the snapshotted initialisation left them, so that the guest never sees
// its monotonic clock go back or reads the random bytes its initialisation already consumed.
type guestEnv struct {
	ticks     int64 // clock readings taken so far; each advances the clocks by a millisecond
	randBytes int64 // random bytes read so far
}

// epoch is the wall clock's start, a fixed date (the one wazero's fake clock uses).
const epoch = 1640995200

// guestSeed seeds the random source: a constant, so that every instance reads the same bytes.
var guestSeed = [32]byte{'o', 's', 'm'}

// apply configures mc with the environment; the returned state reports where it went.
func (e guestEnv) apply(mc wazero.ModuleConfig) (wazero.ModuleConfig, *guestState) {
	// A continued source is a stream of its own rather than the first one with the consumed bytes skipped:
	// skipping would cost every instance as much as its initialisation read.
	seed := guestSeed
	binary.LittleEndian.PutUint64(seed[24:], uint64(e.randBytes))
	st := &guestState{rand: rand.NewChaCha8(seed)}
	st.ticks.Store(e.ticks)
	st.randBytes.Store(e.randBytes)
	mc = mc.WithNanotime(st.nanotime, 1).WithWalltime(st.walltime, 1).WithRandSource(countingReader{st})
	return mc, st
}

// guestState is the environment of one running instance.
type guestState struct {
	ticks     atomic.Int64
	randBytes atomic.Int64
	rand      *rand.ChaCha8
}

func (s *guestState) nanotime() int64 { return s.ticks.Add(1) * 1e6 }

func (s *guestState) walltime() (int64, int32) {
	t := s.ticks.Add(1)
	return epoch + t/1000, int32(t%1000) * 1e6
}

// env is the environment an instance continuing from this one starts with.
func (s *guestState) env() guestEnv {
	return guestEnv{ticks: s.ticks.Load(), randBytes: s.randBytes.Load()}
}

type countingReader struct{ s *guestState }

func (r countingReader) Read(p []byte) (int, error) {
	n, err := r.s.rand.Read(p)
	r.s.randBytes.Add(int64(n))
	return n, err
}
