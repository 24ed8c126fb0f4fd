// Package wasmsnap rewrites a WebAssembly module so that its instances start in a state captured from an
// instance that already ran its initialisation.
//
// A Go plugin's instance spends most of its life starting up: wazero applies ~44,000 data segments and the Go
// runtime initialises itself (schedulers, heap, package variables), then encoding/json builds its per-type
// encoders on the first render. The host runs every MachineDeployment on a fresh instance, so it paid that
// start-up every time. Probe adds exports that let the host read every global after initialisation; Build
// turns the globals' values and the linear memory into the module's initial state (global initialisers, data
// segments, memory size) and removes _initialize, so a new instance is the initialised one, pristine, for the
// price of copying its memory image.
//
// Both rewrites drop custom sections (names, producers, signatures): they do not change what a module does, and
// modules that differ only in them — the same code packaged or annotated differently — then compile to the same
// machine code, which wazero's cache shares.
//
// The rewrite is sound only for modules whose state after initialisation is entirely their globals and their
// memory: no imported memory, table or global, no start function, no passive data, no table mutation (package
// wasmcheck reports those as Module.Unsnapshottable) and only number-typed globals (Build refuses others).
package wasmsnap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/osmhq/osm/sdk/internal/wasmcheck"
)

// Section ids.
const (
	secCustom = 0
	secMemory = 5
	secGlobal = 6
	secExport = 7
	secStart  = 8
	secData   = 11
	secCount  = 12
)

// Value types of globals.
const (
	typeI32 = 0x7f
	typeI64 = 0x7e
	typeF32 = 0x7d
	typeF64 = 0x7c
)

// pageSize is WebAssembly's page.
const pageSize = 65536

// GlobalExport is the export name under which Probe exposes the defined global with index i.
func GlobalExport(i int) string { return "osm.snapshot.global." + strconv.Itoa(i) }

// Initialize is the export a reactor module initialises itself with; Build removes it.
const Initialize = "_initialize"

// Image is the state of an initialised instance.
type Image struct {
	// Globals holds the raw bits of each defined global, as wazero's api.Global.Get returns them.
	Globals []uint64
	// Memory is the whole linear memory; its length is a multiple of the page size.
	Memory []byte
}

// Probe returns wasm with each of its n defined globals also exported as GlobalExport(i), so that the host can
// read their values once the instance has initialised. The rest of the module is unchanged but for its custom
// sections, which are dropped.
func Probe(wasm []byte) (probe []byte, globals int, err error) {
	secs, err := wasmcheck.Sections(wasm)
	if err != nil {
		return nil, 0, err
	}
	for _, s := range secs {
		if s.ID == secGlobal {
			if globals, err = count(s.Body); err != nil {
				return nil, 0, fmt.Errorf("global section: %w", err)
			}
		}
	}
	out := make([]byte, 0, len(wasm)+globals*32+16)
	out = append(out, wasm[:8]...)
	exported := false
	for _, s := range secs {
		if s.ID == secCustom {
			continue
		}
		body := s.Body
		if s.ID == secExport {
			if body, err = appendGlobalExports(body, globals); err != nil {
				return nil, 0, fmt.Errorf("export section: %w", err)
			}
			exported = true
		}
		if s.ID >= secStart && !exported {
			// A module without exports gets the section where the order of sections puts it.
			out = wasmcheck.AppendSection(out, secExport, mustGlobalExports(globals))
			exported = true
		}
		out = wasmcheck.AppendSection(out, s.ID, body)
	}
	if !exported {
		out = wasmcheck.AppendSection(out, secExport, mustGlobalExports(globals))
	}
	return out, globals, nil
}

// Build returns wasm rewritten so that its instances start in img's state: every defined global initialised
// to its value in img, the memory's minimum size raised to img's, data segments holding img's non-zero bytes,
// no _initialize export. wasm is the original module, not the probe.
func Build(wasm []byte, img Image) ([]byte, error) {
	if len(img.Memory)%pageSize != 0 {
		return nil, fmt.Errorf("memory image of %d bytes is not a whole number of pages", len(img.Memory))
	}
	secs, err := wasmcheck.Sections(wasm)
	if err != nil {
		return nil, err
	}
	data := dataSegments(img.Memory)
	out := make([]byte, 0, len(wasm)+len(data)+64)
	out = append(out, wasm[:8]...)
	wroteData := false
	for _, s := range secs {
		body := s.Body
		switch s.ID {
		case secCustom:
			continue
		case secStart, secCount:
			return nil, fmt.Errorf("section %d cannot be rebuilt from a snapshot", s.ID)
		case secMemory:
			body, err = memoryWithMinimum(body, uint64(len(img.Memory)/pageSize))
		case secGlobal:
			body, err = globalsWithValues(body, img.Globals)
		case secExport:
			body, err = exportsWithout(body, Initialize)
		case secData:
			body, wroteData = data, true
		}
		if err != nil {
			return nil, fmt.Errorf("section %d: %w", s.ID, err)
		}
		out = wasmcheck.AppendSection(out, s.ID, body)
	}
	if !wroteData {
		// The data section follows every other known section, so the end of the module is its place.
		out = wasmcheck.AppendSection(out, secData, data)
	}
	return out, nil
}

// body reads a section body.
type body struct {
	b   []byte
	pos int
	err error
}

func (r *body) u32() uint32 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.pos:])
	if n <= 0 || v > math.MaxUint32 {
		r.err = fmt.Errorf("bad number at offset %d", r.pos)
		return 0
	}
	r.pos += n
	return uint32(v)
}

func (r *body) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.pos >= len(r.b) {
		r.err = errors.New("unexpected end")
		return 0
	}
	r.pos++
	return r.b[r.pos-1]
}

func (r *body) skip(n uint32) {
	if r.err == nil && uint64(n) > uint64(len(r.b)-r.pos) {
		r.err = errors.New("unexpected end")
	}
	if r.err == nil {
		r.pos += int(n)
	}
}

func count(b []byte) (int, error) {
	r := &body{b: b}
	n := r.u32()
	return int(n), r.err
}

func mustGlobalExports(n int) []byte {
	b, _ := appendGlobalExports([]byte{0}, n)
	return b
}

// appendGlobalExports adds GlobalExport(i) for the n globals to an export section body.
func appendGlobalExports(b []byte, n int) ([]byte, error) {
	r := &body{b: b}
	existing := r.u32()
	if r.err != nil {
		return nil, r.err
	}
	out := binary.AppendUvarint(nil, uint64(existing)+uint64(n))
	out = append(out, b[r.pos:]...)
	for i := range n {
		name := GlobalExport(i)
		out = binary.AppendUvarint(out, uint64(len(name)))
		out = append(out, name...)
		out = append(out, 3) // global
		out = binary.AppendUvarint(out, uint64(i))
	}
	return out, nil
}

// exportsWithout removes the export called name.
func exportsWithout(b []byte, name string) ([]byte, error) {
	r := &body{b: b}
	n := r.u32()
	var kept [][]byte
	for i := uint32(0); i < n && r.err == nil; i++ {
		start := r.pos
		l := r.u32()
		r.skip(l)
		exported := r.err == nil && string(r.b[r.pos-int(l):r.pos]) == name
		r.byte()
		r.u32()
		if !exported {
			kept = append(kept, r.b[start:r.pos])
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	out := binary.AppendUvarint(nil, uint64(len(kept)))
	for _, e := range kept {
		out = append(out, e...)
	}
	return out, nil
}

// memoryWithMinimum raises the minimum size of the module's memory.
func memoryWithMinimum(b []byte, pages uint64) ([]byte, error) {
	r := &body{b: b}
	if n := r.u32(); r.err == nil && n != 1 {
		return nil, fmt.Errorf("%d memories", n)
	}
	flags := r.byte()
	r.u32() // the old minimum
	out := []byte{1, flags}
	out = binary.AppendUvarint(out, pages)
	switch flags {
	case 0:
	case 1:
		maxPages := r.u32()
		if r.err == nil && uint64(maxPages) < pages {
			return nil, fmt.Errorf("memory image of %d pages exceeds the maximum of %d", pages, maxPages)
		}
		out = binary.AppendUvarint(out, uint64(maxPages))
	default:
		return nil, fmt.Errorf("memory with flags %#x", flags)
	}
	return out, r.err
}

// globalsWithValues replaces each global's initialiser with a constant of its value in the image.
func globalsWithValues(b []byte, values []uint64) ([]byte, error) {
	r := &body{b: b}
	n := r.u32()
	if r.err == nil && int(n) != len(values) {
		return nil, fmt.Errorf("%d globals, %d values", n, len(values))
	}
	out := binary.AppendUvarint(nil, uint64(n))
	for i := 0; i < int(n) && r.err == nil; i++ {
		typ, mut := r.byte(), r.byte()
		skipConstExpr(r)
		out = append(out, typ, mut)
		v := values[i]
		switch typ {
		case typeI32:
			out = appendSleb(append(out, 0x41), int64(int32(uint32(v))))
		case typeI64:
			out = appendSleb(append(out, 0x42), int64(v))
		case typeF32:
			out = binary.LittleEndian.AppendUint32(append(out, 0x43), uint32(v))
		case typeF64:
			out = binary.LittleEndian.AppendUint64(append(out, 0x44), v)
		default:
			return nil, fmt.Errorf("global %d has type %#x, which a snapshot cannot hold", i, typ)
		}
		out = append(out, 0x0b)
	}
	return out, r.err
}

// skipConstExpr reads a constant expression up to its end.
func skipConstExpr(r *body) {
	for r.err == nil {
		switch op := r.byte(); op {
		case 0x0b:
			return
		case 0x41, 0x42, 0x23, 0xd2: // i32.const, i64.const, global.get, ref.func: one LEB128 number
			for r.err == nil && r.byte()&0x80 != 0 {
			}
		case 0x43:
			r.skip(4)
		case 0x44:
			r.skip(8)
		case 0xd0:
			r.byte()
		default:
			r.err = fmt.Errorf("instruction %#x in a constant expression", op)
		}
	}
}

func appendSleb(out []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(out, c)
		}
		out = append(out, c|0x80)
	}
}

// gapToMerge is the longest run of zeros kept inside a data segment: wazero evaluates each segment's offset
// and copies it separately, so a copy of a few zeros is cheaper than another segment.
const gapToMerge = 512

// dataSegments returns a data section whose active segments hold the non-zero bytes of mem.
func dataSegments(mem []byte) []byte {
	type run struct{ start, end int }
	var runs []run
	for i := 0; i < len(mem); {
		for i < len(mem) && mem[i] == 0 {
			i++
		}
		if i == len(mem) {
			break
		}
		start := i
		for i < len(mem) && mem[i] != 0 {
			i++
		}
		if n := len(runs); n > 0 && start-runs[n-1].end <= gapToMerge {
			runs[n-1].end = i
		} else {
			runs = append(runs, run{start, i})
		}
	}
	size := binary.MaxVarintLen64
	for _, s := range runs {
		size += 16 + s.end - s.start
	}
	out := binary.AppendUvarint(make([]byte, 0, size), uint64(len(runs)))
	for _, s := range runs {
		out = append(out, 0, 0x41) // active, memory 0, i32.const
		out = appendSleb(out, int64(int32(uint32(s.start))))
		out = append(out, 0x0b)
		out = binary.AppendUvarint(out, uint64(s.end-s.start))
		out = append(out, mem[s.start:s.end]...)
	}
	return out
}
