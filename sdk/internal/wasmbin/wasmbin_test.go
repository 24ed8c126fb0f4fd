package wasmbin

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// A tiny assembler for test modules.

func sec(id byte, body ...[]byte) []byte {
	b := bytes.Join(body, nil)
	return append(appendU32([]byte{id}, uint32(len(b))), b...)
}

func vec(items ...[]byte) []byte {
	return append(appendU32(nil, uint32(len(items))), bytes.Join(items, nil)...)
}

func str(s string) []byte { return append(appendU32(nil, uint32(len(s))), s...) }

func code(locals []byte, body ...byte) []byte {
	b := append(append([]byte(nil), locals...), body...)
	return append(appendU32(nil, uint32(len(b))), b...)
}

func module(sections ...[]byte) []byte {
	return append(append([]byte(nil), header...), bytes.Join(sections, nil)...)
}

// testModule imports osm.tick and exports:
//
//	sum(n i32) i32   a loop adding n, n-1, ..., 1
//	spin()           an endless loop
//	fib(n i32) i32   doubly recursive Fibonacci: no loop at all
//	get() i32        reads a global of the module's own
//
// withGlobal adds the module's own global (and so a global section).
func testModule(withGlobal bool, extra ...[]byte) []byte {
	types := sec(1, vec(
		[]byte{0x60, 0x00, 0x01, 0x7f},       // 0: [] -> [i32]
		[]byte{0x60, 0x01, 0x7f, 0x01, 0x7f}, // 1: [i32] -> [i32]
		[]byte{0x60, 0x00, 0x00},             // 2: [] -> []
	))
	imports := sec(2, vec(append(append(str("osm"), str("tick")...), 0x00, 0x00)))
	funcs := sec(3, vec([]byte{1}, []byte{2}, []byte{1}, []byte{0}))
	exports := sec(7, vec(
		append(str("sum"), 0x00, 1),
		append(str("spin"), 0x00, 2),
		append(str("fib"), 0x00, 3),
		append(str("get"), 0x00, 4),
	))
	get := code([]byte{0x00}, 0x41, 0x07, 0x0b) // i32.const 7
	if withGlobal {
		get = code([]byte{0x00}, 0x23, 0x00, 0x0b) // global.get 0
	}
	codes := sec(10, vec(
		// sum: loop { acc += n; n--; br_if n } acc
		code([]byte{0x01, 0x01, 0x7f},
			0x03, 0x40,
			0x20, 0x01, 0x20, 0x00, 0x6a, 0x21, 0x01,
			0x20, 0x00, 0x41, 0x01, 0x6b, 0x22, 0x00,
			0x0d, 0x00,
			0x0b,
			0x20, 0x01, 0x0b),
		// spin: loop { br 0 }
		code([]byte{0x00}, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b),
		// fib: n < 2 ? n : fib(n-1) + fib(n-2)
		code([]byte{0x00},
			0x20, 0x00, 0x41, 0x02, 0x49, 0x04, 0x7f,
			0x20, 0x00,
			0x05,
			0x20, 0x00, 0x41, 0x01, 0x6b, 0x10, 0x03,
			0x20, 0x00, 0x41, 0x02, 0x6b, 0x10, 0x03,
			0x6a,
			0x0b, 0x0b),
		get,
	))
	sections := [][]byte{types, imports, funcs}
	if withGlobal {
		sections = append(sections, sec(6, vec([]byte{0x7f, 0x00, 0x41, 0x07, 0x0b}))) // const i32 = 7
	}
	sections = append(sections, exports, codes)
	return module(append(sections, extra...)...)
}

// run instantiates wasm with osm.tick counting its calls (and calling onTick) and returns the module.
func run(t *testing.T, wasm []byte, onTick func(n int)) (api.Module, *int) {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	t.Cleanup(func() { _ = rt.Close(ctx) })
	ticks := new(int)
	_, err := rt.NewHostModuleBuilder("osm").NewFunctionBuilder().WithFunc(func() int32 {
		*ticks++
		if onTick != nil {
			onTick(*ticks)
		}
		return 0
	}).Export("tick").Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := rt.Instantiate(ctx, wasm)
	if err != nil {
		t.Fatalf("instantiating: %v", err)
	}
	return mod, ticks
}

func call(t *testing.T, mod api.Module, name string, args ...uint64) uint64 {
	t.Helper()
	res, err := mod.ExportedFunction(name).Call(context.Background(), args...)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(res) == 0 {
		return 0
	}
	return res[0]
}

func TestParse(t *testing.T) {
	m, err := Parse(testModule(true))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Imports) != 1 || m.Imports[0].Module != "osm" || m.Imports[0].Name != "tick" || m.Imports[0].Kind != KindFunc ||
		!m.Imports[0].Type.Equal(nil, []ValType{I32}) {
		t.Errorf("imports = %+v", m.Imports)
	}
	if len(m.Exports) != 4 || !m.Exports["sum"].Equal([]ValType{I32}, []ValType{I32}) || !m.Exports["spin"].Equal(nil, nil) {
		t.Errorf("exports = %+v", m.Exports)
	}
	for _, bad := range [][]byte{nil, []byte("\x00asm\x02\x00\x00\x00"), testModule(true)[:40]} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}

func TestInstrumentKeepsResults(t *testing.T) {
	for _, withGlobal := range []bool{true, false} {
		orig := testModule(withGlobal)
		inst, err := Instrument(orig, "osm", "tick", 3)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := run(t, orig, nil)
		b, ticks := run(t, inst, nil)
		for _, c := range []struct {
			fn  string
			arg []uint64
		}{{"sum", []uint64{100}}, {"fib", []uint64{15}}, {"get", nil}} {
			if x, y := call(t, a, c.fn, c.arg...), call(t, b, c.fn, c.arg...); x != y {
				t.Errorf("withGlobal=%v: %s%v = %d instrumented, %d originally", withGlobal, c.fn, c.arg, y, x)
			}
		}
		if *ticks == 0 {
			t.Errorf("withGlobal=%v: the hook never ran", withGlobal)
		}
	}
}

func TestInstrumentCountsLoopsAndCalls(t *testing.T) {
	inst, err := Instrument(testModule(true), "osm", "tick", 1)
	if err != nil {
		t.Fatal(err)
	}
	mod, ticks := run(t, inst, nil)
	// sum's body is a loop, so its entry needs no check of its own: one check per iteration.
	call(t, mod, "sum", 10)
	if *ticks != 10 {
		t.Errorf("sum(10) ran %d checks, want 10", *ticks)
	}
	// fib has no loop: every entry is checked. fib(10) makes 177 calls.
	*ticks = 0
	call(t, mod, "fib", 10)
	if *ticks != 177 {
		t.Errorf("fib(10) ran %d checks, want 177", *ticks)
	}
}

// TestInstrumentInterrupts: the hook runs inside endless loops and loop-free recursion alike, so a host can stop
// both by panicking in it.
func TestInstrumentInterrupts(t *testing.T) {
	inst, err := Instrument(testModule(true), "osm", "tick", 1000)
	if err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	mod, ticks := run(t, inst, func(n int) {
		if n%5 == 0 {
			panic(stop)
		}
	})
	for _, c := range []struct {
		fn  string
		arg []uint64
	}{{"spin", nil}, {"fib", []uint64{40}}} {
		before := *ticks
		_, err := mod.ExportedFunction(c.fn).Call(context.Background(), c.arg...)
		if !errors.Is(err, stop) {
			t.Errorf("%s: err = %v, want the hook's panic", c.fn, err)
		}
		if *ticks-before != 5 {
			t.Errorf("%s: the hook ran %d times, want 5", c.fn, *ticks-before)
		}
	}
}

func TestInstrumentSections(t *testing.T) {
	name := sec(0, str("name"), []byte{0x01, 0x02, 0x01, 0x01, 0x01, 'x'}) // function 1 is called "x"
	dwarf := sec(0, str(".debug_info"), []byte{1, 2, 3})
	inst, err := Instrument(testModule(false, name, dwarf), "osm", "tick", 10)
	if err != nil {
		t.Fatal(err)
	}
	p, err := parse(inst)
	if err != nil {
		t.Fatal(err)
	}
	var customs []string
	var ids []byte
	for _, s := range p.sections {
		ids = append(ids, s.id)
		if s.id == 0 {
			r := &reader{b: s.body}
			customs = append(customs, r.name())
		}
	}
	if strings.Join(customs, ",") != "name" {
		t.Errorf("custom sections %v, want the name section only (DWARF dropped)", customs)
	}
	if !bytes.Equal(ids, []byte{1, 2, 3, 6, 7, 10, 0}) {
		t.Errorf("section order %v, want the new global section between function and export", ids)
	}
	if p.definedGlobs != 1 {
		t.Errorf("%d globals, want the fuel", p.definedGlobs)
	}
}

func TestInstrumentRefuses(t *testing.T) {
	simd := testModule(true)
	// Replace get's body (global.get 0) with a SIMD instruction, v128.const, which the decoder does not know.
	i := bytes.LastIndex(simd, []byte{0x23, 0x00, 0x0b})
	simd = append(append(append([]byte(nil), simd[:i]...), 0xfd, 0x0c, 0x0b), simd[i+3:]...)
	tests := []struct {
		name, module, hook string
		wasm               []byte
		want               string
	}{
		{"no hook import", "osm", "tock", testModule(true), "does not import osm.tock"},
		{"hook of the wrong type", "osm", "tick", bytes.Replace(testModule(true), []byte{0x60, 0x00, 0x01, 0x7f}, []byte{0x60, 0x00, 0x01, 0x7e}, 1), "want [] -> [i32]"},
		{"unknown instruction", "osm", "tick", simd, "unsupported instruction 0xfd"},
		{"not wasm", "osm", "tick", []byte("hello"), "not a WebAssembly"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Instrument(tt.wasm, tt.module, tt.hook, 10); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}
