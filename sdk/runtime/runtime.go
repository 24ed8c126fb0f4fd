package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	godebug "runtime/debug"
	"strings"
	"sync"
	"time"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/osmhq/osm/sdk/internal/wasmcheck"
)

// Runtime loads and caches plugin modules. It is safe for concurrent use.
type Runtime struct {
	cfg       Config
	markerDir string

	// compiling bounds concurrent compilations (Config.CompileConcurrency): each saturates a core and cannot be
	// interrupted, so a slow module holds one lane while the others keep compiling.
	compiling chan struct{}
	// memory is the budget of linear memory across all calls (Config.MemoryBudget).
	memory *budget

	mu      sync.Mutex
	closed  bool
	modules map[string]*entry
	// failed are the digests of remembered load failures, oldest first (at most maxRememberedFailures).
	failed []string
}

// maxRememberedFailures bounds the load failures a Runtime remembers, so that a registry serving a new broken
// digest on every pull cannot grow it without end; a forgotten failure costs one more check or compile.
const maxRememberedFailures = 256

// entry is a module being loaded or loaded, so concurrent Loads of one digest compile it once.
type entry struct {
	done chan struct{}
	mod  *Module
	err  error
}

// New creates a runtime. With cfg.CacheDir set it creates the directory and keeps compiled code there.
func New(cfg Config) (*Runtime, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	limits, err := cfg.limits()
	if err != nil {
		return nil, err
	}
	r := &Runtime{cfg: cfg, modules: map[string]*entry{}, compiling: limits.compiling, memory: limits.memory}
	if cfg.CacheDir == "" {
		return r, nil
	}
	if cfg.ReadOnlyCache {
		// Nothing to create: what is missing is compiled in memory (compileModule).
		r.markerDir = filepath.Join(cfg.CacheDir, "osm-compiled", wazeroVersion()+"-"+compileVersion)
		return r, nil
	}
	// Fail now, not at the first load, if the directory cannot hold a cache; each module opens its own.
	cache, err := r.newCache()
	if err != nil {
		return nil, fmt.Errorf("plugin compilation cache %s: %w", cfg.CacheDir, err)
	}
	_ = cache.Close(context.Background())
	// The machine code depends on the wazero version and on how it is compiled (compileVersion).
	r.markerDir = filepath.Join(cfg.CacheDir, "osm-compiled", wazeroVersion()+"-"+compileVersion)
	if err := os.MkdirAll(r.markerDir, 0o700); err != nil {
		return nil, fmt.Errorf("plugin compilation cache %s: %w", cfg.CacheDir, err)
	}
	return r, nil
}

// Config returns the effective configuration, defaults filled in.
func (r *Runtime) Config() Config { return r.cfg }

// Digest returns the "sha256:<hex>" digest of a module, the key it is cached under.
func Digest(wasm []byte) string {
	sum := sha256.Sum256(wasm)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Load returns the module for wasm, compiling it and reading its metadata if it is not loaded yet. name labels
// the module in errors, logs and metrics (a built-in plugin's name, an image reference); when the same bytes
// are loaded under several names, the first one sticks.
//
// Load refuses modules that are malformed or exceed the limits of package wasmcheck (size, counts, tables),
// were built as WASI commands instead of c-shared reactors, do not compile, lack osm_metadata or osm_render,
// speak another ABI major version or declare invalid metadata. Those failures are remembered per digest, so a
// broken plugin referenced by many MachineDeployments is compiled only once; Unload forgets them.
func (r *Runtime) Load(ctx context.Context, name string, wasm []byte) (*Module, error) {
	return r.LoadReleasing(ctx, name, wasm, nil)
}

// LoadReleasing is Load for bytes whose memory the caller can let go without invalidating them, such as the
// read-only pages of a file mapping (the kernel reads them again if they are touched): release, if not nil, is
// called exactly once, as soon as the runtime reads wasm no more. That is after checking it and taking its
// snapshot (or finding the snapshot in the cache), before it is compiled, so the module's bytes and its
// machine code are not resident at the same time; compiling is the moment a load's memory peaks.
// release may run after LoadReleasing returned (when ctx ended first).
func (r *Runtime) LoadReleasing(ctx context.Context, name string, wasm []byte, release func()) (*Module, error) {
	if release == nil {
		release = func() {}
	}
	digest := Digest(wasm)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		release()
		return nil, &Error{Plugin: name, Digest: digest, Reason: ReasonClosed, Detail: "runtime is closed"}
	}
	if e, ok := r.modules[digest]; ok {
		r.mu.Unlock()
		release()
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, &Error{Plugin: name, Digest: digest, Reason: ReasonCanceled, Detail: "waiting for the module to load: " + ctx.Err().Error(), Err: ctx.Err()}
		}
		if e.err == nil {
			r.cfg.Hooks.cacheHit(LayerMemory)
		}
		return e.mod, e.err
	}
	e := &entry{done: make(chan struct{})}
	r.modules[digest] = e
	r.mu.Unlock()

	// Compiling is not interruptible and takes seconds (much longer under the race detector), so it runs on
	// its own: a caller whose context ends (a controller shutting down) returns at once, and the module it
	// asked for is still compiled and cached for whoever asks next.
	go func() {
		e.mod, e.err = r.load(context.WithoutCancel(ctx), name, digest, wasm, release)
		if e.err != nil {
			r.forget(digest, transient(e.err))
		}
		close(e.done)
	}()
	select {
	case <-e.done:
		return e.mod, e.err
	case <-ctx.Done():
		return nil, &Error{Plugin: name, Digest: digest, Reason: ReasonCanceled, Detail: "waiting for the module to load: " + ctx.Err().Error(), Err: ctx.Err()}
	}
}

// forget drops a failed load at once when it is transient, and otherwise remembers it, dropping the oldest
// remembered failure beyond maxRememberedFailures.
func (r *Runtime) forget(digest string, transient bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if transient {
		delete(r.modules, digest)
		return
	}
	r.failed = append(r.failed, digest)
	if len(r.failed) > maxRememberedFailures {
		oldest := r.failed[0]
		r.failed = r.failed[1:]
		if e, ok := r.modules[oldest]; ok && e.mod == nil {
			delete(r.modules, oldest)
		}
	}
}

// transient reports whether a load failure may not repeat, so it must not be remembered.
func transient(err error) bool {
	switch ReasonOf(err) {
	case ReasonTimeout, ReasonCanceled, ReasonClosed, "":
		return true
	}
	return false
}

// Get returns the loaded module with the digest, if any. Hosts use it to skip fetching bytes they already ran.
func (r *Runtime) Get(digest string) (*Module, bool) {
	r.mu.Lock()
	e, ok := r.modules[digest]
	r.mu.Unlock()
	if !ok {
		return nil, false
	}
	select {
	case <-e.done:
		if e.err == nil {
			r.cfg.Hooks.cacheHit(LayerMemory)
		}
		return e.mod, e.err == nil
	default:
		return nil, false
	}
}

// Unload closes the module with the digest and forgets it (and any remembered load failure).
func (r *Runtime) Unload(ctx context.Context, digest string) error {
	r.mu.Lock()
	e, ok := r.modules[digest]
	delete(r.modules, digest)
	r.mu.Unlock()
	if !ok {
		return nil
	}
	<-e.done
	if e.mod != nil {
		return e.mod.Close(ctx)
	}
	return nil
}

// Close closes every module. The disk cache stays.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	entries := r.modules
	r.modules = map[string]*entry{}
	r.mu.Unlock()
	var errs []error
	for _, e := range entries {
		<-e.done
		if e.mod != nil {
			errs = append(errs, e.mod.Close(ctx))
		}
	}
	return errors.Join(errs...)
}

// load checks, snapshots and compiles wasm, and calls release once it no longer reads wasm.
func (r *Runtime) load(ctx context.Context, name, digest string, wasm []byte, release func()) (*Module, error) {
	info, err := r.check(name, digest, wasm)
	if err != nil {
		release()
		return nil, err
	}
	start := r.prepare(ctx, digest, wasm, info)
	if !start.original {
		release() // instances start from the snapshot: the original's bytes are not compiled
		start = withImage(start)
	}
	compiled, err := r.compile(ctx, name, digest, start)
	if start.original {
		release()
	}
	if err != nil {
		if start.image != nil {
			start.image.close()
		}
		return nil, err
	}
	m := newModule(r, name, digest, compiled, info)
	m.start, m.image = start.env, start.image
	if err := m.init(ctx); err != nil {
		_ = m.Close(context.Background())
		return nil, err
	}
	return m, nil
}

// check refuses, before compiling, a module that is malformed, beyond the limits of package wasmcheck or
// cannot be an OSM plugin.
func (r *Runtime) check(name, digest string, wasm []byte) (*wasmcheck.Module, error) {
	info, err := wasmcheck.Check(wasm, wasmcheck.Limits{ModuleBytes: r.cfg.MaxModuleBytes})
	if err != nil {
		return nil, &Error{Plugin: name, Digest: digest, Reason: ReasonInvalidModule, Detail: "module refused before compiling: " + err.Error(), Err: err}
	}
	if info.ExportsFunc("_start") && !info.ExportsFunc("_initialize") {
		return nil, &Error{Plugin: name, Digest: digest, Reason: ReasonInvalidModule, Detail: "module is a WASI command (it exports _start, not _initialize), " +
			"whose exports fail once _start has returned; rebuild it as a library: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o plugin.wasm ."}
	}
	return info, nil
}

func (r *Runtime) compile(ctx context.Context, name, digest string, start startState) (*compiledPlugin, error) {
	marker := r.marker(digest)
	layer := LayerNone
	if marker != "" {
		if _, err := os.Stat(marker); err == nil {
			layer = LayerDisk
		}
	}
	// A compile lane bounds the compiler's work. Machine code read back from the disk cache takes a tenth of
	// a second and no lane, so modules compiled before still load while slow or hostile compilations hold
	// every lane (a compile bomb holds one until its load's deadline or the host's memory limit ends it). A
	// marker whose cache entry is gone costs one compilation outside the lanes, bounded like any other.
	if layer != LayerDisk {
		r.compiling <- struct{}{}
		defer func() { <-r.compiling }()
	}
	began := time.Now()
	compiled, err := r.compileModule(ctx, start.wasm)
	ev := CompileEvent{Plugin: name, Digest: digest, Duration: time.Since(began), Layer: layer, NotSnapshotted: start.snapshot}
	if err != nil {
		ev.Err = err
		r.cfg.Hooks.compiled(ev)
		return nil, &Error{Plugin: name, Digest: digest, Reason: ReasonInvalidModule, Detail: "cannot compile module: " + err.Error(), Err: err}
	}
	r.cfg.Hooks.compiled(ev)
	if layer == LayerDisk {
		r.cfg.Hooks.cacheHit(LayerDisk)
	} else if marker != "" && !r.cfg.ReadOnlyCache {
		// Best effort: a missing marker only mislabels the next load's metric.
		_ = os.WriteFile(marker, nil, 0o600)
	}
	return compiled, nil
}

// compiledPlugin is a module compiled through Extism, with the compilation cache that holds its machine code.
type compiledPlugin struct {
	*extism.CompiledPlugin
	cache wazero.CompilationCache
}

// Close frees the machine code. Extism closes a plugin's wazero runtime but not its compiled modules, so with a
// cache shared by all modules the code of every module ever loaded stayed in memory until the Runtime closed
// (TestUnloadedModulesFreeTheirCompiledCode: 11 MiB per module there). Each module has a cache of its own over
// the same directory instead, closed with it.
func (c *compiledPlugin) Close(ctx context.Context) error {
	return errors.Join(c.CompiledPlugin.Close(ctx), c.cache.Close(ctx))
}

// newCache returns a compilation cache over CacheDir, or in memory only without one.
func (r *Runtime) newCache() (wazero.CompilationCache, error) {
	if r.cfg.CacheDir == "" {
		return wazero.NewCompilationCache(), nil
	}
	// wazero's cache key does not cover the loop-header check, so code compiled with and without it is kept
	// apart.
	if r.cfg.NoInterrupt {
		return wazero.NewCompilationCacheWithDir(filepath.Join(r.cfg.CacheDir, "nointerrupt"))
	}
	return wazero.NewCompilationCacheWithDir(r.cfg.CacheDir)
}

// compileVersion names how compileModule compiles, in the cache marker's path: "ctxdone" is wazero's
// close-on-context-done (before it, modules were rewritten to count ticks: "stop1").
const compileVersion = "ctxdone1"

// compileModule compiles wasm through Extism with wazero's close-on-context-done: the machine code checks at
// every loop header whether the call's context has ended, and the call then fails. That stops any code that
// loops, which is all a Go module's code, within a timeout; a module that recurses without looping runs until
// its stack overflows, and one that calls a tree of functions without loops runs to its end. It is a courtesy
// to hosts that run the runtime in their own process (plugintest, osmctl): osm-controller runs plugins in a
// process of their own, which the operating system ends past the deadline.
func (r *Runtime) compileModule(ctx context.Context, wasm []byte) (*compiledPlugin, error) {
	cache, err := r.newCache()
	if err != nil {
		if !r.cfg.ReadOnlyCache {
			return nil, err
		}
		cache = wazero.NewCompilationCache() // nothing cached here yet, and nothing may be
	}
	if r.cfg.ReadOnlyCache && r.cfg.CacheDir != "" {
		return r.compileReadOnly(ctx, cache, wasm)
	}
	compiled, err := r.compileWith(ctx, cache, wasm)
	if err != nil && r.cfg.CacheDir != "" && strings.Contains(err.Error(), "compilationcache") {
		// wazero compiles again what another version wrote, but fails on an entry it cannot read at all
		// (damaged, or not its own): what is cached must never make a module fail, so it compiles without it.
		compiled, err = r.compileWith(ctx, wazero.NewCompilationCache(), wasm)
	}
	return compiled, err
}

// compileReadOnly compiles wasm over a cache it may not write. wazero fails a compilation whose machine code
// it cannot add to the directory, after keeping that code in the cache's memory: the second attempt finds it
// there, so a module missing from the directory is compiled once, in memory.
func (r *Runtime) compileReadOnly(ctx context.Context, cache wazero.CompilationCache, wasm []byte) (*compiledPlugin, error) {
	compiled, err := r.compileWithOpen(ctx, cache, wasm)
	if err == nil {
		return compiled, nil
	}
	compiled, err = r.compileWithOpen(ctx, cache, wasm)
	if err != nil {
		_ = cache.Close(context.Background())
		// What the directory holds must never make a module fail: compile without it.
		return r.compileWith(ctx, wazero.NewCompilationCache(), wasm)
	}
	return compiled, nil
}

func (r *Runtime) compileWith(ctx context.Context, cache wazero.CompilationCache, wasm []byte) (*compiledPlugin, error) {
	compiled, err := r.compileWithOpen(ctx, cache, wasm)
	if err != nil {
		_ = cache.Close(context.Background())
	}
	return compiled, err
}

// compileWithOpen compiles wasm with cache, which it leaves open when it fails.
func (r *Runtime) compileWithOpen(ctx context.Context, cache wazero.CompilationCache, wasm []byte) (*compiledPlugin, error) {
	rc := wazero.NewRuntimeConfig().
		WithCompilationCache(cache).
		WithMemoryLimitPages(r.cfg.memoryPages()).
		WithCloseOnContextDone(!r.cfg.NoInterrupt)
	ctx = experimental.WithCompilationWorkers(ctx, r.cfg.CompileWorkers)
	compiled, err := extism.NewCompiledPlugin(ctx, extism.Manifest{
		Wasm: []extism.Wasm{extism.WasmData{Data: wasm, Name: "main"}},
		// No AllowedHosts and no AllowedPaths: Extism denies every HTTP request and mounts nothing.
	}, extism.PluginConfig{RuntimeConfig: rc, EnableWasi: true}, nil)
	if err != nil {
		return nil, err
	}
	return &compiledPlugin{CompiledPlugin: compiled, cache: cache}, nil
}

// marker is the file that records that the disk cache holds the digest's machine code. wazero does not say
// whether a compilation hit its cache; the marker lets the cache-hit metric tell restarts from cold starts.
func (r *Runtime) marker(digest string) string {
	if r.markerDir == "" {
		return ""
	}
	return filepath.Join(r.markerDir, fmt.Sprintf("%s-%d-%t", digest[len("sha256:"):], r.cfg.memoryPages(), r.cfg.NoInterrupt))
}

// linkedWazeroVersion, set with the linker's -X, stands in for the wazero version in the cache's paths. The
// build sets it (and wazero's own) only to precompile the default plugins for test binaries, whose build
// information names no dependencies: their hosts say "unknown" here and wazero says "dev".
var linkedWazeroVersion string

// wazeroVersion returns the wazero version linked in, which keys its cache entries as well.
func wazeroVersion() string {
	if linkedWazeroVersion != "" {
		return linkedWazeroVersion
	}
	if bi, ok := godebug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/tetratelabs/wazero" {
				if d.Replace != nil {
					return d.Replace.Version
				}
				return d.Version
			}
		}
	}
	return "unknown"
}

// Compile checks wasm and compiles it as it was built, into CacheDir, without instantiating it: no code of
// the module runs. A process that compiles tenants' modules for others to run (osm-controller's plugin
// compiler) uses it with NoSnapshot, so that a host with the same configuration finds the machine code.
func (r *Runtime) Compile(ctx context.Context, name string, wasm []byte) error {
	digest := Digest(wasm)
	if _, err := r.check(name, digest, wasm); err != nil {
		return err
	}
	compiled, err := r.compile(ctx, name, digest, startState{wasm: wasm, original: true})
	if err != nil {
		return err
	}
	return compiled.Close(ctx)
}
