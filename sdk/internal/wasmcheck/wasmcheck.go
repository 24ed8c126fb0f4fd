// Package wasmcheck checks an untrusted WebAssembly binary before the host compiles it, so that what would
// otherwise crash or bloat whoever decodes it fails at once with an error naming the cause.
//
// Check reads the module once, in time linear in its size, and refuses:
//
//   - a binary beyond Limits.ModuleBytes, or one that is malformed where Check reads it: sections, vectors,
//     function bodies, instructions outside the set below;
//   - a count larger than the bytes left to hold its entries (counts.go): wazero allocates for a count before
//     reading what it counts, and a count of five bytes can claim 2^32 entries;
//   - more locals, globals, exports, data segments, element entries or names than the Limits allow, and
//     tables that could hold more entries than the function limit, or that table.grow may grow without a
//     declared maximum: what wazero allocates or keeps for the module and for each of its instances, outside
//     the memory limit.
//
// It also reports what the host needs before compiling: the exports, and whether an initialised instance's
// state can be snapshotted (Module.Unsnapshottable). It checks the structure of what it reads, not the
// module's validity: the compiler does that, on the modules Check let through. It does not bound the
// compiler's time or memory, which grow with what a function contains (nesting, locals, branches):
// osm-controller compiles in a process of its own, which the operating system bounds.
//
// The instruction decoder knows the instruction set of the MVP and of the extensions wazero enables for Go
// modules (sign extension, saturating conversions, bulk memory, reference types, multiple values); a module
// using anything else (SIMD, threads, exceptions, tail calls) is refused with a message naming the
// instruction.
package wasmcheck

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// Limits bound what a module may contain. Zero fields take the values of DefaultLimits.
type Limits struct {
	// ModuleBytes bounds the size of the binary.
	ModuleBytes int
	// Functions bounds the number of functions, imported and defined, and also the entries of all element
	// segments and the entries all tables may reach (see table).
	Functions uint32
	// Locals bounds the locals of all functions together. wazero allocates a byte for each local a function
	// declares, and keeps it, before it reads the function's code; locals are declared in runs, so a body of a
	// few bytes can declare 2^32 of them.
	Locals uint32
	// Globals, Exports, DataSegments and Names bound the module's globals (imported and defined), exports, data
	// segments and the function and local names of its name section, which wazero keeps for the module and
	// copies in part for every instance, outside the memory limit.
	Globals, Exports, DataSegments, Names uint32
}

// DefaultLimits leave ample room around the default Go plugins (4.5 MB, 2,560 functions, 10,791 locals in all;
// 8 globals, 7 exports, 44,128 data segments, 2,545 element entries, no names). What wazero keeps was measured
// at about 1.3 KB per global, 150 bytes per export, 85 per data segment, 100 per element entry and 26 per name
// when a module loads, and 90 bytes per global or element entry for every instance: a 5 MB module of a million
// globals held 1.3 GiB.
var DefaultLimits = Limits{
	ModuleBytes:  32 << 20,
	Functions:    100_000,
	Locals:       1_000_000,
	Globals:      1_000,
	Exports:      10_000,
	DataSegments: 250_000,
	Names:        250_000,
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.ModuleBytes <= 0 {
		l.ModuleBytes = d.ModuleBytes
	}
	for _, f := range []struct{ v, d *uint32 }{
		{&l.Functions, &d.Functions}, {&l.Locals, &d.Locals}, {&l.Globals, &d.Globals}, {&l.Exports, &d.Exports},
		{&l.DataSegments, &d.DataSegments}, {&l.Names, &d.Names},
	} {
		if *f.v == 0 {
			*f.v = *f.d
		}
	}
	return l
}

// Export kinds.
const (
	KindFunc   byte = 0
	KindTable  byte = 1
	KindMemory byte = 2
	KindGlobal byte = 3
)

// Module is what Check learnt about an accepted module.
type Module struct {
	// Exports maps each export's name to its kind (KindFunc, ...).
	Exports map[string]byte
	// Unsnapshottable says why an initialised instance's state is more than its globals and its memory (an
	// imported memory, table or global, a start function, passive data, an instruction that changes a table),
	// or is empty when package wasmsnap can capture it.
	Unsnapshottable string
}

// ExportsFunc reports whether the module exports a function of that name.
func (m *Module) ExportsFunc(name string) bool {
	k, ok := m.Exports[name]
	return ok && k == KindFunc
}

// LimitError is a module beyond one of the limits.
type LimitError struct {
	// What names the limit: "module size", "functions", "locals of all functions", "globals", "exports", ...
	What  string
	Got   uint64
	Limit uint64
	// Func is the index of the function concerned (among the defined ones), or -1.
	Func int
}

func (e *LimitError) Error() string {
	where := ""
	if e.Func >= 0 {
		where = fmt.Sprintf(" in function %d", e.Func)
	}
	return fmt.Sprintf("%s %d%s exceeds the limit of %d", e.What, e.Got, where, e.Limit)
}

var header = []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}

// Check reads wasm and returns what it exports, or an error when the binary is malformed where Check reads
// it, uses instructions Check does not know, or exceeds the limits (a *LimitError).
func Check(wasm []byte, limits Limits) (*Module, error) {
	l := limits.withDefaults()
	if len(wasm) > l.ModuleBytes {
		return nil, &LimitError{What: "module size", Got: uint64(len(wasm)), Limit: uint64(l.ModuleBytes), Func: -1}
	}
	if !bytes.HasPrefix(wasm, header) {
		return nil, errors.New("not a WebAssembly 1.0 binary module")
	}
	c := &checker{limits: l, mod: &Module{Exports: map[string]byte{}}}
	r := &reader{b: wasm, pos: len(header)}
	for !r.done() {
		id := r.byte()
		body := r.bytes(r.u32())
		if r.err != nil {
			return nil, fmt.Errorf("section %d: %w", id, r.err)
		}
		sr := &reader{b: body}
		if err := c.section(id, sr); err != nil {
			return nil, err
		}
		if sr.err == nil && !sr.done() {
			sr.err = errors.New("trailing bytes")
		}
		if sr.err != nil {
			return nil, fmt.Errorf("section %d: %w", id, sr.err)
		}
	}
	if c.bodies != c.defined {
		return nil, fmt.Errorf("module declares %d functions but has code for %d", c.defined, c.bodies)
	}
	for _, n := range []struct {
		what       string
		got, limit uint64
	}{
		{"globals", uint64(c.globals), uint64(l.Globals)},
		{"data segments", uint64(c.dataSegments), uint64(l.DataSegments)},
		{"element entries", c.elementEntries, uint64(l.Functions)},
		{"names", c.names, uint64(l.Names)},
	} {
		if n.got > n.limit {
			return nil, &LimitError{What: n.what, Got: n.got, Limit: n.limit, Func: -1}
		}
	}
	return c.mod, nil
}

type checker struct {
	limits   Limits
	mod      *Module
	imported uint32 // imported functions
	defined  uint32 // functions the function section declares
	bodies   uint32 // bodies the code section holds
	// tables are the imported then the defined tables; tableEntries the entries they may hold in all.
	tables       []tableLimits
	tableEntries uint64
	// globals (imported and defined), dataSegments, elementEntries and names count what Check bounds once it
	// has read the whole module; locals are bounded as they are read, exports before their names are kept.
	globals, dataSegments         uint32
	elementEntries, locals, names uint64
}

// vectorSections are the sections whose body is a vector: a count, then that many entries (type, import,
// function, table, memory, global, export, element, code, data).
var vectorSections = map[byte]bool{1: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true, 9: true, 10: true, 11: true}

// section reads the sections that matter for the limits, the exports and snapshots; the compiler reads the
// others. A limit breach is returned; malformed input is left in r.err.
func (c *checker) section(id byte, r *reader) error {
	if vectorSections[id] {
		// Every vector section's entries are counted first (see counts.go).
		peek := *r
		if peek.count(); peek.err != nil {
			r.err = peek.err
			return nil
		}
	}
	switch id {
	case 0:
		c.custom(r)
	case 1:
		c.types(r)
	case 4:
		for n := r.count(); n > 0 && r.err == nil; n-- {
			r.byte()
			c.table(r.limits(), r)
		}
	case 9:
		c.elements(r)
	case 11:
		c.data(r)
	case 6:
		c.globals += r.u32()
		r.pos = len(r.b)
	case 2:
		c.imports(r)
	case 3:
		c.defined = r.u32()
		r.pos = len(r.b)
	case 7:
		n := r.u32()
		if n > c.limits.Exports { // before the names are kept
			return &LimitError{What: "exports", Got: uint64(n), Limit: uint64(c.limits.Exports), Func: -1}
		}
		for i := uint32(0); i < n && r.err == nil; i++ {
			name, kind := r.name(), r.byte()
			r.u32()
			c.mod.Exports[name] = kind
		}
	case 8:
		c.unsnapshottable("it has a start function")
		r.pos = len(r.b)
	case 12:
		c.unsnapshottable("it has passive data segments")
		r.pos = len(r.b)
	case 10:
		return c.code(r)
	default:
		r.pos = len(r.b)
	}
	if n := uint64(c.imported) + uint64(c.defined); r.err == nil && n > uint64(c.limits.Functions) {
		return &LimitError{What: "functions", Got: n, Limit: uint64(c.limits.Functions), Func: -1}
	}
	return nil
}

func (c *checker) imports(r *reader) {
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		r.name()
		r.name()
		switch kind := r.byte(); kind {
		case KindFunc:
			r.u32()
			c.imported++
		case KindTable:
			r.byte()
			c.table(r.limits(), r)
			c.unsnapshottable("it imports a table")
		case KindMemory:
			r.limits()
			c.unsnapshottable("it imports its memory")
		case KindGlobal:
			r.valType()
			r.byte()
			c.globals++
			c.unsnapshottable("it imports a global")
		default:
			r.fail("import %d has unsupported kind %#x", i, kind)
		}
	}
}

func (c *checker) code(r *reader) error {
	n := r.u32()
	if r.err != nil {
		return nil
	}
	if n != c.defined {
		r.fail("code section has %d bodies for %d declared functions", n, c.defined)
		return nil
	}
	c.bodies = n
	for i := uint32(0); i < n && r.err == nil; i++ {
		body := r.bytes(r.u32())
		if r.err != nil {
			return nil
		}
		if err := c.body(int(i), body); err != nil {
			return err
		}
	}
	return nil
}

// body checks one function body: its locals, then every instruction, up to the body's final end.
func (c *checker) body(fn int, code []byte) error {
	r := &reader{b: code}
	for groups := r.u32(); groups > 0 && r.err == nil; groups-- {
		c.locals += uint64(r.u32())
		r.valType()
		if c.locals > uint64(c.limits.Locals) {
			return &LimitError{What: "locals of all functions", Got: c.locals, Limit: uint64(c.limits.Locals), Func: fn}
		}
	}
	// The body is a block of its own.
	for depth := 1; depth > 0 && r.err == nil; {
		start, op := r.pos, byte(0)
		if n := simpleInstruction(r.b, r.pos); !fullDecodingOnly && n > 0 {
			op, r.pos = r.b[r.pos], r.pos+n
		} else {
			op = r.byte()
			c.noteStateChange(op, r)
			if err := skipImmediates(r, op); err != nil {
				return fmt.Errorf("function %d at offset %d: %w", fn, start, err)
			}
		}
		switch op {
		case 0x02, 0x03, 0x04: // block, loop, if
			depth++
		case 0x0b: // end
			depth--
		}
	}
	if r.err != nil {
		return fmt.Errorf("function %d: %w", fn, r.err)
	}
	if !r.done() {
		return fmt.Errorf("function %d: %d bytes after the end of the body", fn, len(code)-r.pos)
	}
	return nil
}

// fullDecodingOnly turns simpleInstruction's shortcut off, for the tests that compare both ways.
var fullDecodingOnly = false

// simpleInstruction returns the length of the instruction at b[pos] when it is one of the common ones that
// need no more than stepping over: no immediate, or one or two immediates of one byte each (locals, calls,
// branches, loads and stores, small constants, block types), and none of the instructions noteStateChange
// records. Otherwise it returns 0, and body decodes the instruction in full. Most of a Go module's
// instructions are of this kind: checking the default Ubuntu plugin took 16 ms without this path and 8.5 ms with it
// (BenchmarkCheckDefaultPlugin), once for every module a plugin host loads.
func simpleInstruction(b []byte, pos int) int {
	if pos+2 >= len(b) {
		return 0 // near the end: the full decoding reports what is missing
	}
	op := b[pos]
	switch immediates[op] {
	case immNone:
		return 1
	case immU32:
		if op != 0x26 && b[pos+1] < 0x80 { // not table.set
			return 2
		}
	case immBlock, immS32, immS64:
		if b[pos+1] < 0x80 { // a block type or a constant in one byte
			return 2
		}
	case immU32x2:
		if b[pos+1] < 0x80 && b[pos+2] < 0x80 {
			return 3
		}
	}
	return 0
}

func (c *checker) unsnapshottable(why string) {
	if c.mod.Unsnapshottable == "" {
		c.mod.Unsnapshottable = why
	}
}

// noteStateChange records instructions that change state outside globals and memory: tables and the dropped
// flag of segments. r is positioned after op.
func (c *checker) noteStateChange(op byte, r *reader) {
	switch op {
	case 0x26: // table.set
		c.unsnapshottable("it changes a table (table.set)")
	case 0xfc:
		peek := *r
		switch sub := peek.u32(); sub {
		case 8, 9: // memory.init, data.drop
			c.unsnapshottable("it uses passive data (memory.init, data.drop)")
		case 12, 13, 14, 15, 17: // table.init, elem.drop, table.copy, table.grow, table.fill
			c.unsnapshottable("it changes a table (0xfc " + strconv.Itoa(int(sub)) + ")")
			if sub == 15 {
				c.tableGrow(peek.u32(), r)
			}
		}
	}
}
