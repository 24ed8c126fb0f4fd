// Package handwasm assembles hand-written plugins for tests of hosts: modules that speak the Extism ABI
// directly, in shapes no Go toolchain emits.
package handwasm

import (
	"bytes"
	"encoding/binary"
)

const Metadata = `{"abiVersion":"v1","name":"hand","version":"1.0.0","operatingSystems":[{"name":"testos"}],` +
	`"provisioningUtilities":["cloud-init"],"cloudProviders":["*"]}`

const (
	i32 byte = 0x7f
	i64 byte = 0x7e
)

type wasmFunc struct {
	params, results, locals []byte
	code                    []byte
	export                  string
}

type Import struct {
	module, name    string
	params, results []byte
}

// extismImports are what writeOutput calls, as functions 0, 1 and 2.
var extismImports = []Import{
	{"extism:host/env", "alloc", []byte{i64}, []byte{i64}},
	{"extism:host/env", "store_u8", []byte{i64, i32}, nil},
	{"extism:host/env", "output_set", []byte{i64, i64}, nil},
}

// RandomGet is WASI's random_get, as function 3 of a module importing it after extismImports.
var RandomGet = Import{"wasi_snapshot_preview1", "random_get", []byte{i32, i32}, []byte{i32}}

// InputOffset and ErrorSet are Extism's input_offset and error_set, for ErrorInput (as functions 3 and 4).
var (
	InputOffset = Import{"extism:host/env", "input_offset", nil, []byte{i64}}
	ErrorSet    = Import{"extism:host/env", "error_set", []byte{i64}, nil}
)

// ErrorInput is an export that fails with its own input as the error, in a module importing InputOffset and
// ErrorSet (in that order) after the Extism functions.
var ErrorInput = []byte{0x10, 0x03, 0x10, 0x04, 0x41, 0x01}

// Plugin assembles a plugin with the given osm_metadata and osm_render bodies (nil: the defaults) and memory
// pages, importing extra after the Extism functions.
func Plugin(metadata, render []byte, pages uint32, extra ...Import) []byte {
	return Spec{Metadata: metadata, Render: render, Pages: pages, Imports: extra}.Bytes()
}

// Spec describes a hand-written plugin. osm_metadata copies valid metadata out of its data segment into the
// Extism kernel unless Metadata replaces it; osm_render returns 0 with no output unless Render replaces it;
// "recurse" calls itself without end; _initialize is exported when Initialize is set.
type Spec struct {
	Metadata, Render, Initialize []byte
	// Pages is the memory's minimum size in 64 KiB pages (its maximum is 1024: 64 MiB).
	Pages uint32
	// Imports come after the three Extism functions, as functions 3, 4, ...
	Imports []Import
	// BadExport, if set, is also exported, naming a function the module does not have: the compiler refuses
	// it, quoting the name.
	BadExport string
}

// Bytes assembles the module.
func (s Spec) Bytes() []byte {
	metadata, render := s.Metadata, s.Render
	if metadata == nil {
		metadata = writeOutput([]byte(Metadata))
	}
	if render == nil {
		render = []byte{0x41, 0x00}
	}
	imports := append(append([]Import(nil), extismImports...), s.Imports...)
	funcs := []wasmFunc{
		{results: []byte{i32}, locals: []byte{i64, i32}, code: metadata, export: "osm_metadata"},
		{results: []byte{i32}, locals: []byte{i64, i32}, code: render, export: "osm_render"},
		{results: []byte{i32}, locals: []byte{i64, i32}, code: recurse(len(imports) + 2), export: "recurse"},
	}
	if s.Initialize != nil {
		// _initialize returns nothing: drop the body's i32.
		funcs = append(funcs, wasmFunc{locals: []byte{i64, i32}, code: concat(s.Initialize, []byte{0x1a}), export: "_initialize"})
	}
	return assemble(imports, funcs, max(s.Pages, 1), []byte(Metadata), s.BadExport)
}

// Bodies of hostile exports.
var (
	// SelfRecursiveRender is an osm_render that calls itself without end, in a Spec without extra imports.
	SelfRecursiveRender = recurse(4)
	Spin                = []byte{0x03, 0x40, 0x0c, 0x00, 0x0b, 0x41, 0x00}
	// FillLoop fills all 64 MiB of memory on every iteration.
	FillLoop = loop(concat(i32c(0), i32c(0), i32c(64<<20), []byte{0xfc, 0x0b, 0x00}))
	// CopyLoop copies 32 MiB on every iteration.
	CopyLoop = loop(concat(i32c(0), i32c(32<<20), i32c(32<<20), []byte{0xfc, 0x0a, 0x00, 0x00}))
	// RandomLoop asks WASI for 64 MiB of random bytes on every iteration.
	RandomLoop = loop(concat(i32c(0), i32c(64<<20), []byte{0x10, 0x03, 0x1a}))
	// FillThenSpin touches all of its memory once, then spins: resident memory grows, and stays.
	FillThenSpin = concat(i32c(0), i32c(1), i32c(64<<20), []byte{0xfc, 0x0b, 0x00}, Spin)
)

// HeavyFillLoop fills all 64 MiB of memory 600 times on every iteration: an iteration outlasts any
// call timeout, so a host that checks for timeouts at loop headers never gets to.
var HeavyFillLoop = loop(bytes.Repeat(concat(i32c(0), i32c(1), i32c(64<<20), []byte{0xfc, 0x0b, 0x00}), 600))

// Fills fills all 64 MiB of memory n times and returns: a benign call whose duration does not depend on how
// the host interrupts loops.
func Fills(n int32) []byte {
	// local 1 (i32) counts up to n.
	return concat([]byte{0x03, 0x40}, i32c(0), i32c(0), i32c(64<<20), []byte{0xfc, 0x0b, 0x00},
		[]byte{0x20, 0x01}, i32c(1), []byte{0x6a, 0x22, 0x01}, i32c(n), []byte{0x48, 0x0d, 0x00, 0x0b}, i32c(0))
}

// Busy loops n times and returns: a benign call that takes a while.
func Busy(n int32) []byte {
	// local 1 (i32) counts up to n.
	return concat([]byte{0x03, 0x40}, []byte{0x20, 0x01}, i32c(1), []byte{0x6a, 0x22, 0x01}, i32c(n),
		[]byte{0x48, 0x0d, 0x00, 0x0b}, i32c(0))
}

func recurse(self int) []byte { return concat([]byte{0x10}, u32(uint32(self)), []byte{0x1a}, i32c(0)) }

func loop(body []byte) []byte {
	return concat([]byte{0x03, 0x40}, body, []byte{0x0c, 0x00, 0x0b}, i32c(0))
}

func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func i32c(v int32) []byte { return append([]byte{0x41}, sleb(int64(v))...) }

func i64c(v int64) []byte { return append([]byte{0x42}, sleb(v)...) }

// sleb is signed LEB128, as wasm encodes constants.
func sleb(v int64) []byte {
	var out []byte
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && b&0x40 == 0) || (v == -1 && b&0x40 != 0) {
			return append(out, b)
		}
		out = append(out, b|0x80)
	}
}

// Output is an osm_render that outputs the first n bytes of the module's memory (its metadata's JSON): modules
// that differ in n have the same shape and different code and output.
func Output(n int32) []byte { return writeOutput(make([]byte, n)) }

// writeOutput copies data (at address 0 of the module's memory) into a kernel block and sets it as the
// output. Locals: 0 the block (i64), 1 the index (i32).
func writeOutput(data []byte) []byte {
	n := int32(len(data))
	return concat(i64c(int64(n)), []byte{0x10, 0x00, 0x21, 0x00}, // alloc, local.set 0
		[]byte{0x03, 0x40, 0x20, 0x00, 0x20, 0x01, 0xad, 0x7c},                                    // loop; block + u64(i)
		[]byte{0x20, 0x01, 0x2d, 0x00, 0x00, 0x10, 0x01},                                          // load8_u [i], store_u8
		[]byte{0x20, 0x01, 0x41, 0x01, 0x6a, 0x22, 0x01}, i32c(n), []byte{0x49, 0x0d, 0x00, 0x0b}, // i++ < n
		[]byte{0x20, 0x00}, i64c(int64(n)), []byte{0x10, 0x02}, i32c(0)) // output_set(block, n); return 0
}

func assemble(imports []Import, funcs []wasmFunc, pages uint32, data []byte, badExport string) []byte {
	var types, imps, fns, exports, codes [][]byte
	typeOf := func(params, results []byte) []byte {
		t := concat([]byte{0x60}, u32(uint32(len(params))), params, u32(uint32(len(results))), results)
		for i, have := range types {
			if bytes.Equal(have, t) {
				return u32(uint32(i))
			}
		}
		types = append(types, t)
		return u32(uint32(len(types) - 1))
	}
	for _, im := range imports {
		imps = append(imps, concat(name(im.module), name(im.name), []byte{0x00}, typeOf(im.params, im.results)))
	}
	for i, f := range funcs {
		fns = append(fns, typeOf(f.params, f.results))
		exports = append(exports, concat(name(f.export), []byte{0x00}, u32(uint32(len(imports)+i))))
		body := u32(uint32(len(f.locals)))
		for _, l := range f.locals {
			body = append(body, 0x01, l)
		}
		body = concat(body, f.code, []byte{0x0b})
		codes = append(codes, concat(u32(uint32(len(body))), body))
	}
	exports = append(exports, concat(name("memory"), []byte{0x02, 0x00}))
	if badExport != "" {
		exports = append(exports, concat(name(badExport), []byte{0x00}, u32(9999)))
	}
	out := []byte("\x00asm\x01\x00\x00\x00")
	out = section(out, 1, types...)
	out = section(out, 2, imps...)
	out = section(out, 3, fns...)
	out = section(out, 5, concat([]byte{0x01}, u32(pages), u32(1024)))
	out = section(out, 7, exports...)
	out = section(out, 10, codes...)
	return section(out, 11, concat([]byte{0x00, 0x41, 0x00, 0x0b}, u32(uint32(len(data))), data))
}

func section(out []byte, id byte, items ...[]byte) []byte {
	body := concat(u32(uint32(len(items))), bytes.Join(items, nil))
	return concat(out, []byte{id}, u32(uint32(len(body))), body)
}

func name(s string) []byte { return concat(u32(uint32(len(s))), []byte(s)) }

func u32(v uint32) []byte { return binary.AppendUvarint(nil, uint64(v)) }
