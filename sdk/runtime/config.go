package runtime

import (
	"fmt"
	"time"
)

// Defaults for Config fields left zero. They are production values: plugintest loads plugins with them too, so
// an author sees the limits the controller enforces.
const (
	// DefaultMemoryLimit is more than ten times what the default OS plugins' renders use (5.5 MiB, guest and
	// Extism kernel together, on a fresh instance) and leaves a Go guest room to reach its soft memory limit
	// (48 MiB, set by the guest package) before the cap.
	DefaultMemoryLimit = 64 << 20
	DefaultTimeout     = 5 * time.Second
	// DefaultMaxOutputBytes bounds the guest's stdout and stderr kept per call.
	DefaultMaxOutputBytes = 64 << 10
	// DefaultMaxRequestBytes and DefaultMaxResponseBytes bound a call's JSON input and output. A node's
	// user-data must fit a 1 MiB Kubernetes Secret, so a larger render is useless anyway.
	DefaultMaxRequestBytes  = 4 << 20
	DefaultMaxResponseBytes = 4 << 20
	// DefaultMemoryBudget lets two calls with the default limits (201 MiB each: 64 MiB of guest memory, 9 MiB
	// for input and output, MaxStackBytes of call stack) run at once, even if both used all their memory.
	DefaultMemoryBudget = 512 << 20
	// MaxStackBytes is the most call stack one call can hold at once. wazero keeps a call's stack on the Go
	// heap and doubles it as the guest recurses, until it passes a ceiling the host cannot lower (50 MB): a
	// guest recursing without end traps with a stack overflow after allocating an 84 MB stack while still
	// holding the 42 MB one it copies from. A Go plugin keeps its goroutine stacks in its linear memory and
	// uses a few KiB of this one. Every call reserves MaxStackBytes from the budget, and the stacks a deep
	// call outgrew are garbage only a collection frees, so a host must also bound its Go heap with a memory
	// limit (osm-controller sets one from its cgroup: host/app SetGoMemoryLimit). Measured with sixteen
	// recursing calls under a budget of two (TestDeepRecursionStaysWithinTheBudget): with both, the process
	// grew by 263–270 MiB for a 290 MiB budget; with the reservation alone by 519–613 MiB; with neither by
	// 530–544 MiB for a 34 MiB budget.
	MaxStackBytes = 128 << 20
	// DefaultMaxModuleBytes is seven times the largest default plugin (4.5 MB).
	DefaultMaxModuleBytes = 32 << 20
	// DefaultCompileConcurrency: two compilations at once, so a slow one (a large hostile module within the
	// limits of package wasmcheck takes seconds) leaves a lane for the others.
	DefaultCompileConcurrency = 2
	// MaxSnapshotGrowth bounds how much larger than the original a module rebuilt from a snapshot may be:
	// the initialised memory becomes data the loaded module keeps. A default plugin grows by 0.8 MB.
	MaxSnapshotGrowth = 8 << 20
)

// wasmPageSize is the size of a WebAssembly memory page.
const wasmPageSize = 64 << 10

// ioSlack is room in the Extism kernel's memory beyond the request and response: the error message, the
// kernel's own bookkeeping.
const ioSlack = 1 << 20

// Config sets the sandbox's limits and caches. The zero value is usable.
type Config struct {
	// MemoryLimit caps the linear memory of every instance, in bytes (rounded down to 64 KiB pages).
	// Default DefaultMemoryLimit.
	MemoryLimit uint64
	// Timeout bounds every call, from the instance's creation (which runs the module's start function) through
	// the language runtime's start-up to the export's return. The module is rewritten to yield to the host
	// every few thousand loop iterations and calls (package wasmstop), and the host stops it there once the
	// call's context has ended, so no code of the module can avoid it. Default DefaultTimeout.
	Timeout time.Duration
	// CacheDir keeps compiled machine code on disk across restarts. Empty means memory only. The directory
	// must be private to this process's user: wazero trusts what it finds there.
	CacheDir string
	// MaxOutputBytes bounds the guest stdout and stderr kept per call. Default DefaultMaxOutputBytes.
	MaxOutputBytes int
	// MaxRequestBytes bounds a call's JSON input; a larger request fails with ReasonInvalidInput before the
	// plugin runs. Default DefaultMaxRequestBytes.
	MaxRequestBytes int
	// MaxResponseBytes bounds a call's output. The output is built in the Extism kernel's memory, which is
	// capped at MaxRequestBytes+MaxResponseBytes+1 MiB, so a plugin cannot even produce a larger one; the call
	// fails with ReasonInvalidOutput, naming the limit, before anything is copied into the host. Default
	// DefaultMaxResponseBytes.
	MaxResponseBytes int
	// MemoryBudget bounds the memory of all instances at once, across modules. Each call reserves its
	// instance's worst case (MemoryLimit, plus the kernel's MaxRequestBytes+MaxResponseBytes+1 MiB, plus
	// MaxStackBytes of call stack) before the instance is created and waits, within its context, while the
	// budget is spent. Default DefaultMemoryBudget; it must hold at least one call.
	MemoryBudget uint64
	// MaxModuleBytes bounds the size of a module's binary. Default DefaultMaxModuleBytes.
	MaxModuleBytes int
	// CompileWorkers is how many goroutines compile one module's functions in parallel. Default 1: on an idle
	// two-core machine two workers cut a cold compile from ~1.4 s to ~0.7 s, but on a busy one (other
	// processes, CPU throttling) they were measured at up to 3 s, and cold compiles happen once per digest
	// anyway when CacheDir is set.
	CompileWorkers int
	// CompileConcurrency is how many modules compile at once. Default DefaultCompileConcurrency.
	CompileConcurrency int
	// Limits, when set, replaces MemoryBudget and CompileConcurrency with limits shared with other Runtimes.
	Limits *Limits
	// Hooks receive metrics and guest output.
	Hooks Hooks
	// NoSnapshot makes every instance run the module's initialisation itself instead of starting from a
	// snapshot of an initialised instance (SPEC.md §6). Only for comparisons and diagnosis: it makes a render
	// several times slower.
	NoSnapshot bool
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
	if c.CompileWorkers <= 0 {
		c.CompileWorkers = 1
	}
	if c.CompileConcurrency <= 0 {
		c.CompileConcurrency = DefaultCompileConcurrency
	}
	if c.MaxOutputBytes <= 0 {
		c.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.MaxResponseBytes <= 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if c.MaxModuleBytes <= 0 {
		c.MaxModuleBytes = DefaultMaxModuleBytes
	}
	if c.ioMemory() > 1<<31 {
		return c, fmt.Errorf("request and response limits (%d and %d bytes) exceed 2 GiB", c.MaxRequestBytes, c.MaxResponseBytes)
	}
	if c.Limits != nil {
		c.MemoryBudget, c.CompileConcurrency = c.Limits.memory.size, cap(c.Limits.compiling)
	}
	if c.MemoryBudget == 0 {
		c.MemoryBudget = max(DefaultMemoryBudget, c.callMemory())
	}
	if c.MemoryBudget < c.callMemory() {
		return c, fmt.Errorf("memory budget %d MiB holds not even one call (%s)", c.MemoryBudget>>20, c.callMemoryParts())
	}
	return c, nil
}

func (c Config) memoryPages() uint32 { return uint32(c.MemoryLimit / wasmPageSize) }

// ioMemory is the cap on the Extism kernel's memory, which holds a call's input, output and error.
func (c Config) ioMemory() uint64 {
	n := uint64(c.MaxRequestBytes) + uint64(c.MaxResponseBytes) + ioSlack
	return (n + wasmPageSize - 1) / wasmPageSize * wasmPageSize
}

// callMemory is the most memory one call's instance can hold: the guest's and the kernel's linear memory and
// the call stack.
func (c Config) callMemory() uint64 { return c.MemoryLimit + c.ioMemory() + MaxStackBytes }

// callMemoryParts spells out callMemory for error messages.
func (c Config) callMemoryParts() string {
	return fmt.Sprintf("memory limit %d MiB plus %d MiB for input and output plus %d MiB of call stack", c.MemoryLimit>>20, c.ioMemory()>>20, MaxStackBytes>>20)
}
