package wasmtest

import "bytes"

// Metadata is the osm_metadata a Spec's module declares unless its Spec replaces the export.
const Metadata = `{"abiVersion":"v1","name":"hand","version":"1.0.0","operatingSystems":[{"name":"testos"}],` +
	`"provisioningUtilities":["cloud-init"],"cloudProviders":["*"]}`

// extismImports are what writeOutput calls, as functions 0, 1 and 2.
var extismImports = []Import{
	{"extism:host/env", "alloc", []byte{I64}, []byte{I64}},
	{"extism:host/env", "store_u8", []byte{I64, I32}, nil},
	{"extism:host/env", "output_set", []byte{I64, I64}, nil},
}

// RandomGet is WASI's random_get, as function 3 of a plugin importing it after the Extism functions.
var RandomGet = Import{"wasi_snapshot_preview1", "random_get", []byte{I32, I32}, []byte{I32}}

// InputOffset and ErrorSet are Extism's input_offset and error_set, for ErrorInput (as functions 3 and 4).
var (
	InputOffset = Import{"extism:host/env", "input_offset", nil, []byte{I64}}
	ErrorSet    = Import{"extism:host/env", "error_set", []byte{I64}, nil}
)

// ErrorInput is an export that fails with its own input as the error, in a plugin importing InputOffset and
// ErrorSet (in that order) after the Extism functions.
var ErrorInput = []byte{0x10, 0x03, 0x10, 0x04, 0x41, 0x01}

// Plugin assembles a plugin with the given osm_metadata and osm_render bodies (nil: the defaults) and memory
// pages, importing extra after the Extism functions.
func Plugin(metadata, render []byte, pages uint32, extra ...Import) []byte {
	return Spec{Metadata: metadata, Render: render, Pages: pages, Imports: extra}.Bytes()
}

// Spec describes a hand-written plugin that speaks the Extism ABI directly. osm_metadata copies Metadata out
// of its data segment into the Extism kernel unless Metadata replaces it; osm_render returns 0 with no
// output unless Render replaces it; "recurse" calls itself without end; _initialize is exported when
// Initialize is set. Every body has the locals 0 (i64) and 1 (i32).
type Spec struct {
	Metadata, Render, Initialize []byte
	// Pages is the memory's minimum size in 64 KiB pages (its maximum is 1024: 64 MiB).
	Pages uint32
	// Imports come after the three Extism functions, as functions 3, 4, ...
	Imports []Import
	// BadExport, if set, is also exported, naming a function the module does not have.
	BadExport string
}

// Bytes assembles the plugin.
func (s Spec) Bytes() []byte {
	metadata, render := s.Metadata, s.Render
	if metadata == nil {
		metadata = writeOutput([]byte(Metadata))
	}
	if render == nil {
		render = []byte{0x41, 0x00}
	}
	imports := append(append([]Import(nil), extismImports...), s.Imports...)
	locals := []byte{I64, I32}
	funcs := []Func{
		{Results: []byte{I32}, Locals: locals, Code: metadata, Export: "osm_metadata"},
		{Results: []byte{I32}, Locals: locals, Code: render, Export: "osm_render"},
		{Results: []byte{I32}, Locals: locals, Code: recurse(len(imports) + 2), Export: "recurse"},
	}
	if s.Initialize != nil {
		// _initialize returns nothing: drop the body's i32.
		funcs = append(funcs, Func{Locals: locals, Code: concat(s.Initialize, []byte{0x1a}), Export: "_initialize"})
	}
	return Module{Imports: imports, Funcs: funcs, Memory: max(s.Pages, 1), MaxMemory: 1024, Data: []byte(Metadata), BadExport: s.BadExport}.Bytes()
}

// Bodies of hostile exports, for a Spec.
var (
	// SelfRecursiveRender is an osm_render that calls itself without end, in a Spec without extra imports.
	SelfRecursiveRender = recurse(4)
	// SpinRender loops without end.
	SpinRender = concat(Spin, I32Const(0))
	// FillLoop fills all 64 MiB of memory on every iteration.
	FillLoop = loop(concat(I32ConstS(0), I32ConstS(0), I32ConstS(64<<20), []byte{0xfc, 0x0b, 0x00}))
	// CopyLoop copies 32 MiB on every iteration.
	CopyLoop = loop(concat(I32ConstS(0), I32ConstS(32<<20), I32ConstS(32<<20), []byte{0xfc, 0x0a, 0x00, 0x00}))
	// RandomLoop asks WASI for 64 MiB of random bytes on every iteration (import RandomGet).
	RandomLoop = loop(concat(I32ConstS(0), I32ConstS(64<<20), []byte{0x10, 0x03, 0x1a}))
	// FillThenSpin touches all of its memory once, then spins: resident memory grows, and stays.
	FillThenSpin = concat(I32ConstS(0), I32ConstS(1), I32ConstS(64<<20), []byte{0xfc, 0x0b, 0x00}, SpinRender)
	// HeavyFillLoop fills all 64 MiB of memory 6000 times on every iteration: an iteration outlasts any call
	// timeout, so a host that checks for timeouts at loop headers never gets to. (600 times took about a
	// second in a release-built host, which its check then caught.)
	HeavyFillLoop = loop(bytes.Repeat(concat(I32ConstS(0), I32ConstS(1), I32ConstS(64<<20), []byte{0xfc, 0x0b, 0x00}), 6000))
)

// Fills fills all 64 MiB of memory n times and returns: a benign call whose duration does not depend on how
// the host interrupts loops.
func Fills(n int32) []byte {
	// local 1 (i32) counts up to n.
	return concat([]byte{0x03, 0x40}, I32ConstS(0), I32ConstS(0), I32ConstS(64<<20), []byte{0xfc, 0x0b, 0x00},
		[]byte{0x20, 0x01}, I32ConstS(1), []byte{0x6a, 0x22, 0x01}, I32ConstS(n), []byte{0x48, 0x0d, 0x00, 0x0b}, I32ConstS(0))
}

// Busy loops n times and returns: a benign call that takes a while.
func Busy(n int32) []byte {
	// local 1 (i32) counts up to n.
	return concat([]byte{0x03, 0x40}, []byte{0x20, 0x01}, I32ConstS(1), []byte{0x6a, 0x22, 0x01}, I32ConstS(n),
		[]byte{0x48, 0x0d, 0x00, 0x0b}, I32ConstS(0))
}

// Output is an osm_render that outputs the first n bytes of the module's memory (its metadata's JSON):
// plugins that differ in n have the same shape and different code and output.
func Output(n int32) []byte { return writeOutput(make([]byte, n)) }

func recurse(self int) []byte {
	return concat([]byte{0x10}, U32(uint32(self)), []byte{0x1a}, I32ConstS(0))
}

func loop(body []byte) []byte {
	return concat([]byte{0x03, 0x40}, body, []byte{0x0c, 0x00, 0x0b}, I32ConstS(0))
}

func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// writeOutput copies data (at address 0 of the module's memory) into a kernel block and sets it as the
// output. Locals: 0 the block (i64), 1 the index (i32).
func writeOutput(data []byte) []byte {
	n := int32(len(data))
	return concat(I64Const(int64(n)), []byte{0x10, 0x00, 0x21, 0x00}, // alloc, local.set 0
		[]byte{0x03, 0x40, 0x20, 0x00, 0x20, 0x01, 0xad, 0x7c},                                         // loop; block + u64(i)
		[]byte{0x20, 0x01, 0x2d, 0x00, 0x00, 0x10, 0x01},                                               // load8_u [i], store_u8
		[]byte{0x20, 0x01, 0x41, 0x01, 0x6a, 0x22, 0x01}, I32ConstS(n), []byte{0x49, 0x0d, 0x00, 0x0b}, // i++ < n
		[]byte{0x20, 0x00}, I64Const(int64(n)), []byte{0x10, 0x02}, I32ConstS(0)) // output_set(block, n); return 0
}
