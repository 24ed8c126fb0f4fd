// Package wasmbin reads the interface of a WebAssembly module (its imports and exports) and instruments its
// code with an interrupt check, for the host runtime's fast path.
//
// The instrumentation replaces wazero's close-on-context-done mode for modules that allow it. That mode makes
// every iteration of every guest loop leave the machine code for Go to check whether the module was closed
// (~27 ns an iteration), which for a Go plugin is more than half of a render. Instrument instead adds a fuel
// counter, a global the module's own code cannot name: every loop iteration and every function entry decrements
// it, which costs a few instructions, and when it reaches zero the code refills it and calls an imported host
// function, where the host checks the call's deadline. The module still leaves for Go every few thousand
// iterations, which keeps the goroutine running it preemptible for Go's garbage collector, and a call that ran
// out of time is stopped within one such period.
//
// The decoder knows the instruction set wazero compiles for Go modules: the MVP, sign extension, saturating
// conversions, bulk memory, reference types and tail calls. Anything else (SIMD, threads, exceptions, GC
// types) makes Instrument fail, and the host then keeps wazero's own mode.
package wasmbin

import (
	"bytes"
	"errors"
	"fmt"
)

// ValType is a WebAssembly value type.
type ValType byte

// The value types of function signatures.
const (
	I32       ValType = 0x7f
	I64       ValType = 0x7e
	F32       ValType = 0x7d
	F64       ValType = 0x7c
	V128      ValType = 0x7b
	FuncRef   ValType = 0x70
	ExternRef ValType = 0x6f
)

// FuncType is a function signature.
type FuncType struct {
	Params, Results []ValType
}

// Equal reports whether t has exactly the params and results.
func (t FuncType) Equal(params, results []ValType) bool {
	return bytes.Equal(valBytes(t.Params), valBytes(params)) && bytes.Equal(valBytes(t.Results), valBytes(results))
}

func valBytes(v []ValType) []byte {
	b := make([]byte, len(v))
	for i := range v {
		b[i] = byte(v[i])
	}
	return b
}

// Import kinds.
const (
	KindFunc   = 0
	KindTable  = 1
	KindMemory = 2
	KindGlobal = 3
	KindTag    = 4
)

// Import is one import of a module. Type is set for functions.
type Import struct {
	Module, Name string
	Kind         byte
	Type         FuncType
}

// Module is the interface of a module: what it imports and which functions it exports.
type Module struct {
	Imports []Import
	// Exports maps the names of exported functions to their signatures.
	Exports map[string]FuncType
}

// Parse reads the imports and function exports of wasm. It checks the structure of the sections it reads,
// not the module's validity: the compiler does that.
func Parse(wasm []byte) (*Module, error) {
	p, err := parse(wasm)
	if err != nil {
		return nil, err
	}
	m := &Module{Exports: map[string]FuncType{}}
	for _, imp := range p.imports {
		m.Imports = append(m.Imports, Import{Module: imp.module, Name: imp.name, Kind: imp.kind, Type: p.funcType(imp.typeIdx, imp.kind)})
	}
	for _, e := range p.exports {
		if e.kind != KindFunc {
			continue
		}
		t, ok := p.funcTypeOf(e.idx)
		if !ok {
			return nil, fmt.Errorf("export %q names function %d, which does not exist", e.name, e.idx)
		}
		m.Exports[e.name] = t
	}
	return m, nil
}

type section struct {
	id   byte
	body []byte
}

type importEntry struct {
	module, name string
	kind         byte
	typeIdx      uint32
}

type exportEntry struct {
	name string
	kind byte
	idx  uint32
}

type parsed struct {
	sections      []section
	types         []FuncType
	imports       []importEntry
	importedFuncs uint32
	importedGlobs uint32
	funcTypes     []uint32 // type index of each defined function
	exports       []exportEntry
	definedGlobs  uint32
	hasGlobalSec  bool
}

func (p *parsed) funcType(idx uint32, kind byte) FuncType {
	if kind != KindFunc || int(idx) >= len(p.types) {
		return FuncType{}
	}
	return p.types[idx]
}

func (p *parsed) funcTypeOf(fn uint32) (FuncType, bool) {
	if fn < p.importedFuncs {
		n := uint32(0)
		for _, imp := range p.imports {
			if imp.kind != KindFunc {
				continue
			}
			if n == fn {
				return p.funcType(imp.typeIdx, KindFunc), int(imp.typeIdx) < len(p.types)
			}
			n++
		}
	}
	i := fn - p.importedFuncs
	if int(i) >= len(p.funcTypes) || int(p.funcTypes[i]) >= len(p.types) {
		return FuncType{}, false
	}
	return p.types[p.funcTypes[i]], true
}

var header = []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}

func parse(wasm []byte) (*parsed, error) {
	if !bytes.HasPrefix(wasm, header) {
		return nil, errors.New("not a WebAssembly 1.0 binary module")
	}
	p := &parsed{}
	r := &reader{b: wasm, pos: len(header)}
	for !r.done() {
		id := r.byte()
		size := r.u32()
		body := r.bytes(int(size))
		if r.err != nil {
			return nil, fmt.Errorf("section %d: %w", id, r.err)
		}
		p.sections = append(p.sections, section{id: id, body: body})
		sr := &reader{b: body}
		switch id {
		case 1:
			p.readTypes(sr)
		case 2:
			p.readImports(sr)
		case 3:
			n := sr.u32()
			for i := uint32(0); i < n && sr.err == nil; i++ {
				p.funcTypes = append(p.funcTypes, sr.u32())
			}
		case 6:
			p.hasGlobalSec = true
			p.definedGlobs = sr.u32()
			sr.pos = len(sr.b) // the globals themselves are copied, not read
		case 7:
			n := sr.u32()
			for i := uint32(0); i < n && sr.err == nil; i++ {
				p.exports = append(p.exports, exportEntry{name: sr.name(), kind: sr.byte(), idx: sr.u32()})
			}
		default:
			sr.pos = len(sr.b)
		}
		if sr.err == nil && !sr.done() {
			sr.err = errors.New("trailing bytes")
		}
		if sr.err != nil {
			return nil, fmt.Errorf("section %d: %w", id, sr.err)
		}
	}
	return p, nil
}

func (p *parsed) readTypes(r *reader) {
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		if form := r.byte(); form != 0x60 && r.err == nil {
			r.err = fmt.Errorf("type %d has form %#x, not a function type", i, form)
			return
		}
		var t FuncType
		t.Params = r.valTypes()
		t.Results = r.valTypes()
		p.types = append(p.types, t)
	}
}

func (p *parsed) readImports(r *reader) {
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		imp := importEntry{module: r.name(), name: r.name(), kind: r.byte()}
		switch imp.kind {
		case KindFunc:
			imp.typeIdx = r.u32()
			p.importedFuncs++
		case KindTable:
			r.byte() // reference type
			r.limits()
		case KindMemory:
			r.limits()
		case KindGlobal:
			r.byte() // value type
			r.byte() // mutability
			p.importedGlobs++
		case KindTag:
			r.byte() // attribute
			r.u32()  // type
		default:
			r.err = fmt.Errorf("import %q.%q has unknown kind %#x", imp.module, imp.name, imp.kind)
		}
		p.imports = append(p.imports, imp)
	}
}

// reader decodes the binary format. The first error sticks; later reads return zero values.
type reader struct {
	b   []byte
	pos int
	err error
}

func (r *reader) done() bool { return r.err != nil || r.pos >= len(r.b) }

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.pos >= len(r.b) {
		r.err = errors.New("unexpected end")
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.pos {
		r.err = errors.New("unexpected end")
		return nil
	}
	b := r.b[r.pos : r.pos+n]
	r.pos += n
	return b
}

// uleb reads an unsigned LEB128 number of at most bits bits.
func (r *reader) uleb(bits int) uint64 {
	if r.err == nil && r.pos < len(r.b) && r.b[r.pos] < 0x80 { // the common one-byte case
		c := r.b[r.pos]
		r.pos++
		return uint64(c)
	}
	var v uint64
	for shift := 0; ; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		if shift >= bits {
			r.err = errors.New("integer too long")
			return 0
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
}

// sleb skips a signed LEB128 number of at most bits bits.
func (r *reader) sleb(bits int) {
	for shift := 0; ; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return
		}
		if shift >= bits {
			r.err = errors.New("integer too long")
			return
		}
		if c&0x80 == 0 {
			return
		}
	}
}

func (r *reader) u32() uint32 { return uint32(r.uleb(32)) }

func (r *reader) name() string { return string(r.bytes(int(r.u32()))) }

func (r *reader) valTypes() []ValType {
	n := r.u32()
	var out []ValType
	for i := uint32(0); i < n && r.err == nil; i++ {
		t := ValType(r.byte())
		switch t {
		case I32, I64, F32, F64, V128, FuncRef, ExternRef:
		default:
			if r.err == nil {
				r.err = fmt.Errorf("unsupported value type %#x", byte(t))
			}
		}
		out = append(out, t)
	}
	return out
}

func (r *reader) limits() {
	switch flags := r.byte(); flags {
	case 0x00, 0x02:
		r.u32()
	case 0x01, 0x03:
		r.u32()
		r.u32()
	default:
		if r.err == nil {
			r.err = fmt.Errorf("unsupported limits flags %#x", flags)
		}
	}
}

func appendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

func appendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
