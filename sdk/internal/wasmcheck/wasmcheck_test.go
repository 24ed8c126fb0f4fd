package wasmcheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/osmhq/osm/sdk/wasmtest"
)

func ifs(n int) wasmtest.Func {
	return wasmtest.Func{Code: bytes.Repeat([]byte{0x41, 0x00, 0x04, wasmtest.Empty, 0x0b}, n)}
}

// sample is a small module using most of what Check decodes.
func sample() []byte {
	return wasmtest.Module{
		Imports: []wasmtest.Import{{Module: "env", Name: "f", Params: []byte{wasmtest.I64}, Results: []byte{wasmtest.I64}}},
		Memory:  1,
		Globals: 2,
		Funcs: []wasmtest.Func{
			{Results: []byte{wasmtest.I32}, Locals: []byte{wasmtest.I32, wasmtest.I64}, Export: "run", Code: []byte{
				0x02, wasmtest.Empty, 0x03, wasmtest.Empty, 0x41, 0x00, 0x0d, 0x00, 0x0b, 0x0b, // block loop br_if end end
				0x41, 0x00, 0x0e, 0x01, 0x00, 0x00, // br_table 0 0 (unreachable after: fine for Check)
				0x42, 0x05, 0x10, 0x00, 0x1a, // i64.const 5, call f, drop
				0x41, 0x00, 0x28, 0x02, 0x00, 0x1a, // i32.load
				0xfc, 0x00, // saturating truncation, exercising the 0xfc prefix (type-invalid, Check does not care)
				0x23, 0x01, 0x24, 0x00, // global.get 1, global.set 0
				0x41, 0x07,
			}},
			{Export: "_initialize"},
		},
	}.Bytes()
}

func TestCheckReadsModules(t *testing.T) {
	m, err := Check(sample(), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !m.ExportsFunc("run") || !m.ExportsFunc("_initialize") || m.ExportsFunc("memory") || m.Exports["memory"] != KindMemory {
		t.Errorf("exports = %v", m.Exports)
	}
	if m.Unsnapshottable != "" {
		t.Errorf("Unsnapshottable = %q, want empty", m.Unsnapshottable)
	}
}

func TestCheckLimits(t *testing.T) {
	tests := []struct {
		name   string
		wasm   []byte
		limits Limits
		what   string
	}{
		{name: "size", wasm: sample(), limits: Limits{ModuleBytes: 20}, what: "module size"},
		{name: "functions", wasm: sample(), limits: Limits{Functions: 2}, what: "functions"},
		{name: "locals", wasm: wasmtest.Module{Funcs: []wasmtest.Func{{Locals: []byte{wasmtest.I32}},
			{Locals: bytes.Repeat([]byte{wasmtest.I32}, 10)}}}.Bytes(), limits: Limits{Locals: 10},
			what: "locals of all functions 11 in function 1 exceeds the limit of 10"},
		// The defaults. A body of a few bytes declaring 2^32-1 locals in one run: wazero would allocate 4 GiB.
		{name: "locals in one run", wasm: wasmtest.Module{Funcs: []wasmtest.Func{{I32Locals: 1<<32 - 1}}}.Bytes(),
			what: "locals of all functions 4294967295 in function 0 exceeds the limit of 1000000"},
		{name: "names", wasm: AppendSection(wasmtest.Module{}.Bytes(), 0, slices.Concat(wasmtest.Name("name"), []byte{1},
			wasmtest.U32(uint32(len(names(250_001)))), names(250_001))), what: "names 250001 exceeds the limit of 250000"},
		// A 5 MB module of a million globals held 1.3 GiB of heap once loaded.
		{name: "globals", wasm: wasmtest.Module{Globals: 1_001}.Bytes(), what: "globals 1001 exceeds the limit of 1000"},
		{name: "exports", wasm: wasmtest.Module{Funcs: exported(10_001)}.Bytes(), what: "exports 10001 exceeds the limit of 10000"},
		{name: "data segments", wasm: withSection(wasmtest.Module{Memory: 1}.Bytes(), 11, slices.Repeat([][]byte{{1, 0}}, 250_001)...),
			what: "data segments 250001 exceeds the limit of 250000"},
		{name: "element entries", wasm: withSection(wasmtest.Module{Tables: []wasmtest.Table{{Min: 1}}, Funcs: []wasmtest.Func{{}}}.Bytes(), 9,
			append(append([]byte{1, 0}, wasmtest.U32(60_000)...), make([]byte, 60_000)...), append(append([]byte{1, 0}, wasmtest.U32(40_001)...), make([]byte, 40_001)...)),
			what: "element entries 100001 exceeds the limit of 100000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Check(tt.wasm, tt.limits)
			var le *LimitError
			if !errors.As(err, &le) || !strings.HasPrefix(le.Error(), tt.what) {
				t.Fatalf("Check() = %v, want a %q limit error", err, tt.what)
			}
		})
	}
}

// names is a name map of n function names.
func names(n int) []byte {
	b := wasmtest.U32(uint32(n))
	for i := range n {
		b = append(append(b, wasmtest.U32(uint32(i))...), 1, 'f')
	}
	return b
}

// exported is n functions, each exported.
func exported(n int) []wasmtest.Func {
	fs := make([]wasmtest.Func, n)
	for i := range fs {
		fs[i].Export = "f" + strconv.Itoa(i)
	}
	return fs
}

// withSection returns wasm with a vector section of these items where the section order puts it.
func withSection(wasm []byte, id byte, items ...[]byte) []byte {
	secs, err := Sections(wasm)
	if err != nil {
		panic(err)
	}
	out, added := bytes.Clone(wasm[:8]), false
	for _, s := range secs {
		if !added && s.ID > id {
			out, added = wasmtest.Section(out, id, items...), true
		}
		out = AppendSection(out, s.ID, s.Body)
	}
	if !added {
		out = wasmtest.Section(out, id, items...)
	}
	return out
}

func TestCheckRefusesMalformed(t *testing.T) {
	good := sample()
	tests := []struct {
		name, want string
		wasm       []byte
	}{
		{name: "not wasm", wasm: []byte("#!/bin/sh"), want: "not a WebAssembly 1.0 binary module"},
		{name: "truncated", wasm: good[:len(good)-3], want: "unexpected end"},
		{name: "simd", wasm: wasmtest.Module{Funcs: []wasmtest.Func{{Code: []byte{0xfd, 0x0c}}}}.Bytes(), want: "unsupported instruction 0xfd"},
		{name: "code without functions", wasm: wasmtest.Section(append([]byte(nil), good[:8]...), 10, []byte{0x02, 0x00, 0x0b}), want: "code section has 1 bodies for 0 declared functions"},
		{name: "huge br_table", wasm: wasmtest.Module{Funcs: []wasmtest.Func{{Code: []byte{0x41, 0x00, 0x0e, 0xff, 0xff, 0xff, 0xff, 0x0f}}}}.Bytes(), want: "br_table with 4294967295 labels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Check(tt.wasm, Limits{}); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Check() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// FuzzCheck: Check never panics or hangs on any input, and what it accepts respects the size limit. Crashes it
// finds become entries of testdata/fuzz/FuzzCheck, which `go test` replays.
//
//	go test -run '^$' -fuzz FuzzCheck ./internal/wasmcheck
func FuzzCheck(f *testing.F) {
	f.Add(sample())
	f.Add(wasmtest.Module{Funcs: []wasmtest.Func{{Code: wasmtest.Nested(40)}, ifs(30)}}.Bytes())
	f.Add(wasmtest.Module{Funcs: []wasmtest.Func{{Code: wasmtest.Spin, Export: "_start"}}, Globals: 3, Memory: 1, Data: []byte("hi")}.Bytes())
	limits := Limits{ModuleBytes: 1 << 20}
	f.Fuzz(func(t *testing.T, wasm []byte) {
		m, err := Check(wasm, limits)
		sameAsFullDecoding(t, wasm, limits, m, err)
		if err != nil {
			return
		}
		if len(wasm) > limits.ModuleBytes || m.Exports == nil {
			t.Fatalf("accepted a module of %d bytes beyond the limit, or without its exports: %+v", len(wasm), *m)
		}
	})
}

// TestAcceptsWhatWazeroCompiles: Check accepts modules wazero compiles (the fuzz seeds; the runtime's tests
// load real Go plugins through Check).
func TestAcceptsWhatWazeroCompiles(t *testing.T) {
	ctx := context.Background()
	for _, wasm := range [][]byte{
		wasmtest.Module{Funcs: []wasmtest.Func{{Code: wasmtest.Nested(40)}, ifs(30)}}.Bytes(),
		wasmtest.Module{Funcs: []wasmtest.Func{{Code: wasmtest.Spin, Export: "_start"}}, Globals: 3, Memory: 1, Data: []byte("hi")}.Bytes(),
	} {
		rt := wazero.NewRuntime(ctx)
		if _, err := rt.CompileModule(ctx, wasm); err != nil {
			t.Fatalf("wazero refuses the module: %v", err)
		}
		_ = rt.Close(ctx)
		if _, err := Check(wasm, Limits{}); err != nil {
			t.Errorf("Check refuses a module wazero compiles: %v", err)
		}
	}
}

// TestLyingCountsAreRefused: modules of a few bytes whose counts claim 2^32 entries. wazero allocates for each
// of these counts before reading the entries, and each of these modules, given to wazero, ended the test
// process with "fatal error: runtime: out of memory". Check must refuse every one.
func TestLyingCountsAreRefused(t *testing.T) {
	const huge = "\xff\xff\xff\xff\x0f"
	section := func(id byte, body string) []byte {
		return append(append([]byte("\x00asm\x01\x00\x00\x00"), id, byte(len(body))), body...)
	}
	for name, wasm := range map[string][]byte{
		"data segments":                section(11, huge),
		"a data segment's bytes":       section(11, "\x01\x01"+huge),
		"types":                        section(1, huge),
		"a type's parameters":          section(1, "\x01\x60"+huge),
		"a type's results":             section(1, "\x01\x60\x00"+huge),
		"element segments":             section(9, huge),
		"an element segment's entries": section(9, "\x01\x00\x41\x00\x0b"+huge),
		"exports":                      section(7, huge),
		"globals":                      section(6, huge),
		"imports":                      section(2, huge),
		"function names":               section(0, "\x04name\x01\x05"+huge),
		"local names":                  section(0, "\x04name\x02\x05"+huge),
	} {
		if _, err := Check(wasm, Limits{}); err == nil || !strings.Contains(err.Error(), "entries declared in") {
			t.Errorf("%s: %v, want the count refused", name, err)
		}
	}
}

// TestTablesAreBounded: wazero allocates every table whole for each instance and grows one by whatever
// table.grow asks, on the Go heap and outside the memory limit. Without these checks a module growing a table
// by 2^31 entries ended the process with "fatal error: out of memory", and 2,000 tables of 100,000 entries
// (10 KB of module) took 1.5 GiB per instance. The entries all tables may reach are bounded by the function
// limit.
func TestTablesAreBounded(t *testing.T) {
	u32 := func(v uint32) *uint32 { return &v }
	many := make([]wasmtest.Table, 2_000)
	for i := range many {
		many[i].Min = 100_000
	}
	grow := func(table byte) []byte { // table.grow table by 2^31 - 1 entries
		code := append([]byte{0xd0, 0x70}, wasmtest.I32ConstS(0x7fffffff)...)
		return append(code, 0xfc, 0x0f, table, 0x1a)
	}
	tests := []struct {
		name   string
		tables []wasmtest.Table
		code   []byte
		want   string // empty: accepted
	}{
		{name: "one table of 2^27 entries", tables: []wasmtest.Table{{Min: 1 << 27}},
			want: "tables of 134217728 entries in all exceed the limit of 100000"},
		{name: "2,000 tables of 100,000 entries", tables: many,
			want: "tables of 200000 entries in all exceed the limit of 100000"}, // refused at the second
		{name: "tables at the limit", tables: []wasmtest.Table{{Min: 60_000}, {Min: 40_000}}},
		{name: "table.grow on a table without a maximum", tables: []wasmtest.Table{{Min: 0}}, code: grow(0),
			want: "table.grow on table 0, which declares no maximum"},
		{name: "table.grow up to a maximum beyond the limit", tables: []wasmtest.Table{{Min: 0, Max: u32(1 << 31)}}, code: grow(0),
			want: "tables of 2147483648 entries in all exceed the limit of 100000"},
		{name: "table.grow up to a maximum with the others beyond the limit", tables: []wasmtest.Table{{Min: 90_000}, {Min: 1, Max: u32(20_000)}},
			code: grow(1), want: "tables of 110000 entries in all exceed the limit of 100000"},
		{name: "table.grow on a table that does not exist", tables: []wasmtest.Table{{Min: 1, Max: u32(1)}}, code: grow(1),
			want: "table.grow on table 1 of 1"},
		{name: "table.grow up to a maximum within the limit", tables: []wasmtest.Table{{Min: 10, Max: u32(50_000)}}, code: append(grow(0), grow(0)...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wasm := wasmtest.Module{Tables: tt.tables, Funcs: []wasmtest.Func{{Code: tt.code}}}.Bytes()
			_, err := Check(wasm, Limits{})
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// BenchmarkCheckDefaultPlugin checks the Ubuntu plugin, as every load does twice (the module and the one built
// from its snapshot).
func BenchmarkCheckDefaultPlugin(b *testing.B) {
	wasm, err := os.ReadFile("../../../plugins/dist/ubuntu.wasm")
	if err != nil {
		b.Fatalf("%v (make plugins builds it)", err)
	}
	b.SetBytes(int64(len(wasm)))
	for b.Loop() {
		if _, err := Check(wasm, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// sameAsFullDecoding fails t unless checking wasm with every instruction decoded in full (no
// simpleInstruction shortcut) gives m and err.
func sameAsFullDecoding(t *testing.T, wasm []byte, limits Limits, m *Module, err error) {
	t.Helper()
	fullDecodingOnly = true
	full, fullErr := Check(wasm, limits)
	fullDecodingOnly = false
	if fmt.Sprint(err) != fmt.Sprint(fullErr) || !reflect.DeepEqual(m, full) {
		t.Fatalf("with the shortcut: %+v, %v; decoding every instruction in full: %+v, %v", m, err, full, fullErr)
	}
}

// TestTheShortcutDecidesAsFullDecoding: simpleInstruction changes how fast a module is checked, never the
// verdict, on the modules of these tests and on a real Go plugin built from the SDK's examples' source
// (the fuzz target compares both ways on every input it makes).
func TestTheShortcutDecidesAsFullDecoding(t *testing.T) {
	limits := Limits{ModuleBytes: 64 << 20}
	modules := [][]byte{
		sample(),
		wasmtest.Module{Funcs: []wasmtest.Func{{Code: wasmtest.Nested(40)}, ifs(30)}}.Bytes(),
		wasmtest.Module{Funcs: []wasmtest.Func{{Code: wasmtest.Spin, Export: "_start"}}, Globals: 3, Memory: 1, Data: []byte("hi")}.Bytes(),
	}
	if wasm, err := os.ReadFile("../../../plugins/dist/ubuntu.wasm"); err == nil {
		modules = append(modules, wasm) // in this repository, after make plugins
	}
	for i, wasm := range modules {
		m, err := Check(wasm, limits)
		sameAsFullDecoding(t, wasm, limits, m, err)
		// Damaged copies: one byte changed at a time, at places spread over the module.
		tries := min(200, 2*len(wasm))
		if len(wasm) > 1<<20 {
			tries = 24
		}
		for k := range tries {
			bad := slices.Clone(wasm)
			bad[(k*7919+13)%len(bad)] ^= byte(0x80 | k)
			m, err := Check(bad, limits)
			sameAsFullDecoding(t, bad, limits, m, err)
		}
		t.Logf("module %d (%d bytes): same verdict both ways", i, len(wasm))
	}
}

// TestStateChangesHiddenAmongSimpleInstructions attacks the shortcut as a module author who wants a snapshot
// taken of a module that changes tables or segments: the instructions that do are placed right after, between
// and at the end of runs of instructions the shortcut steps over, and after immediates whose bytes look like
// those instructions' opcodes. Each must still be found, with the same verdict as decoding every instruction.
func TestStateChangesHiddenAmongSimpleInstructions(t *testing.T) {
	simple := []byte{
		0x41, 0x26, 0x1a, // i32.const 38 (the byte of table.set as an immediate), drop
		0x20, 0x00, 0x1a, // local.get 0, drop
		0x41, 0x7c, 0x1a, // i32.const -4 (0xfc's low bits), drop
		0x02, wasmtest.Empty, 0x0b, // block end
	}
	tests := []struct {
		name string
		op   []byte // the state change, with what it pops
		want string // in Unsnapshottable
	}{
		{"table.set", []byte{0x41, 0x00, 0xd0, 0x70, 0x26, 0x00}, "table.set"},
		{"memory.init", []byte{0x41, 0x00, 0x41, 0x00, 0x41, 0x00, 0xfc, 0x08, 0x00, 0x00}, "passive data"},
		{"data.drop", []byte{0xfc, 0x09, 0x00}, "passive data"},
		{"table.grow", []byte{0xd0, 0x70, 0x41, 0x01, 0xfc, 0x0f, 0x00, 0x1a}, "changes a table"},
		{"elem.drop", []byte{0xfc, 0x0d, 0x00}, "changes a table"},
	}
	tableMax := uint32(2)
	for _, tt := range tests {
		for _, where := range []string{"first", "between", "last"} {
			t.Run(tt.name+"/"+where, func(t *testing.T) {
				var code []byte
				switch where {
				case "first":
					code = append(append(code, tt.op...), simple...)
				case "between":
					code = append(append(append(code, simple...), tt.op...), simple...)
				case "last":
					code = append(append(code, simple...), tt.op...)
				}
				wasm := wasmtest.Module{Tables: []wasmtest.Table{{Min: 1, Max: &tableMax}}, Memory: 1,
					Funcs: []wasmtest.Func{{Locals: []byte{wasmtest.I32}, Code: code, Export: "_initialize"}}}.Bytes()
				m, err := Check(wasm, Limits{})
				sameAsFullDecoding(t, wasm, Limits{}, m, err)
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if !strings.Contains(m.Unsnapshottable, tt.want) {
					t.Errorf("Unsnapshottable = %q, want it to name %q", m.Unsnapshottable, tt.want)
				}
			})
		}
	}
}
