//go:build wasip1

package guest

import "runtime/debug"

// Garbage collection is loop-heavy code, which the host's interruptible mode slows down several times, and the
// host runs every call on a fresh instance, so a render's heap lives for one call. Collecting less often
// (GOGC=800) lets a typical render finish without a collection; the soft memory limit keeps a plugin with a
// large heap collecting well before the host's default 64 MiB cap. A plugin may override both in its own init.
func init() {
	debug.SetGCPercent(800)
	debug.SetMemoryLimit(48 << 20)
}
