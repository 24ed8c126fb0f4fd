package wasmstop_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/osmhq/osm/sdk/internal/wasmcheck"
	"github.com/osmhq/osm/sdk/internal/wasmstop"
	"github.com/osmhq/osm/sdk/internal/wasmtest"
)

// countTo100 loops 100 times and returns the count.
var countTo100 = []byte{
	0x03, wasmtest.Empty, // loop
	0x20, 0x00, 0x41, 0x01, 0x6a, 0x22, 0x00, // local.get 0, i32.const 1, i32.add, local.tee 0
	0x41, 0xe4, 0x00, 0x48, 0x0d, 0x00, // i32.const 100, i32.lt_s, br_if 0
	0x0b, 0x20, 0x00, // end, local.get 0
}

// yields counts the calls of the yield function, and sets the flag of the instance that yields once stop is set.
type yields struct {
	calls atomic.Int32
	stop  atomic.Bool
}

func (y *yields) context(ctx context.Context) context.Context {
	return experimental.WithFunctionListenerFactory(ctx, experimental.FunctionListenerFactoryFunc(func(def api.FunctionDefinition) experimental.FunctionListener {
		if slices.Contains(def.ExportNames(), wasmstop.YieldExport) {
			return y
		}
		return nil
	}))
}

func (y *yields) Before(_ context.Context, mod api.Module, _ api.FunctionDefinition, _ []uint64, _ experimental.StackIterator) {
	y.calls.Add(1)
	if y.stop.Load() {
		mod.ExportedGlobal(wasmstop.FlagExport).(api.MutableGlobal).Set(1)
	}
}
func (y *yields) After(context.Context, api.Module, api.FunctionDefinition, []uint64) {}
func (y *yields) Abort(context.Context, api.Module, api.FunctionDefinition, error)    {}

// instantiate instruments and instantiates m in a runtime of its own (wazero's compiler), with y listening.
func instantiate(t *testing.T, m wasmtest.Module, y *yields) (api.Module, error) {
	t.Helper()
	ctx := context.Background()
	out, err := wasmstop.Instrument(m.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	rt := wazero.NewRuntime(ctx)
	t.Cleanup(func() { _ = rt.Close(ctx) })
	compiled, err := rt.CompileModule(y.context(ctx), out)
	if err != nil {
		t.Fatalf("the instrumented module does not compile: %v", err)
	}
	return rt.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().WithStartFunctions())
}

// TestStopFlag: an instrumented module runs its loops as before, calls the yield function every Interval
// ticks (loop iterations, calls of a function that does not start with a loop), and traps at its next yield once the host has
// set the flag, wherever it is spinning and whatever its own globals hold.
func TestStopFlag(t *testing.T) {
	ctx := context.Background()
	for _, globals := range []int{0, 3} { // without a global section, and with globals of its own
		y := &yields{}
		mod, err := instantiate(t, wasmtest.Module{Globals: globals, Funcs: []wasmtest.Func{
			{Results: []byte{wasmtest.I32}, Locals: []byte{wasmtest.I32}, Code: countTo100, Export: "count"},
			{Export: "nop"},
			{Code: wasmtest.Spin, Export: "spin"},
		}}, y)
		if err != nil {
			t.Fatal(err)
		}
		got, err := mod.ExportedFunction("count").Call(ctx)
		if err != nil || len(got) != 1 || got[0] != 100 {
			t.Fatalf("globals %d: count returned %v, %v; want 100", globals, got, err)
		}
		// 100 ticks so far; the yield comes with the Interval-th.
		nop := mod.ExportedFunction("nop")
		for range wasmstop.Interval - 101 {
			if _, err := nop.Call(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if n := y.calls.Load(); n != 0 {
			t.Fatalf("globals %d: %d yields after %d ticks", globals, n, wasmstop.Interval-1)
		}
		if _, err := nop.Call(ctx); err != nil || y.calls.Load() != 1 {
			t.Fatalf("globals %d: after %d ticks, %d yields (%v), want 1", globals, wasmstop.Interval, y.calls.Load(), err)
		}

		done := make(chan error, 1)
		go func() {
			_, err := mod.ExportedFunction("spin").Call(ctx)
			done <- err
		}()
		for y.calls.Load() < 10 { // let it spin through a few yields
			time.Sleep(time.Millisecond)
		}
		y.stop.Store(true)
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "unreachable") {
				t.Errorf("globals %d: a spin stopped by the flag returned %v, want the unreachable trap", globals, err)
			}
		case <-time.After(time.Minute): // a guard against hanging the test binary, not a time limit
			t.Fatalf("globals %d: the spin did not stop after the flag was set", globals)
		}
	}
}

// TestStartFunctionYields: a spin in the start function yields too, so the host can stop it before the
// instance is handed out.
func TestStartFunctionYields(t *testing.T) {
	start := uint32(0)
	y := &yields{}
	y.stop.Store(true) // the host stops whatever yields
	_, err := instantiate(t, wasmtest.Module{Start: &start, Funcs: []wasmtest.Func{{Code: wasmtest.Spin}}}, y)
	if err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("instantiating a module spinning in its start function: %v, want the unreachable trap", err)
	}
}

// TestCallsTick: a function whose loop never runs ticks on entry, so that calls (recursion, a tree of calls)
// cannot run without yielding.
func TestCallsTick(t *testing.T) {
	y := &yields{}
	neverLoops := []byte{0x41, 0x00, 0x04, wasmtest.Empty, 0x03, wasmtest.Empty, 0x0b, 0x0b} // i32.const 0, if, loop, end, end
	mod, err := instantiate(t, wasmtest.Module{Funcs: []wasmtest.Func{{Code: neverLoops, Export: "f"}}}, y)
	if err != nil {
		t.Fatal(err)
	}
	f := mod.ExportedFunction("f")
	for range wasmstop.Interval {
		if _, err := f.Call(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := y.calls.Load(); n != 1 {
		t.Errorf("%d calls of a function whose loop never runs: %d yields, want 1", wasmstop.Interval, n)
	}
}

// TestInstrumentRefuses: code that names a global or function index the module does not have would, once
// instrumented, name the flag or the arm function, and could clear the flag; the reserved export names would
// collide.
func TestInstrumentRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		m    wasmtest.Module
		want string
	}{
		"writing a global beyond its own": {
			m:    wasmtest.Module{Globals: 1, Funcs: []wasmtest.Func{{Code: []byte{0x41, 0x00, 0x24, 0x01}, Export: "clear"}}},
			want: "global 1 does not exist",
		},
		"calling a function beyond its own": {
			m:    wasmtest.Module{Funcs: []wasmtest.Func{{Code: []byte{0x10, 0x01}, Export: "f"}}},
			want: "function 1 does not exist",
		},
		"exporting a reserved name": {
			m:    wasmtest.Module{Funcs: []wasmtest.Func{{Export: wasmstop.YieldExport}}},
			want: "reserved",
		},
	} {
		if _, err := wasmstop.Instrument(tc.m.Bytes()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
		}
	}
}

// FuzzInstrument: whatever module wasmcheck lets through and wazero compiles, Instrument either refuses it or
// returns a module wazero compiles too, with the yield function exported. (A module the rewrite
// broke would fail to load, not run unstoppable; this keeps it from failing to load.)
func FuzzInstrument(f *testing.F) {
	f.Add(wasmtest.Module{Globals: 2, Memory: 1, Data: []byte("hi"), Funcs: []wasmtest.Func{
		{Results: []byte{wasmtest.I32}, Locals: []byte{wasmtest.I32}, Code: countTo100, Export: "count"},
		{Code: wasmtest.Spin, Export: "spin"}, {Export: "nop"},
	}}.Bytes())
	start := uint32(1)
	f.Add(wasmtest.Module{Imports: []wasmtest.Import{{Module: "env", Name: "f"}}, Start: &start,
		Funcs: []wasmtest.Func{{Code: []byte{0x10, 0x00}}}}.Bytes())
	f.Add(wasmtest.Module{}.Bytes())
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, wasm []byte) {
		if _, err := wasmcheck.Check(wasm, wasmcheck.Limits{ModuleBytes: 1 << 20}); err != nil {
			return
		}
		rt := wazero.NewRuntime(ctx)
		defer rt.Close(ctx)
		if _, err := rt.CompileModule(ctx, wasm); err != nil {
			return
		}
		out, err := wasmstop.Instrument(wasm)
		if err != nil {
			return
		}
		rt2 := wazero.NewRuntime(ctx)
		defer rt2.Close(ctx)
		compiled, err := rt2.CompileModule(ctx, out)
		if err != nil {
			t.Fatalf("the instrumented module does not compile: %v", err)
		}
		if bytes.Equal(out, wasm) {
			return // no code section: nothing to instrument
		}
		if _, ok := compiled.ExportedFunctions()[wasmstop.YieldExport]; !ok {
			t.Fatalf("no %s export", wasmstop.YieldExport)
		}
	})
}
