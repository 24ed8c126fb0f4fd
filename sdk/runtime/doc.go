// Package runtime is the sandbox OSM runs plugins in: it checks WebAssembly modules, compiles them with wazero
// through the Extism host SDK, reads and checks their metadata, and calls their ABI v1 exports under a memory
// cap and a per-call timeout, with no network, no file system, a fake clock and deterministic randomness.
//
// Nothing relies on a module's own code to stop or to behave:
//
//   - Before compiling, package wasmcheck refuses, in linear time, modules that would make the compiler slow
//     (size, functions, control instructions per function and their squares summed) and WASI commands;
//     at most Config.CompileConcurrency modules compile at once, so a slow one leaves the others a lane.
//   - The timeout is enforced in the module's own code, rewritten before compiling (package wasmstop): every
//     loop iteration and call counts, every wasmstop.Interval counts the code yields to the host, which stops
//     it once the call's context has ended; from the module's start function and _initialize through the
//     export. The module cannot reach the counter, the flag or the yield function.
//   - Every call runs on a fresh instance, closed when it returns: no state reaches the next call.
//   - Each call reserves its instance's worst-case memory (linear memory and MaxStackBytes of call stack) from
//     a budget shared by all modules (Config.MemoryBudget) before the instance exists; the Extism kernel's
//     memory, which holds the input and the output, is capped at MaxRequestBytes+MaxResponseBytes+1 MiB, so an
//     oversized output fails before it is copied into the host. The call stacks live on the host's Go heap:
//     a host bounds it with a Go memory limit, or deep calls leave garbage beyond the budget.
//
// A Runtime compiles each module once per digest (sha256 of its bytes) and keeps the machine code both in
// memory and, when Config.CacheDir is set, on disk, so a restarted controller is ready to render in about a
// tenth of a second instead of the one to two seconds a cold compile of a Go plugin takes.
//
// Failures are *Error values with a Reason; see the Reason constants. The package depends on nothing of the
// controller: metrics and logs leave through Hooks, so plugin authors can use it in their own tests.
package runtime
