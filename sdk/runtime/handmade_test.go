package runtime_test

import (
	"bytes"

	"github.com/osmhq/osm/sdk/wasmtest"
)

// Hand-written plugins: modules no Go toolchain would emit, speaking the Extism ABI directly. Each returns
// valid metadata from osm_metadata (copied out of its data segment into the Extism kernel), unless it spins
// there, and can spin in any other place the host runs module code.

// spinAt names where a hand-written plugin loops forever.
type spinAt string

const (
	spinNowhere  spinAt = ""
	spinMetadata spinAt = "osm_metadata"
	spinInit     spinAt = "_initialize"
	spinStart    spinAt = "start function"
	spinRender   spinAt = "osm_render"
)

const handMetadata = `{"abiVersion":"v1","name":"hand","version":"1.0.0","operatingSystems":[{"name":"testos"}],` +
	`"provisioningUtilities":["cloud-init"],"cloudProviders":["*"]}`

// handGlobals is how many mutable globals every spinning loop rewrites on each iteration: a host that kept its
// interrupt check in module state (a fuel counter in a global) would be defeated by exactly this.
const handGlobals = 16

// handImports are the Extism kernel functions writeOutput calls, in the order of its call indices.
var handImports = []wasmtest.Import{
	{Module: "extism:host/env", Name: "alloc", Params: []byte{wasmtest.I64}, Results: []byte{wasmtest.I64}},
	{Module: "extism:host/env", Name: "store_u8", Params: []byte{wasmtest.I64, wasmtest.I32}},
	{Module: "extism:host/env", Name: "output_set", Params: []byte{wasmtest.I64, wasmtest.I64}},
}

// handPlugin assembles a plugin that spins at where, rewriting all its globals as it goes.
func handPlugin(where spinAt) []byte {
	imports := handImports
	const firstFunc = 3 // after the imports
	spin := tamperingSpin()
	ret0 := wasmtest.I32Const(0)
	metadata := writeOutput([]byte(handMetadata))
	if where == spinMetadata {
		metadata = append(append([]byte(nil), spin...), ret0...)
	}
	render := ret0
	if where == spinRender {
		render = append(append([]byte(nil), spin...), ret0...)
	}
	funcs := []wasmtest.Func{
		{Results: []byte{wasmtest.I32}, Locals: []byte{wasmtest.I64, wasmtest.I32}, Code: metadata, Export: "osm_metadata"},
		{Results: []byte{wasmtest.I32}, Code: render, Export: "osm_render"},
	}
	m := wasmtest.Module{Imports: imports, Memory: 1, Globals: handGlobals, Data: []byte(handMetadata)}
	switch where {
	case spinInit:
		funcs = append(funcs, wasmtest.Func{Code: spin, Export: "_initialize"})
	case spinStart:
		funcs = append(funcs, wasmtest.Func{Code: spin})
		start := uint32(firstFunc + len(funcs) - 1)
		m.Start = &start
	}
	m.Funcs = funcs
	return m.Bytes()
}

// tamperingSpin is an endless loop that increments every global on each iteration.
func tamperingSpin() []byte {
	code := []byte{0x03, wasmtest.Empty}
	for g := range handGlobals {
		code = append(code, 0x23, byte(g)) // global.get g
		code = append(code, wasmtest.I32Const(1)...)
		code = append(code, 0x6a, 0x24, byte(g)) // i32.add, global.set g
	}
	return append(code, 0x0c, 0x00, 0x0b) // br 0, end
}

// writeOutput is the body of an export that copies data (at address 0 of its memory) into a kernel block and
// sets it as the output. Locals: 0 the block (i64), 1 the index (i32).
func writeOutput(data []byte) []byte {
	n := int64(len(data))
	var b bytes.Buffer
	b.Write(wasmtest.I64Const(n))
	b.Write([]byte{0x10, 0x00, 0x21, 0x00})             // call alloc, local.set 0
	b.Write([]byte{0x03, wasmtest.Empty})               // loop
	b.Write([]byte{0x20, 0x00, 0x20, 0x01, 0xad, 0x7c}) // block + i64.extend_i32_u(i)
	b.Write([]byte{0x20, 0x01, 0x2d, 0x00, 0x00})       // i32.load8_u [i]
	b.Write([]byte{0x10, 0x01})                         // call store_u8
	b.Write([]byte{0x20, 0x01, 0x41, 0x01, 0x6a, 0x22, 0x01})
	b.Write(wasmtest.I32ConstS(int32(n)))
	b.Write([]byte{0x49, 0x0d, 0x00, 0x0b}) // i32.lt_u, br_if 0, end
	b.Write([]byte{0x20, 0x00})
	b.Write(wasmtest.I64Const(n))
	b.Write([]byte{0x10, 0x02}) // call output_set
	b.Write(wasmtest.I32Const(0))
	return b.Bytes()
}
