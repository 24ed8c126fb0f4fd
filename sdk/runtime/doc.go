// Package runtime is the sandbox OSM runs plugins in: it checks WebAssembly modules, compiles them with wazero
// through the Extism host SDK, reads and checks their metadata, and calls their ABI v1 exports under a memory
// cap and a per-call timeout, with no network, no file system, a fake clock and deterministic randomness.
//
// What the package itself guarantees, in whatever process it runs:
//
//   - Before compiling, package wasmcheck refuses, in linear time, malformed modules, counts that claim more
//     entries than the bytes left, tables that could grow without bound, more locals, globals, exports, data
//     segments, element entries or names than its limits, and WASI commands.
//   - Every call runs on a fresh instance, closed when it returns: no state reaches the next call.
//   - Each instance's linear memory is capped (Config.MemoryLimit). Each call reserves its instance's worst case
//     (that cap, plus the Extism kernel's memory, which holds the input and the output, capped at
//     MaxRequestBytes+MaxResponseBytes+1 MiB) from a budget shared by all modules (Config.MemoryBudget) before
//     the instance exists; an oversized output fails before it is copied into the host.
//   - Every call has a timeout (Config.Timeout), from the module's start function and _initialize through the
//     export. Modules are compiled with wazero's close-on-context-done: the machine code checks at every loop
//     header whether the call's context has ended, and the call then fails with ReasonTimeout (or
//     ReasonCanceled). A Go module's code is loops throughout, so it stops within the timeout; hand-written
//     code that calls a tree of functions without looping is not stopped, and one that recurses without end
//     traps when its stack overflows.
//
// That is all a host that embeds the runtime in its own process (plugintest, osmctl, a plugin author's tests)
// gets: the timeout is a courtesy of the module's own loop headers, and neither the compiler's time and memory
// nor the call stack wazero keeps on the Go heap is bounded. osm-controller does not rely on it: it runs the
// runtime in a separate plugin-host process, which the operating system bounds and ends past a call's deadline.
//
// A Runtime compiles each module once per digest (sha256 of its bytes) and keeps the machine code both in
// memory and, when Config.CacheDir is set, on disk, so a restarted host is ready to render in about a tenth
// of a second instead of the one to two seconds a cold compile of a Go plugin takes.
//
// Failures are *Error values with a Reason; see the Reason constants. The package depends on nothing of the
// controller: metrics and logs leave through Hooks, so plugin authors can use it in their own tests.
package runtime
