// Package wasmtest assembles small WebAssembly modules byte by byte, for tests of plugin hosts that need
// modules no compiler would emit: hostile ones (endless loops in any export, in the start function or the
// WASI initialiser, bulk memory operations, deep nesting), ones that break the host's conventions, and
// hand-written plugins that speak the Extism ABI directly (Spec, plugin.go). It is the one assembler of the
// project's tests (sdk/runtime, sdk/internal/wasmcheck, host/pluginhost, host/app); it checks nothing, so a
// test may build exactly the malformed module it attacks with.
package wasmtest

import "bytes"

// Value types and block types.
const (
	I32   byte = 0x7f
	I64   byte = 0x7e
	Empty byte = 0x40 // the empty block type
)

// Common instructions.
var (
	// Spin is `loop br 0 end`: an endless loop.
	Spin = []byte{0x03, Empty, 0x0c, 0x00, 0x0b}
	// Unreachable traps.
	Unreachable = []byte{0x00}
)

// Func is one defined function.
type Func struct {
	Params, Results []byte
	// Locals are the function's local types, one entry per local.
	Locals []byte
	// I32Locals, when set, declares this many more i32 locals, in one entry of a few bytes.
	I32Locals uint32
	// Code is the body's instructions, without the final end.
	Code []byte
	// Export names the function in the export table; empty keeps it private.
	Export string
}

// Import is one imported function.
type Import struct {
	Module, Name    string
	Params, Results []byte
}

// Module is a module to assemble.
type Module struct {
	Imports []Import
	Funcs   []Func
	// Memory, when set, defines memory 0 with this many initial pages, exported as "memory".
	Memory uint32
	// MaxMemory, when set with Memory, is memory 0's maximum in pages.
	MaxMemory uint32
	// Globals defines this many mutable i32 globals, initialised to 0.
	Globals int
	// Start, when set, is the index (imports first) of the start function.
	Start *uint32
	// Data, when set, is copied into memory 0 at address 0.
	Data []byte
	// Tables defines funcref tables, in order.
	Tables []Table
	// BadExport, if set, is also exported, naming a function the module does not have: a compiler refuses it,
	// quoting the name.
	BadExport string
}

// Table is one funcref table's limits.
type Table struct {
	Min uint32
	// Max, when set, is the table's maximum size.
	Max *uint32
}

// Bytes assembles the module.
func (m Module) Bytes() []byte {
	var types, imports, funcs, exports, codes [][]byte
	typeIndex := func(params, results []byte) uint32 {
		t := append(append(append([]byte{0x60}, U32(uint32(len(params)))...), params...), U32(uint32(len(results)))...)
		t = append(t, results...)
		for i, have := range types {
			if bytes.Equal(have, t) {
				return uint32(i)
			}
		}
		types = append(types, t)
		return uint32(len(types) - 1)
	}
	for _, imp := range m.Imports {
		e := append(Name(imp.Module), Name(imp.Name)...)
		imports = append(imports, append(append(e, 0x00), U32(typeIndex(imp.Params, imp.Results))...))
	}
	for i, f := range m.Funcs {
		funcs = append(funcs, U32(typeIndex(f.Params, f.Results)))
		if f.Export != "" {
			exports = append(exports, append(append(Name(f.Export), 0x00), U32(uint32(len(m.Imports)+i))...))
		}
		var body []byte
		groups := len(f.Locals)
		if f.I32Locals > 0 {
			groups++
		}
		body = append(body, U32(uint32(groups))...)
		for _, l := range f.Locals {
			body = append(body, 0x01, l)
		}
		if f.I32Locals > 0 {
			body = append(append(body, U32(f.I32Locals)...), I32)
		}
		body = append(append(body, f.Code...), 0x0b)
		codes = append(codes, append(U32(uint32(len(body))), body...))
	}
	out := []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}
	out = Section(out, 1, types...)
	if len(imports) > 0 {
		out = Section(out, 2, imports...)
	}
	out = Section(out, 3, funcs...)
	if len(m.Tables) > 0 {
		var tables [][]byte
		for _, t := range m.Tables {
			if t.Max == nil {
				tables = append(tables, append([]byte{0x70, 0x00}, U32(t.Min)...))
			} else {
				tables = append(tables, append(append([]byte{0x70, 0x01}, U32(t.Min)...), U32(*t.Max)...))
			}
		}
		out = Section(out, 4, tables...)
	}
	if m.Memory > 0 {
		if m.MaxMemory > 0 {
			out = Section(out, 5, append(append([]byte{0x01}, U32(m.Memory)...), U32(m.MaxMemory)...))
		} else {
			out = Section(out, 5, append([]byte{0x00}, U32(m.Memory)...))
		}
		exports = append(exports, append(Name("memory"), 0x02, 0x00))
	}
	if m.Globals > 0 {
		var globals [][]byte
		for range m.Globals {
			globals = append(globals, []byte{I32, 0x01, 0x41, 0x00, 0x0b})
		}
		out = Section(out, 6, globals...)
	}
	if m.BadExport != "" {
		exports = append(exports, append(append(Name(m.BadExport), 0x00), U32(9999)...))
	}
	out = Section(out, 7, exports...)
	if m.Start != nil {
		out = append(append(out, 8), U32(uint32(len(U32(*m.Start))))...)
		out = append(out, U32(*m.Start)...)
	}
	out = Section(out, 10, codes...)
	if len(m.Data) > 0 {
		out = Section(out, 11, append(append([]byte{0x00, 0x41, 0x00, 0x0b}, U32(uint32(len(m.Data)))...), m.Data...))
	}
	return out
}

// Section appends a section holding a vector of items.
func Section(out []byte, id byte, items ...[]byte) []byte {
	body := append(U32(uint32(len(items))), bytes.Join(items, nil)...)
	out = append(append(out, id), U32(uint32(len(body)))...)
	return append(out, body...)
}

// U32 encodes v as unsigned LEB128.
func U32(v uint32) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// I32Const is `i32.const v` (v < 64).
func I32Const(v byte) []byte { return []byte{0x41, v & 0x3f} }

// Nested is n nested empty blocks: block block ... end end.
func Nested(n int) []byte {
	return append(bytes.Repeat([]byte{0x02, Empty}, n), bytes.Repeat([]byte{0x0b}, n)...)
}

// Header is the magic number and version every module starts with.
const Header = "\x00asm\x01\x00\x00\x00"

// Raw assembles a module from sections given as they are, each an id and its entries: for modules whose
// sections Module cannot express (a lying count, a table without a maximum).
func Raw(sections ...RawSection) []byte {
	out := []byte(Header)
	for _, s := range sections {
		out = Section(out, s.ID, s.Entries...)
	}
	return out
}

// RawSection is one section of Raw.
type RawSection struct {
	ID      byte
	Entries [][]byte
}

// Body is a function body without locals, for a code section of Raw.
func Body(code []byte) []byte {
	body := append(append([]byte{0}, code...), 0x0b)
	return append(U32(uint32(len(body))), body...)
}

// Name encodes a name.
func Name(s string) []byte { return append(U32(uint32(len(s))), s...) }

// I32ConstS is `i32.const v` for any v.
func I32ConstS(v int32) []byte { return append([]byte{0x41}, sleb(int64(v))...) }

// I64Const is `i64.const v`.
func I64Const(v int64) []byte { return append([]byte{0x42}, sleb(v)...) }

func sleb(v int64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
