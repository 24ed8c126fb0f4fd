package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/osmhq/osm/sdk/internal/fastio"
	"github.com/osmhq/osm/sdk/internal/wasmbin"
)

// The fast I/O path (SPEC.md §8). The Extism convention moves the request into the guest and the response out
// of it eight bytes per host call, and with close-on-context-done every one of those calls that reaches the
// Extism kernel starts a goroutine to watch the context. A module that exports osm_v1_alloc and osm_v1_call
// (every plugin built with the guest package does) is instead instantiated directly on wazero, with the runtime
// and module configuration Extism would use, and called with one copy in and one copy out.
//
// Such a module is also compiled without close-on-context-done, which makes every loop iteration of the guest
// leave the machine code for Go (more than half of a Go plugin's render): package wasmbin instruments its code
// with a fuel counter that calls WASI's sched_yield every meterFuel loop iterations and function entries, and
// the instance's sched_yield checks the call's context. A module the instrumentation cannot decode keeps
// close-on-context-done.
//
// Extism is bypassed for these modules, so its kernel is not there: the module may import from
// extism:host/env only the functions the guest package's standard exports use, and those are stubs that
// fail the call if anything reaches them. A module that imports anything else from Extism (logging,
// configuration, variables, HTTP) might use it during a call and therefore runs on the standard path.

// extismImports are the Extism host functions the guest package's standard exports import, with their Extism
// signatures. The fast path never calls the standard exports, so stubs satisfy them.
var extismImports = map[string]wasmbin.FuncType{
	"alloc":          {Params: []wasmbin.ValType{wasmbin.I64}, Results: []wasmbin.ValType{wasmbin.I64}},
	"store_u8":       {Params: []wasmbin.ValType{wasmbin.I64, wasmbin.I32}},
	"store_u64":      {Params: []wasmbin.ValType{wasmbin.I64, wasmbin.I64}},
	"input_length":   {Results: []wasmbin.ValType{wasmbin.I64}},
	"input_load_u8":  {Params: []wasmbin.ValType{wasmbin.I64}, Results: []wasmbin.ValType{wasmbin.I32}},
	"input_load_u64": {Params: []wasmbin.ValType{wasmbin.I64}, Results: []wasmbin.ValType{wasmbin.I64}},
	"output_set":     {Params: []wasmbin.ValType{wasmbin.I64, wasmbin.I64}},
	"error_set":      {Params: []wasmbin.ValType{wasmbin.I64}},
}

const extismModule = "extism:host/env"

// fastCapable reports whether a module can run on the fast path: it exports osm_v1_alloc and osm_v1_call with
// the ABI's signatures and imports nothing the fast path does not provide.
func fastCapable(info *wasmbin.Module) bool {
	i32, i64 := wasmbin.I32, wasmbin.I64
	alloc, okAlloc := info.Exports[fastio.AllocExport]
	call, okCall := info.Exports[fastio.CallExport]
	if !okAlloc || !okCall || !alloc.Equal([]wasmbin.ValType{i32}, []wasmbin.ValType{i32}) ||
		!call.Equal([]wasmbin.ValType{i32, i32, i32}, []wasmbin.ValType{i64}) {
		return false
	}
	// Extism initialises a Haskell runtime with hs_init; only WASI reactors and commands are started here.
	if _, ok := info.Exports["hs_init"]; ok {
		return false
	}
	for _, imp := range info.Imports {
		if imp.Kind != wasmbin.KindFunc {
			return false
		}
		switch imp.Module {
		case wasi_snapshot_preview1.ModuleName:
		case extismModule:
			want, ok := extismImports[imp.Name]
			if !ok || !imp.Type.Equal(want.Params, want.Results) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// Metering (see package wasmbin): the fuel check calls WASI's sched_yield, which Go modules import, and
// wazero's sched_yield calls the instance's Osyield, where the deadline is checked.
const (
	meterHookModule = wasi_snapshot_preview1.ModuleName
	meterHookName   = "sched_yield"
	// meterFuel is how many loop iterations and function entries run between two deadline checks: tens of
	// microseconds of guest code, so a timed-out call stops at once and the Go scheduler and garbage
	// collector get the goroutine back often, while the checks cost nothing measurable.
	meterFuel = 10_000
)

// fastRuntime is a wazero runtime holding one fast-path module, WASI and the Extism stubs.
type fastRuntime struct {
	rt       wazero.Runtime
	compiled wazero.CompiledModule
	// metered: the module was instrumented with fuel checks and compiled without close-on-context-done.
	metered bool
}

// compileFast compiles a module for the fast path. Its code is instrumented with fuel checks if possible, which
// is what interrupts it then; otherwise wazero's close-on-context-done mode does, as on the standard path.
func (r *Runtime) compileFast(ctx context.Context, rc wazero.RuntimeConfig, wasm []byte, info *wasmbin.Module) (*compiledModule, error) {
	metered := false
	var rt wazero.Runtime
	var compiled wazero.CompiledModule
	if code, err := wasmbin.Instrument(wasm, meterHookModule, meterHookName, meterFuel); err == nil {
		rt = wazero.NewRuntimeWithConfig(ctx, rc.WithCloseOnContextDone(false))
		if compiled, err = rt.CompileModule(ctx, code); err == nil {
			metered = true
		} else {
			_ = rt.Close(ctx)
		}
	}
	if !metered {
		rt = wazero.NewRuntimeWithConfig(ctx, rc)
		var err error
		if compiled, err = rt.CompileModule(ctx, wasm); err != nil {
			_ = rt.Close(ctx)
			return nil, err
		}
	}
	fast := &fastRuntime{rt: rt, compiled: compiled, metered: metered}
	if err := fast.init(ctx, info); err != nil {
		_ = rt.Close(ctx)
		return nil, err
	}
	c := &compiledModule{fast: fast, exports: map[string]bool{}}
	for name := range info.Exports {
		c.exports[name] = true
	}
	return c, nil
}

// init instantiates WASI and the Extism stubs.
func (f *fastRuntime) init(ctx context.Context, info *wasmbin.Module) error {
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, f.rt); err != nil {
		return err
	}
	b := f.rt.NewHostModuleBuilder(extismModule)
	for _, imp := range info.Imports {
		if imp.Module != extismModule {
			continue
		}
		name := imp.Name
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(context.Context, api.Module, []uint64) {
			panic(fmt.Errorf("%s.%s called on the fast path, which has no Extism kernel", extismModule, name))
		}), valueTypes(imp.Type.Params), valueTypes(imp.Type.Results)).Export(name)
	}
	_, err := b.Instantiate(ctx)
	return err
}

func valueTypes(ts []wasmbin.ValType) []api.ValueType {
	out := make([]api.ValueType, len(ts))
	for i, t := range ts {
		out[i] = api.ValueType(t)
	}
	return out
}

// fastInstance is one instantiation of a fast-path module.
type fastInstance struct {
	mod   api.Module
	mem   api.Memory
	start api.Function // the WASI initialiser, nil once it ran
	alloc api.Function
	call  api.Function
	stack [3]uint64
	// ctx is the running call's context, which the fuel hook checks on a metered module.
	ctx context.Context
}

// instantiate creates an instance with the sandbox of the standard path: a fresh ModuleConfig (no arguments, no
// environment, no file system, fake clocks, deterministic randomness), captured stdout and stderr, no start
// functions (the WASI initialiser runs under the first call's timeout, as Extism runs it) and no name, so the
// module can be instantiated many times.
func (f *fastRuntime) instantiate(ctx context.Context, inst *instance) (*fastInstance, error) {
	fi := &fastInstance{}
	mc := wazero.NewModuleConfig().WithStdout(inst.stdout).WithStderr(inst.stderr).WithStartFunctions().WithName("")
	if f.metered {
		mc = mc.WithOsyield(fi.checkDeadline)
	}
	mod, err := f.rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, inst.memory), f.compiled, mc)
	if err != nil {
		return nil, err
	}
	fi.mod, fi.mem = mod, mod.Memory()
	fi.alloc, fi.call = mod.ExportedFunction(fastio.AllocExport), mod.ExportedFunction(fastio.CallExport)
	// Extism's choice of initialiser: a WASI reactor's _initialize, else a command's constructors.
	for _, name := range []string{"_initialize", "__wasm_call_ctors"} {
		if fn := mod.ExportedFunction(name); fn != nil && len(fn.Definition().ParamTypes()) == 0 {
			fi.start = fn
			break
		}
	}
	if fi.mem == nil {
		_ = mod.Close(context.Background())
		return nil, errors.New("module has no linear memory")
	}
	return fi, nil
}

// checkDeadline is the fuel hook of a metered module: it stops the guest when its call's context is done, the
// way wazero's close-on-context-done mode does, with the exit code that mode uses.
func (fi *fastInstance) checkDeadline() {
	if fi.ctx == nil {
		return
	}
	select {
	case <-fi.ctx.Done():
		panic(ctxExit(fi.ctx))
	default:
	}
}

func ctxExit(ctx context.Context) *sys.ExitError {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return sys.NewExitError(sys.ExitCodeDeadlineExceeded)
	}
	return sys.NewExitError(sys.ExitCodeContextCanceled)
}

func (fi *fastInstance) close() { _ = fi.mod.Close(context.Background()) }

// errFastOutput is a fast-path result that does not describe bytes of the guest's memory.
type errFastOutput struct{ msg string }

func (e *errFastOutput) Error() string { return e.msg }

// invoke runs export on in. It returns the output, or the guest's error message (failed), or err when the call
// trapped, was interrupted or broke the calling convention (*errFastOutput).
func (fi *fastInstance) invoke(ctx context.Context, export string, in []byte) (out []byte, failed bool, err error) {
	id, ok := fastio.ID(export)
	if !ok {
		return nil, false, &errFastOutput{msg: export + " is not an ABI export"}
	}
	if ctx.Err() != nil {
		return nil, false, ctxExit(ctx)
	}
	fi.ctx = ctx
	defer func() { fi.ctx = nil }()
	if fi.start != nil {
		if err := fi.start.CallWithStack(ctx, fi.stack[:]); err != nil {
			return nil, false, err
		}
		fi.start = nil
	}
	var ptr uint32
	if len(in) > 0 {
		if uint64(len(in)) > fastio.MaxLen {
			return nil, false, &errFastOutput{msg: fmt.Sprintf("request of %d bytes exceeds the fast path's limit", len(in))}
		}
		fi.stack[0] = uint64(len(in))
		if err := fi.alloc.CallWithStack(ctx, fi.stack[:]); err != nil {
			return nil, false, err
		}
		ptr = uint32(fi.stack[0])
		if !fi.mem.Write(ptr, in) {
			return nil, false, &errFastOutput{msg: fmt.Sprintf("%s returned address %#x for %d bytes, outside linear memory (%d bytes)",
				fastio.AllocExport, ptr, len(in), fi.mem.Size())}
		}
	}
	fi.stack[0], fi.stack[1], fi.stack[2] = uint64(uint32(id)), uint64(ptr), uint64(len(in))
	if err := fi.call.CallWithStack(ctx, fi.stack[:]); err != nil {
		return nil, false, err
	}
	rptr, n, failed := fastio.Unpack(fi.stack[0])
	buf, ok := fi.mem.Read(rptr, n)
	if !ok {
		return nil, false, &errFastOutput{msg: fmt.Sprintf("%s returned %d bytes at %#x, outside linear memory (%d bytes)",
			fastio.CallExport, n, rptr, fi.mem.Size())}
	}
	// Read returns a view of the guest's memory, which the next call overwrites.
	return append([]byte(nil), buf...), failed, nil
}

// exitedCleanly reports whether err is the guest exiting with status 0, which Extism treats as a successful
// call with no output.
func exitedCleanly(err error) bool {
	var exit *sys.ExitError
	return errors.As(err, &exit) && exit.ExitCode() == 0
}
