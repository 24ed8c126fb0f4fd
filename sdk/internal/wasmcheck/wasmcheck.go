// Package wasmcheck checks an untrusted WebAssembly binary against limits before the host compiles it.
//
// wazero's compiler is not linear in everything a module can contain: its compile time grows with the square
// of how deeply blocks nest within a function (a 1 MiB body of nested blocks took over 400 s), and it cannot be
// interrupted. Check reads the module once, in time linear in its size, and refuses what would make the
// compiler slow: a binary, a function body, a locals list or a block nesting depth beyond the limits, or more
// functions than allowed. It checks the structure of what it reads, not the module's validity: the compiler
// does that, on the modules Check let through.
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
	// Functions bounds the number of functions, imported and defined.
	Functions uint32
	// BodyBytes bounds the size of one function body.
	BodyBytes uint32
	// Locals bounds the number of locals one function declares.
	Locals uint32
	// Branches bounds the control instructions (block, loop, if, else, br, br_if, br_table) of one function body.
	Branches uint32
	// Cost bounds the sum, over all functions, of the square of their control instructions: wazero's compile
	// time grows with it.
	Cost uint64
	// Globals, Exports and DataSegments bound the module's globals (imported and defined), exports and data
	// segments, which wazero keeps for the module and copies for every instance, outside the memory limit;
	// the entries of all element segments are bounded by Functions.
	Globals, Exports, DataSegments uint32
	// Params bounds a function type's parameters, and its results.
	Params uint32
	// Slots bounds the sum over all functions of their parameters and locals. The machine code zeroes every
	// local on entry and handles every parameter: a 16 KB module of 2,000 functions of 50,000 locals compiled
	// in a second to 766 MiB, and 200 functions of 100,000 parameters took 7 s and allocated 15 GB.
	Slots uint64
	// Merges bounds, for one function, its parameters and locals times its control instructions (br_table
	// labels, and the if of every tick package wasmstop adds, included), and TotalMerges the sum over all
	// functions. The compiler's SSA form gives a variable a value at every loop header and join a read of it
	// reaches: a 19 KB function reading 1,000 locals inside 4,990 nested loops took 7 s and 1 GB to compile,
	// and 10,000 locals over two minutes. Compile memory follows one function's figure (500,000: 116 MiB
	// allocated, TestWorstAdmittedModulesCompileInBoundedMemory), compile time the sum (8 million: 1.4 s).
	Merges, TotalMerges uint64
	// Labels bounds the labels of one function's br_tables, and TotalLabels the sum over all functions. The
	// compiler builds each label's edge on its own: a function with a br_table of 100,000 labels took 240 MB
	// to compile, one of 1 million 2.3 GB and 8–23 s. Merges count every label as a control instruction.
	Labels, TotalLabels uint64
	// Weight bounds the compile weight of one function (see weight: about 256 bytes of the compiler's memory
	// per unit), and TotalWeight the sum over all functions (the compile's time). 100,000 call_indirect in one
	// function, 500 KB of module, took 1.35 GB and 6 s to compile, and 20,000 memory.fill 16 s.
	Weight, TotalWeight uint64
	// Names bounds the function and local names of the name section, which wazero keeps with the module
	// (about 26 bytes each: a 32 MiB name section would have held 270 MB).
	Names uint64
}

// DefaultLimits leave room around the default Go plugins while keeping the cold compile of the worst module
// they admit within seconds and its memory within about 100 MiB. The default plugins: 4.5 MB, 2,560
// functions, at most 1,286 control instructions, 33 KB of code and 20 locals in one function, a cost of 24.5
// million; br_tables of at most 964 labels in one function and 96,568 in all; merges of at most 19,228 in one
// function and 1.79 million in all; a compile weight of at most 106,393 in one function and 9.0 million in
// all; 8 globals, 7 exports, 44,128 data segments and 2,545 element entries. 4,000 sequential ifs in one
// function took 1–2 s to compile, and compile time grows with the square of that number (16,000 sequential
// blocks: over ten minutes). What wazero keeps was measured at about 1.3 KB per global, 150 bytes per export,
// 85 per data segment and 100 per element entry when a module loads, and 90 bytes per global or element entry
// for every instance: a 5 MB module of a million globals held 1.3 GiB, and a 32 MiB one would need about 8 GiB.
var DefaultLimits = Limits{
	ModuleBytes:  32 << 20,
	Functions:    100_000,
	BodyBytes:    4 << 20,
	Locals:       50_000,
	Branches:     5_000,
	Cost:         64_000_000,
	Globals:      1_000,
	Exports:      10_000,
	DataSegments: 250_000,
	Params:       1_000,
	Slots:        1_000_000,
	Merges:       500_000,
	TotalMerges:  8_000_000,
	Labels:       10_000,
	TotalLabels:  400_000,
	Weight:       262_144,
	TotalWeight:  32_000_000,
	Names:        250_000,
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.ModuleBytes <= 0 {
		l.ModuleBytes = d.ModuleBytes
	}
	for _, f := range []struct{ v, d *uint32 }{
		{&l.Functions, &d.Functions}, {&l.BodyBytes, &d.BodyBytes}, {&l.Locals, &d.Locals}, {&l.Branches, &d.Branches},
		{&l.Globals, &d.Globals}, {&l.Exports, &d.Exports}, {&l.DataSegments, &d.DataSegments}, {&l.Params, &d.Params},
	} {
		if *f.v == 0 {
			*f.v = *f.d
		}
	}
	for _, f := range []struct{ v, d *uint64 }{
		{&l.Cost, &d.Cost}, {&l.Slots, &d.Slots}, {&l.Merges, &d.Merges}, {&l.TotalMerges, &d.TotalMerges},
		{&l.Labels, &d.Labels}, {&l.TotalLabels, &d.TotalLabels}, {&l.Weight, &d.Weight}, {&l.TotalWeight, &d.TotalWeight},
		{&l.Names, &d.Names},
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
	// Functions is the number of functions, imported and defined.
	Functions uint32
	// Types, ImportedFunctions, ImportedGlobals and Globals count the type section's entries, the imported
	// functions and globals, and the defined globals: where a rewrite (package wasmstop) adds its own.
	Types, ImportedFunctions, ImportedGlobals, Globals uint32
	// MaxBodyBytes, MaxLocals and MaxBranches are the largest body, locals count and number of control
	// instructions of any function.
	MaxBodyBytes, MaxLocals, MaxBranches uint32
	// Cost is the sum of the squares of each function's control instructions.
	Cost uint64
	// Weight is the compile weight of all functions (see Limits.Weight).
	Weight uint64
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
	// What names the limit: "module size", "functions", "function body size", "locals", "nesting depth".
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
		{"globals", uint64(c.mod.ImportedGlobals) + uint64(c.mod.Globals), uint64(l.Globals)},
		{"data segments", uint64(c.dataSegments), uint64(l.DataSegments)},
		{"element entries", c.elementEntries, uint64(l.Functions)},
		{"names", c.names, l.Names},
	} {
		if n.got > n.limit {
			return nil, &LimitError{What: n.what, Got: n.got, Limit: n.limit, Func: -1}
		}
	}
	c.mod.Functions, c.mod.ImportedFunctions, c.mod.Weight = c.imported+c.defined, c.imported, c.weight
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
	// exports (refused at once beyond the limit), dataSegments and elementEntries count what Check bounds once
	// it has read the whole module.
	exports, dataSegments uint32
	elementEntries        uint64
	// typeParams are each type's parameters, funcTypes each defined function's type; slots the parameters
	// and locals of the functions read so far.
	typeParams, funcTypes                []uint32
	slots, merges, labels, weight, names uint64
}

// vectorSections are the sections whose body is a vector: a count, then that many entries (type, import,
// function, table, memory, global, export, element, code, data).
var vectorSections = map[byte]bool{1: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true, 9: true, 10: true, 11: true}

// section reads the sections that matter for the limits and the exports; the compiler reads the others.
// A limit breach is returned; malformed input is left in r.err.
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
		if err := c.types(r); err != nil {
			return err
		}
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
		c.mod.Globals = r.u32()
		r.pos = len(r.b)
	case 2:
		c.imports(r)
	case 3:
		c.defined = r.u32()
		for i := uint32(0); i < c.defined && r.err == nil; i++ {
			c.funcTypes = append(c.funcTypes, r.u32())
		}
	case 7:
		n := r.u32()
		if c.exports = n; n > c.limits.Exports { // before the names are kept
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
			c.mod.ImportedGlobals++
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
		size := r.u32()
		if r.err == nil && size > c.limits.BodyBytes {
			return &LimitError{What: "function body size", Got: uint64(size), Limit: uint64(c.limits.BodyBytes), Func: int(i)}
		}
		body := r.bytes(size)
		if r.err != nil {
			return nil
		}
		if err := c.body(int(i), body); err != nil {
			return err
		}
		c.mod.MaxBodyBytes = max(c.mod.MaxBodyBytes, size)
	}
	return nil
}

// body checks one function body: its locals, then every instruction, tracking the nesting depth.
func (c *checker) body(fn int, code []byte) error {
	r := &reader{b: code}
	var locals uint64
	for groups := r.u32(); groups > 0 && r.err == nil; groups-- {
		locals += uint64(r.u32())
		r.valType()
		if locals > uint64(c.limits.Locals) {
			return &LimitError{What: "locals", Got: locals, Limit: uint64(c.limits.Locals), Func: fn}
		}
	}
	c.mod.MaxLocals = max(c.mod.MaxLocals, uint32(locals))
	var params uint64
	if fn < len(c.funcTypes) && int(c.funcTypes[fn]) < len(c.typeParams) {
		params = uint64(c.typeParams[c.funcTypes[fn]])
	}
	if c.slots += params + locals; c.slots > c.limits.Slots {
		return &LimitError{What: "parameters and locals of all functions", Got: c.slots, Limit: c.limits.Slots, Func: fn}
	}
	// The body is a block of its own; labels are its br_tables'.
	depth, branches, labels, w := 1, uint32(0), uint64(0), uint64(tickWeight) // a tick on entry, at most
	ticks := uint64(1)
	for depth > 0 && r.err == nil {
		start := r.pos
		op := r.byte()
		c.noteStateChange(op, r)
		w += weight(op, r)
		if op == 0x0e {
			peek := *r
			labels += uint64(peek.u32())
		}
		if err := skipImmediates(r, op); err != nil {
			return fmt.Errorf("function %d at offset %d: %w", fn, start, err)
		}
		switch op {
		case 0x03: // loop, and the if of the tick package wasmstop adds after it
			depth++
			ticks++
		case 0x02, 0x04: // block, if
			depth++
		case 0x0b: // end
			depth--
		}
		if op >= 0x02 && op <= 0x05 || op >= 0x0c && op <= 0x0e { // block, loop, if, else, br, br_if, br_table
			if branches++; branches > c.limits.Branches {
				return &LimitError{What: "control instructions", Got: uint64(branches), Limit: uint64(c.limits.Branches), Func: fn}
			}
		}
	}
	if r.err != nil {
		return fmt.Errorf("function %d: %w", fn, r.err)
	}
	if !r.done() {
		return fmt.Errorf("function %d: %d bytes after the end of the body", fn, len(code)-r.pos)
	}
	c.mod.MaxBranches = max(c.mod.MaxBranches, branches)
	c.mod.Cost += uint64(branches) * uint64(branches)
	if labels > c.limits.Labels {
		return &LimitError{What: "br_table labels", Got: labels, Limit: c.limits.Labels, Func: fn}
	} else if c.labels += labels; c.labels > c.limits.TotalLabels {
		return &LimitError{What: "br_table labels of all functions", Got: c.labels, Limit: c.limits.TotalLabels, Func: fn}
	}
	if w += labels * labelWeight; w > c.limits.Weight {
		return &LimitError{What: "compile weight", Got: w, Limit: c.limits.Weight, Func: fn}
	} else if c.weight += w; c.weight > c.limits.TotalWeight {
		return &LimitError{What: "compile weight of all functions", Got: c.weight, Limit: c.limits.TotalWeight, Func: fn}
	}
	if merges := (uint64(branches) + ticks + labels) * (locals + params); merges > c.limits.Merges {
		return &LimitError{What: "merges (parameters and locals times control instructions)", Got: merges, Limit: c.limits.Merges, Func: fn}
	} else if c.merges += merges; c.merges > c.limits.TotalMerges {
		return &LimitError{What: "merges of all functions (parameters and locals times control instructions)", Got: c.merges, Limit: c.limits.TotalMerges, Func: fn}
	}
	if c.mod.Cost > c.limits.Cost {
		return &LimitError{What: "compile cost (sum of squared control instructions per function)", Got: c.mod.Cost, Limit: c.limits.Cost, Func: fn}
	}
	return nil
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
