//go:build wasip1

package guest

import "runtime/debug"

// Garbage collection is loop-heavy code, which the host's interruptible mode slows down several times, and a
// render's heap is small and short-lived. Collecting less often (GOGC=800) makes a typical render about 15%
// faster; the soft memory limit keeps a plugin with a large live heap collecting well before the host's
// default 256 MiB cap. A plugin may override both in its own init.
func init() {
	debug.SetGCPercent(800)
	debug.SetMemoryLimit(160 << 20)
}
