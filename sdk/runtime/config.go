package runtime

import (
	"fmt"
	goruntime "runtime"
	"time"
)

// Defaults for Config fields left zero. They are production values: plugintest loads plugins with them too, so
// an author sees the limits the controller enforces.
const (
	DefaultMemoryLimit    = 256 << 20
	DefaultTimeout        = 5 * time.Second
	DefaultMaxOutputBytes = 64 << 10
	// DefaultIdleMemoryLimit is well above a Go plugin's steady state (a few MiB of heap plus its binary).
	DefaultIdleMemoryLimit = 64 << 20
)

// wasmPageSize is the size of a WebAssembly memory page.
const wasmPageSize = 64 << 10

// Config sets the sandbox's limits and caches. The zero value is usable.
type Config struct {
	// MemoryLimit caps the linear memory of every instance, in bytes (rounded down to 64 KiB pages).
	// Default DefaultMemoryLimit.
	MemoryLimit uint64
	// Timeout bounds every call, including the first call's language-runtime start-up. Interrupting guest code
	// needs a check in every loop: on the fast path a fuel counter instrumented into the module (a few
	// instructions per loop iteration and function entry, see package wasmbin), otherwise wazero's
	// close-on-context-done mode, in which every loop back-edge exits to Go to check the module's state (~30 ns a
	// loop iteration, ~1 µs a Go allocation in the guest). It is always on: a plugin must never be able to hold
	// a controller worker forever. Default DefaultTimeout.
	Timeout time.Duration
	// CacheDir keeps compiled machine code on disk across restarts. Empty means memory only. The directory
	// must be private to this process's user: wazero trusts what it finds there.
	CacheDir string
	// MaxIdleInstances is how many healthy instances a module keeps for reuse; negative keeps none.
	// Default GOMAXPROCS.
	MaxIdleInstances int
	// IdleMemoryLimit: an instance whose linear memory grew beyond this is closed after its call instead of
	// kept idle, because a WebAssembly memory never shrinks. Default DefaultIdleMemoryLimit.
	IdleMemoryLimit uint64
	// MaxOutputBytes bounds the guest stdout and stderr kept per call. Default DefaultMaxOutputBytes.
	MaxOutputBytes int
	// CompileWorkers is how many goroutines compile one module's functions in parallel. Default 1: on an idle
	// two-core machine two workers cut a cold compile from ~1.4 s to ~0.7 s, but on a busy one (other
	// processes, CPU throttling) they were measured at up to 3 s, and cold compiles happen once per digest
	// anyway when CacheDir is set.
	CompileWorkers int
	// DisableFastPath runs every module on the standard Extism path, even modules that export the fast I/O path
	// of SPEC.md §8 (every plugin built with the guest package). The two paths give the same results; the fast
	// one moves a render's request and response with one copy each instead of a host call per eight bytes and
	// interrupts the guest with an instrumented counter instead of wazero's per-iteration exit to Go, which makes
	// a realistic render three to four times faster. For tests and for comparing the paths.
	DisableFastPath bool
	// Hooks receive metrics and guest output.
	Hooks Hooks
}

func (c Config) withDefaults() (Config, error) {
	if c.MemoryLimit == 0 {
		c.MemoryLimit = DefaultMemoryLimit
	}
	if c.MemoryLimit < 2*wasmPageSize {
		return c, fmt.Errorf("memory limit %d bytes is below two 64 KiB pages", c.MemoryLimit)
	}
	if c.MemoryLimit/wasmPageSize > 65536 {
		return c, fmt.Errorf("memory limit %d bytes exceeds the 4 GiB a 32-bit WebAssembly memory can address", c.MemoryLimit)
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Timeout < 0 {
		return c, fmt.Errorf("timeout %s is negative", c.Timeout)
	}
	if c.MaxIdleInstances == 0 {
		c.MaxIdleInstances = goruntime.GOMAXPROCS(0)
	}
	if c.MaxIdleInstances < 0 {
		c.MaxIdleInstances = 0
	}
	if c.CompileWorkers <= 0 {
		c.CompileWorkers = 1
	}
	if c.IdleMemoryLimit == 0 {
		c.IdleMemoryLimit = DefaultIdleMemoryLimit
	}
	if c.MaxOutputBytes <= 0 {
		c.MaxOutputBytes = DefaultMaxOutputBytes
	}
	return c, nil
}

func (c Config) memoryPages() uint32 { return uint32(c.MemoryLimit / wasmPageSize) }
