package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/internal/wasmcheck"
	"github.com/osmhq/osm/sdk/internal/wasmsnap"
)

// startState is what a module's instances start from.
type startState struct {
	// wasm is the module compiled: rebuilt from a snapshot of an initialised instance, or the original.
	wasm []byte
	// env continues the snapshotted instance's clocks and random source.
	env guestEnv
	// snapshot is empty when instances start from a snapshot, and otherwise says why they do not.
	snapshot string
	// original says wasm is the module as loaded, not a snapshot of it.
	original bool
	// image is the snapshot's memory when wasm holds it not in data segments (withImage).
	image *memoryImage
}

// withImage moves a snapshot's memory out of the rebuilt module's data segments into a memory image that
// instances map copy-on-write. Where that is impossible (not Linux, no memfd), the module keeps its segments.
func withImage(start startState) startState {
	code, size, segs, err := wasmsnap.Split(start.wasm)
	if err != nil {
		return start
	}
	img, err := newMemoryImage(size, segs)
	if err != nil {
		return start
	}
	start.wasm, start.image = code, img
	return start
}

// prepare snapshots the module after its initialisation and osm_warmup (SPEC.md §6) and returns the module
// rebuilt to start in that state, or the original when that is impossible. Every instance the host creates is
// still fresh and private to one call; they start initialised instead of initialising themselves,
// which was most of the cost of a render (instantiating a Go module: 3–4 ms, its runtime's start-up: 2 ms,
// a first render building encoding/json's encoders: several ms).
//
// Kept by a controller-level figure, for memory, not time (make bench-baseline against a build whose
// built-in host sets NoSnapshot, with the default plugins precompiled unsnapshotted, N=500, 5 rounds
// alternating, 2026-11-28, load average 15-19 from other work): with snapshots the controller's process tree
// peaked lower, ubuntu 103 MiB (102-107) against 111 MiB (109-112), five OSes 117 MiB (114-119) against
// 126 MiB (120-165), ranges apart; its CPU was no lower, ubuntu 3.2 s (2.9-3.7) against 3.2 s (3.0-3.4), five
// OSes 4.9 s (4.5-5.3) against 4.4 s (4.2-8.9), the plugin hosts' share 1.8 against 1.1 s: since the output
// memo answers most renders, instances are rare, and taking the snapshots at load costs more than they save.
// (On 2026-11-27, before the memo kept responses, 3 rounds: 9% less CPU and 7% less peak RSS with them.)
//
// The snapshot runs the module's own initialisation, which is untrusted code, under the limits of a call: the
// call timeout, the memory limit and a reservation from the memory budget. A module whose initialisation
// fails here is loaded as it is, and its calls report the failure as they always did.
func (r *Runtime) prepare(ctx context.Context, digest string, wasm []byte, info *wasmcheck.Module) startState {
	if r.cfg.NoSnapshot {
		return startState{wasm: wasm, original: true, snapshot: "not snapshotted: Config.NoSnapshot"}
	}
	if info.Unsnapshottable != "" {
		return startState{wasm: wasm, original: true, snapshot: "not snapshotted: " + info.Unsnapshottable}
	}
	if !info.ExportsFunc(wasmsnap.Initialize) {
		return startState{wasm: wasm, original: true, snapshot: "not snapshotted: it does not export " + wasmsnap.Initialize}
	}
	if built, env, ok := r.cachedSnapshot(digest); ok {
		return startState{wasm: built, env: env}
	}
	built, env, err := r.snapshot(ctx, digest, wasm)
	if err == nil && len(built) > len(wasm)+MaxSnapshotGrowth {
		err = fmt.Errorf("its initialised memory would make it %d bytes larger, more than %d", len(built)-len(wasm), MaxSnapshotGrowth)
	}
	if err != nil {
		return startState{wasm: wasm, original: true, snapshot: "not snapshotted: " + err.Error()}
	}
	r.cacheSnapshot(digest, built, env)
	return startState{wasm: built, env: env}
}

// errImportCalled is the trap of an import the snapshotted initialisation must not call.
var errImportCalled = errors.New("initialisation called a host function other than WASI's")

// errWarmUp is a failed osm_warmup, after which the instance's state is unknown.
var errWarmUp = errors.New(abi.ExportWarmup + " failed")

// snapshot returns the module rebuilt from an initialised, warmed-up instance; if warming up fails, from an
// initialised one.
func (r *Runtime) snapshot(ctx context.Context, digest string, wasm []byte) ([]byte, guestEnv, error) {
	built, env, err := r.probe(ctx, digest, wasm, true)
	if errors.Is(err, errWarmUp) {
		return r.probe(ctx, digest, wasm, false)
	}
	return built, env, err
}

// probe instantiates a probe of the module (package wasmsnap) in a runtime of its own, which is closed with
// its machine code afterwards, initialises it (and warms it up) and returns the module rebuilt from its
// globals and memory.
func (r *Runtime) probe(ctx context.Context, digest string, wasm []byte, warmUp bool) ([]byte, guestEnv, error) {
	probe, globals, err := wasmsnap.Probe(wasm)
	if err != nil {
		return nil, guestEnv{}, err
	}
	reserve := r.cfg.MemoryLimit
	if err := r.memory.acquire(ctx, reserve); err != nil {
		return nil, guestEnv{}, err
	}
	defer r.memory.release(reserve)
	rc := wazero.NewRuntimeConfig().WithMemoryLimitPages(r.cfg.memoryPages()).WithCloseOnContextDone(!r.cfg.NoInterrupt)
	if r.cfg.CacheDir != "" {
		// A cache of its own over the same directory: the probe's machine code is kept on disk for the next
		// start, and freed from memory with the runtime.
		cache, err := wazero.NewCompilationCacheWithDir(r.cfg.CacheDir)
		if err != nil {
			return nil, guestEnv{}, err
		}
		defer func() { _ = cache.Close(context.Background()) }()
		rc = rc.WithCompilationCache(cache)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, rc)
	defer func() { _ = rt.Close(context.Background()) }()
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		return nil, guestEnv{}, err
	}
	r.compiling <- struct{}{}
	compiled, err := rt.CompileModule(experimental.WithCompilationWorkers(ctx, r.cfg.CompileWorkers), probe)
	<-r.compiling
	if err != nil {
		return nil, guestEnv{}, err
	}
	// The call timeout bounds the initialisation and the warm-up, like any call's.
	callCtx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	if err := stubImports(callCtx, rt, compiled); err != nil {
		return nil, guestEnv{}, err
	}
	mc, st := guestEnv{}.apply(wazero.NewModuleConfig().WithStartFunctions())
	// The probe's memory lives outside the Go heap, like every instance's, and is read in place.
	mod, err := rt.InstantiateModule(experimental.WithMemoryAllocator(callCtx, &memoryMeter{}), compiled, mc)
	if err != nil {
		return nil, guestEnv{}, err
	}
	if err := r.initialize(callCtx, digest, mod, warmUp); err != nil {
		return nil, guestEnv{}, err
	}
	built, err := build(wasm, mod, globals)
	return built, st.env(), err
}

// initialize runs the probe's _initialize and, if asked, its osm_warmup: the module's own code, which the
// Initializing hook brackets.
func (r *Runtime) initialize(ctx context.Context, digest string, mod api.Module, warmUp bool) error {
	r.cfg.Hooks.initializing(InitEvent{Digest: digest})
	defer r.cfg.Hooks.initializing(InitEvent{Digest: digest, Done: true})
	if _, err := mod.ExportedFunction(wasmsnap.Initialize).Call(ctx); err != nil {
		return fmt.Errorf("%s: %w", wasmsnap.Initialize, err)
	}
	if warm := mod.ExportedFunction(abi.ExportWarmup); warmUp && warm != nil && len(warm.Definition().ParamTypes()) == 0 {
		if _, err := warm.Call(ctx); err != nil {
			return fmt.Errorf("%w: %w", errWarmUp, err)
		}
	}
	return nil
}

// stubImports satisfies the module's imports other than WASI's (Extism's kernel functions) with functions
// that trap: initialisation has no input to read or output to write.
func stubImports(ctx context.Context, rt wazero.Runtime, compiled wazero.CompiledModule) error {
	builders := map[string]wazero.HostModuleBuilder{}
	for _, def := range compiled.ImportedFunctions() {
		mod, name, _ := def.Import()
		if mod == wasi_snapshot_preview1.ModuleName {
			continue
		}
		b, ok := builders[mod]
		if !ok {
			b = rt.NewHostModuleBuilder(mod)
			builders[mod] = b
		}
		b.NewFunctionBuilder().
			WithGoModuleFunction(api.GoModuleFunc(func(context.Context, api.Module, []uint64) { panic(errImportCalled) }),
				def.ParamTypes(), def.ResultTypes()).
			Export(name)
	}
	for mod, b := range builders {
		if _, err := b.Instantiate(ctx); err != nil {
			return fmt.Errorf("imports from %s: %w", mod, err)
		}
	}
	return nil
}

// build rebuilds wasm from the instance's globals and memory.
func build(wasm []byte, mod api.Module, globals int) ([]byte, error) {
	img := wasmsnap.Image{Globals: make([]uint64, globals)}
	for i := range globals {
		g := mod.ExportedGlobal(wasmsnap.GlobalExport(i))
		if g == nil {
			return nil, fmt.Errorf("global %d is not exported by the probe", i)
		}
		img.Globals[i] = g.Get()
	}
	mem := mod.Memory()
	if mem == nil {
		return nil, errors.New("module has no memory")
	}
	data, ok := mem.Read(0, mem.Size())
	if !ok {
		return nil, errors.New("cannot read the memory")
	}
	img.Memory = data // read in place: Build copies what it keeps
	return wasmsnap.Build(wasm, img)
}
