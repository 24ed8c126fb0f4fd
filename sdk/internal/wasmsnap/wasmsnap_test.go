package wasmsnap_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/osmhq/osm/sdk/internal/wasmsnap"
	"github.com/osmhq/osm/sdk/wasmtest"
)

// initModule's _initialize sets globals, grows memory by a page and writes into it; its data segment says hello.
func initModule(start bool) []byte {
	i32 := wasmtest.I32
	setGlobal := func(g byte, v int32) []byte { return append(wasmtest.I32ConstS(v), 0x24, g) }
	var initCode []byte
	initCode = append(initCode, setGlobal(0, 42)...)
	initCode = append(initCode, setGlobal(1, -7)...)
	initCode = append(initCode, wasmtest.I32Const(1)...)
	initCode = append(initCode, 0x40, 0x00, 0x1a) // memory.grow 1, drop
	initCode = append(initCode, wasmtest.I32ConstS(140000)...)
	initCode = append(initCode, wasmtest.I32ConstS(0x01020304)...)
	initCode = append(initCode, 0x36, 0x02, 0x00) // i32.store
	m := wasmtest.Module{
		Memory:  2,
		Globals: 3,
		Data:    []byte("hello"),
		Funcs: []wasmtest.Func{
			{Export: "_initialize", Code: initCode},
			{Export: "g0", Results: []byte{i32}, Code: []byte{0x23, 0x00}},
			{Export: "g1", Results: []byte{i32}, Code: []byte{0x23, 0x01}},
			{Export: "load", Params: []byte{i32}, Results: []byte{i32}, Code: []byte{0x20, 0x00, 0x28, 0x02, 0x00}},
		},
	}
	if start {
		zero := uint32(1)
		m.Start = &zero
	}
	return m.Bytes()
}

func call(t *testing.T, mod api.Module, name string, args ...uint64) uint64 {
	t.Helper()
	res, err := mod.ExportedFunction(name).Call(context.Background(), args...)
	if err != nil {
		t.Fatal(err)
	}
	return res[0]
}

// TestBuiltModuleStartsInitialised: the module built from a snapshot starts where the probe's initialisation
// left the original — globals, grown memory, its contents — and has no _initialize left to run.
func TestBuiltModuleStartsInitialised(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	wasm := initModule(false)

	probe, globals, err := wasmsnap.Probe(wasm)
	if err != nil {
		t.Fatal(err)
	}
	if globals != 3 {
		t.Fatalf("Probe found %d globals, want 3", globals)
	}
	p, err := rt.InstantiateWithConfig(ctx, probe, wazero.NewModuleConfig().WithName("probe"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.ExportedFunction("_initialize").Call(ctx); err != nil {
		t.Fatal(err)
	}
	img := wasmsnap.Image{Memory: bytes.Clone(must(p.Memory().Read(0, p.Memory().Size())))}
	for i := range globals {
		img.Globals = append(img.Globals, p.ExportedGlobal(wasmsnap.GlobalExport(i)).Get())
	}

	built, err := wasmsnap.Build(wasm, img)
	if err != nil {
		t.Fatal(err)
	}
	m, err := rt.InstantiateWithConfig(ctx, built, wazero.NewModuleConfig().WithName("built"))
	if err != nil {
		t.Fatal(err)
	}
	if m.ExportedFunction("_initialize") != nil {
		t.Error("the built module still exports _initialize")
	}
	if got := int32(call(t, m, "g0")); got != 42 {
		t.Errorf("global 0 = %d, want 42", got)
	}
	if got := int32(call(t, m, "g1")); got != -7 {
		t.Errorf("global 1 = %d, want -7", got)
	}
	if got := call(t, m, "load", 140000); got != 0x01020304 {
		t.Errorf("memory at 140000 = %#x, want 0x01020304", got)
	}
	if got := m.Memory().Size(); got != 3*65536 {
		t.Errorf("memory size = %d, want 3 pages", got)
	}
	if got, _ := m.Memory().Read(0, 5); string(got) != "hello" {
		t.Errorf("data at 0 = %q, want hello", got)
	}
	// The original is untouched: it still starts from its own initial state.
	o, err := rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName("original"))
	if err != nil {
		t.Fatal(err)
	}
	if got := call(t, o, "g0"); got != 0 {
		t.Errorf("original's global 0 = %d, want 0", got)
	}
}

// TestCustomSectionsDoNotMatter: modules that differ only in a custom section give the same probe and the same
// rebuilt module, so they share compiled code.
func TestCustomSectionsDoNotMatter(t *testing.T) {
	wasm := initModule(false)
	signed := append(append([]byte(nil), wasm...), 0x00, 0x05, 0x04, 's', 'i', 'g', 'n') // custom section "sign"
	img := wasmsnap.Image{Globals: make([]uint64, 3), Memory: make([]byte, 2*65536)}
	for _, f := range []func([]byte) ([]byte, error){
		func(b []byte) ([]byte, error) { p, _, err := wasmsnap.Probe(b); return p, err },
		func(b []byte) ([]byte, error) { return wasmsnap.Build(b, img) },
	} {
		a, err := f(wasm)
		if err != nil {
			t.Fatal(err)
		}
		b, err := f(signed)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Error("a custom section changed the rewritten module")
		}
	}
}

// TestBuildRefusesWhatASnapshotCannotHold: a start function would run again on the initialised state.
func TestBuildRefusesWhatASnapshotCannotHold(t *testing.T) {
	_, err := wasmsnap.Build(initModule(true), wasmsnap.Image{Globals: make([]uint64, 3), Memory: make([]byte, 2*65536)})
	if err == nil || !strings.Contains(err.Error(), "section 8") {
		t.Errorf("Build with a start function: err = %v, want a refusal of section 8", err)
	}
	if _, err := wasmsnap.Build(initModule(false), wasmsnap.Image{Globals: make([]uint64, 2), Memory: make([]byte, 65536)}); err == nil {
		t.Error("Build accepted an image with the wrong number of globals")
	}
	if _, err := wasmsnap.Build(initModule(false), wasmsnap.Image{Globals: make([]uint64, 3), Memory: make([]byte, 100)}); err == nil {
		t.Error("Build accepted a memory image that is not whole pages")
	}
}

func must(b []byte, ok bool) []byte {
	if !ok {
		panic("memory read out of range")
	}
	return b
}
