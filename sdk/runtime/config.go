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
	// DefaultMemoryBudget lets seven calls with the default limits (73 MiB each: 64 MiB of guest memory and
	// 9 MiB for input and output) run at once, even if all used all their memory.
	DefaultMemoryBudget = 512 << 20
	// DefaultMaxModuleBytes is seven times the largest default plugin (4.5 MB).
	DefaultMaxModuleBytes = 32 << 20
	// DefaultCompileConcurrency: two compilations at once, so a slow one (a large module, or a hostile one:
	// package wasmcheck does not bound the compiler's time) leaves a lane for the others.
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
	// the language runtime's start-up to the export's return: the call's context ends then, and the module's
	// code stops at its next loop header (wazero's close-on-context-done). Code that never loops (a tree of
	// calls) is not stopped in the process; see the package documentation. Default DefaultTimeout.
	Timeout time.Duration
	// CacheDir keeps compiled machine code on disk across restarts. Empty means memory only. The directory
	// must be private to this process's user: wazero trusts what it finds there.
	CacheDir string
	// ReadOnlyCache reads CacheDir and expects not to be able to write it: the runtime keeps no snapshot or
	// marker there, and a module whose machine code is missing is compiled in memory (wazero still tries to
	// add it to the directory: the process must be unable to write there, which is what this is for). For a
	// process that runs guest code and so must not be able to write the cache (osm-controller's plugin hosts,
	// confined by Landlock, whose cache a process that runs no guest code fills: Runtime.Compile).
	ReadOnlyCache bool
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
	// MemoryBudget bounds the linear memory of all instances at once, across modules. Each call reserves its
	// instance's worst case (MemoryLimit, plus the kernel's MaxRequestBytes+MaxResponseBytes+1 MiB) before the
	// instance is created and waits, within its context, while the budget is spent. Default
	// DefaultMemoryBudget; it must hold at least one call.
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
	// NoInterrupt compiles modules without wazero's check, at every loop header, of whether the call's context
	// has ended: a call then runs past its timeout until it returns. Only for embedders that end the whole
	// process past the deadline, as osm-controller's plugin host is ended by its supervisor: the check costs a
	// default plugin's render about 2.5 ms of CPU (3.9 → 6.4 ms, BenchmarkRenderDefaultUbuntu), and a Go
	// module starts every function with a loop.
	NoInterrupt bool
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

// callMemory is the most linear memory one call's instance can hold: the guest's and the kernel's.
func (c Config) callMemory() uint64 { return c.MemoryLimit + c.ioMemory() }

// callMemoryParts spells out callMemory for error messages.
func (c Config) callMemoryParts() string {
	return fmt.Sprintf("memory limit %d MiB plus %d MiB for input and output", c.MemoryLimit>>20, c.ioMemory()>>20)
}
