// Package runtime is the sandbox OSM runs plugins in: it compiles WebAssembly modules with wazero, reads and
// checks their metadata, and calls their ABI v1 exports under a memory cap and a per-call timeout, with no
// network, no file system, a fake clock and deterministic randomness.
//
// Modules that export the fast I/O path of SPEC.md §8 (every plugin built with the guest package) run directly
// on wazero: the request is copied into the guest's memory and the response out of it in one go, and the code
// is instrumented with a cheap interrupt check. Other modules run through the Extism host SDK. Both paths give
// the same results; Config.DisableFastPath forces the second.
//
// A Runtime compiles each module once per digest (sha256 of its bytes) and keeps the machine code both in
// memory and, when Config.CacheDir is set, on disk, so a restarted controller is ready to render in about a
// tenth of a second instead of the one to two seconds a cold compile of a Go plugin takes.
//
// Calls run on single-owner instances: a Module keeps a few idle, healthy instances (creating one costs about
// 5 ms, a warm call well under a millisecond) and throws away every instance whose call failed in any way, so
// a trap, a panic, a timeout or a half-finished render never leaks into the next call.
//
// Failures are *Error values with a Reason; see the Reason constants. The package depends on nothing of the
// controller: metrics and logs leave through Hooks, so plugin authors can use it in their own tests.
package runtime
