package runtime_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osmhq/osm/sdk/runtime"
	"github.com/osmhq/osm/sdk/wasmtest"
)

// TestModulesRefusedBeforeCompiling: modules that would crash or bloat the process that decodes them, or that
// cannot be plugins, are refused by the check before compiling, at once, with an error naming the cause.
func TestModulesRefusedBeforeCompiling(t *testing.T) {
	var compiles atomic.Int32
	rt := newRuntime(t, runtime.Config{Hooks: runtime.Hooks{Compiled: func(runtime.CompileEvent) { compiles.Add(1) }}})
	tooBig := append([]byte("\x00asm\x01\x00\x00\x00\x00\x80\x80\x80\x11\x01x"), make([]byte, 34<<20)...) // a 34 MiB custom section
	command := wasmtest.Module{Funcs: []wasmtest.Func{
		{Export: "_start"}, {Results: []byte{wasmtest.I32}, Code: wasmtest.I32Const(0), Export: "osm_metadata"},
		{Results: []byte{wasmtest.I32}, Code: wasmtest.I32Const(0), Export: "osm_render"},
	}}.Bytes()
	tests := []struct {
		name    string
		wasm    []byte
		wantMsg string
	}{
		{name: "module too large", wasm: tooBig, wantMsg: "module size 35651599 exceeds the limit of 33554432"},
		{name: "WASI command", wasm: command, wantMsg: "rebuild it as a library: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared"},
		// 15 bytes claiming 2^32 data segments: wazero allocated for them and the process died (out of memory).
		{name: "a count that lies", wasm: []byte("\x00asm\x01\x00\x00\x00\x0b\x05\xff\xff\xff\xff\x0f"),
			wantMsg: "section 11: 4294967295 entries declared in 0 bytes"},
		// Growing a table by 2^31 entries at load ended the process (fatal error: out of memory).
		{name: "table.grow without a maximum", wasm: tableModule([]wasmtest.Table{{}},
			slices.Concat([]byte{0xd0, 0x70}, wasmtest.I32ConstS(0x7fffffff), []byte{0xfc, 0x0f, 0x00, 0x1a})),
			wantMsg: "table.grow on table 0, which declares no maximum"},
		// 16 KB declaring 100 million locals, which wazero allocates for as it decodes.
		{name: "many functions of many locals", wasm: wasmtest.Module{Funcs: slices.Repeat([]wasmtest.Func{{I32Locals: 50_000}}, 2_000)}.Bytes(),
			wantMsg: "locals of all functions 1050000 in function 20 exceeds the limit of 1000000"},
		// What wazero keeps per module and per instance: a 5 MB module of a million globals held 1.3 GiB once
		// loaded; likewise, smaller, exports, data segments and element entries (wasmcheck TestCheckLimits).
		{name: "a thousand and one globals", wasm: wasmtest.Module{Globals: 1_001}.Bytes(), wantMsg: "globals 1001 exceeds the limit of 1000"},
		// 2,000 tables of 100,000 entries in 10 KB: 1.5 GiB of heap per instance.
		{name: "many large tables", wasm: tableModule(slices.Repeat([]wasmtest.Table{{Min: 100_000}}, 2_000), nil),
			wantMsg: "tables of 200000 entries in all exceed the limit of 100000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			_, err := rt.Load(context.Background(), "hostile", tt.wasm)
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("refused after %s, want at once", took)
			}
			checkError(t, tt.name, err, runtime.ReasonInvalidModule, `plugin "hostile"`, tt.wantMsg)
		})
	}
	if n := compiles.Load(); n != 0 {
		t.Errorf("%d modules were compiled, want none", n)
	}
}

// tableModule is a plugin with these tables whose osm_metadata runs code first (TestTablesWithinTheLimitLoad
// loads it when its tables are within the limit).
func tableModule(tables []wasmtest.Table, code []byte) []byte {
	return wasmtest.Module{Imports: handImports, Memory: 1, Data: []byte(handMetadata), Tables: tables, Funcs: []wasmtest.Func{
		{Results: []byte{wasmtest.I32}, Locals: []byte{wasmtest.I64, wasmtest.I32}, Code: append(code, writeOutput([]byte(handMetadata))...), Export: "osm_metadata"},
		{Results: []byte{wasmtest.I32}, Code: wasmtest.I32Const(0), Export: "osm_render"},
	}}.Bytes()
}

// TestRealCommandModuleRefused builds a plugin the way the attack's author did, without -buildmode=c-shared, and
// expects the load to say how to rebuild it instead of failing with "wasm error: unreachable".
func TestRealCommandModuleRefused(t *testing.T) {
	out := filepath.Join(t.TempDir(), "healthy-command.wasm")
	cmd := exec.Command("go", "build", "-o", out, "./testdata/plugins/healthy")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the command module: %v\n%s", err, b)
	}
	wasm, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	_, err = newRuntime(t, runtime.Config{}).Load(context.Background(), "command", wasm)
	checkError(t, "command module", err, runtime.ReasonInvalidModule, "module is a WASI command (it exports _start, not _initialize)",
		"go build -buildmode=c-shared")
}

// TestCachedModulesNeedNoLane: a module compiling holds a compile lane; machine code read back from the disk
// cache takes none, so a module compiled before loads while every lane is held. (A compile bomb holds its lane
// until its load's deadline or the host's memory limit ends it.) The test holds the only lane itself, as a slow
// compilation would: a cached load that waited for a lane would never return.
func TestCachedModulesNeedNoLane(t *testing.T) {
	load(t, newRuntime(t, runtime.Config{}), "healthy")
	limits := runtime.NewLimits(0, 1)
	var events compileEvents
	rt := newRuntime(t, runtime.Config{Limits: limits, Hooks: events.hooks()})
	release := runtime.HoldLane(limits)
	defer release()
	load(t, rt, "healthy")
	if got := events.last(t).Layer; got != runtime.LayerDisk {
		t.Errorf("the module loaded from layer %v, want the disk cache (else it compiled without a lane)", got)
	}
}

// TestTablesWithinTheLimitLoad: the modules TestModulesRefusedBeforeCompiling refuses for their tables load when
// the tables stay within the limit, so it is the tables that were refused.
func TestTablesWithinTheLimitLoad(t *testing.T) {
	rt := newRuntime(t, runtime.Config{})
	maximum := uint32(1_000)
	for name, wasm := range map[string][]byte{
		"table.grow up to a maximum": tableModule([]wasmtest.Table{{Max: &maximum}},
			slices.Concat([]byte{0xd0, 0x70}, wasmtest.I32ConstS(1_000), []byte{0xfc, 0x0f, 0x00, 0x1a})),
		"ten tables of 10,000 entries": tableModule(slices.Repeat([]wasmtest.Table{{Min: 10_000}}, 10), nil),
	} {
		if _, err := rt.Load(context.Background(), "tables", wasm); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestRememberedFailuresAreBounded: a runtime remembers a module that failed to load, so a broken plugin costs
// one check, but not every one it ever met: a registry serving a new broken digest on every pull would grow it
// without end.
func TestRememberedFailuresAreBounded(t *testing.T) {
	rt := newRuntime(t, runtime.Config{})
	for i := range 300 {
		// A custom section naming i, then 15 bytes claiming 2^32 data segments.
		wasm := slices.Concat([]byte("\x00asm\x01\x00\x00\x00\x00\x04\x03"), []byte(fmt.Sprintf("%03d", i)), []byte("\x0b\x05\xff\xff\xff\xff\x0f"))
		if _, err := rt.Load(context.Background(), "broken", wasm); runtime.ReasonOf(err) != runtime.ReasonInvalidModule {
			t.Fatalf("load %d: %v, want InvalidModule", i, err)
		}
	}
	if n := runtime.Entries(rt); n != 256 {
		t.Errorf("the runtime holds %d digests after 300 broken ones, want the bound, 256", n)
	}
}
