// Package wasmstop rewrites a WebAssembly module so that the host can stop its code at any moment, for the
// price of a few instructions per loop iteration.
//
// wazero's own way (WithCloseOnContextDone) makes the machine code leave to Go at every loop header to check
// whether the call was cancelled; a Go module starts every function with a loop, so that was one trip to Go
// per function call, a fifth of a plugin's render time. Instrument instead counts: every loop header, and the
// entry of every function that does not start with a loop, decrements a tick counter, and every Interval
// ticks the code calls the yield function. The host listens on that function (a wazero function listener):
// its listener runs in Go, with the call's context and the instance, and sets the instance's stop flag once
// the context has ended; the yield function then traps (unreachable). Leaving to Go every so often is also
// what lets the Go runtime stop the goroutine for a garbage collection: machine code that never leaves would
// hold up the whole process (seen: a spinning guest froze the test binary, timers and all).
//
// The module's own code cannot reach what Instrument adds: it refuses code that names a global or a function
// index the module did not have (such code was invalid, and would now name the counter, the flag or the
// yield function), and export names it reserves.
package wasmstop

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/osmhq/osm/sdk/internal/wasmcheck"
)

// The exports Instrument adds: the stop flag (a mutable i32 global, 0 until the host sets it) and the yield
// function (no parameters, no results), which resets the tick counter and traps if the flag is set.
const (
	FlagExport  = "osm.stop.flag"
	YieldExport = "osm.stop.yield"
)

// Version names this rewrite; a host that caches machine code by the original module's digest keys it with
// Version too.
const Version = "stop1"

// Interval is how many ticks (loop iterations and calls of loop-free functions) run between two calls of the
// yield function. A tight loop runs it in tens of microseconds; a call to Go costs a fraction of a
// microsecond.
const Interval = 1 << 14

// Section ids.
const (
	secCustom   = 0
	secType     = 1
	secImport   = 2
	secFunction = 3
	secGlobal   = 6
	secExport   = 7
	secStart    = 8
	secCode     = 10
)

// order is the place of each known section in a module (data count, 12, comes before code).
var order = map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6, 7: 7, 8: 8, 9: 9, 12: 10, 10: 11, 11: 12}

type section struct {
	id   byte
	body []byte
}

// module is what Instrument learns of a module before rewriting it.
type module struct {
	types, importedFuncs, importedGlobals, funcs, globals uint32
}

// Instrument returns wasm with a tick at every loop header and at the entry of every function that does not
// start with one, and the yield function (see the package documentation).
func Instrument(wasm []byte) ([]byte, error) {
	secs, err := sections(wasm)
	if err != nil {
		return nil, err
	}
	m := &module{}
	hasCode := false
	for _, s := range secs {
		if err := m.read(s); err != nil {
			return nil, fmt.Errorf("section %d: %w", s.id, err)
		}
		hasCode = hasCode || s.id == secCode
	}
	if !hasCode {
		return wasm, nil // no code of its own to stop
	}
	g := globals{ticks: m.importedGlobals + m.globals, flag: m.importedGlobals + m.globals + 1}
	yield := m.importedFuncs + m.funcs
	added := map[byte][]byte{
		secType:     appendVec(nil, []byte{0x60, 0, 0}), // func [] -> []
		secFunction: appendVec(nil, binary.AppendUvarint(nil, uint64(m.types))),
		secGlobal: appendVec(appendVec(nil, slices.Concat([]byte{0x7f, 1}, i32Const(Interval), []byte{0x0b})), // mut i32 ticks = Interval
			[]byte{0x7f, 1, 0x41, 0, 0x0b}), // mut i32 flag = 0
		secExport: appendVec(appendVec(nil, export(FlagExport, wasmcheck.KindGlobal, g.flag)),
			export(YieldExport, wasmcheck.KindFunc, yield)),
	}
	out := bytes.Clone(wasm[:8])
	for _, s := range secs {
		for _, a := range missingBefore(added, s.id) {
			out = appendSection(out, a.id, a.body)
		}
		body := s.body
		switch s.id {
		case secType, secFunction, secGlobal, secExport:
			body, err = appendEntries(body, added[s.id])
			delete(added, s.id)
		case secCode:
			body, err = m.code(body, g, yield)
		}
		if err != nil {
			return nil, fmt.Errorf("section %d: %w", s.id, err)
		}
		out = appendSection(out, s.id, body)
	}
	return out, nil
}

// missingBefore returns in order, and removes from added, the added sections the module lacks that go before a
// section with the given id: those not met yet (a section met is removed from added when it is).
func missingBefore(added map[byte][]byte, id byte) []section {
	if id == secCustom {
		return nil
	}
	var out []section
	for _, a := range []byte{secType, secFunction, secGlobal, secExport} {
		if body, ok := added[a]; ok && order[a] < order[id] {
			out = append(out, section{id: a, body: body})
			delete(added, a)
		}
	}
	return out
}

// read notes what Instrument needs of section s.
func (m *module) read(s section) error {
	r := &reader{b: s.body}
	switch s.id {
	case secType:
		m.types = r.u32()
	case secImport:
		for n := r.u32(); n > 0 && r.err == nil; n-- {
			r.skip(r.u32())
			r.skip(r.u32())
			switch kind := r.byte(); kind {
			case wasmcheck.KindFunc:
				r.u32()
				m.importedFuncs++
			case wasmcheck.KindTable:
				r.byte()
				r.limits()
			case wasmcheck.KindMemory:
				r.limits()
			case wasmcheck.KindGlobal:
				r.byte()
				r.byte()
				m.importedGlobals++
			default:
				return fmt.Errorf("import of unknown kind %#x", kind)
			}
		}
	case secFunction:
		m.funcs = r.u32()
	case secGlobal:
		m.globals = r.u32()
	case secExport:
		for n := r.u32(); n > 0 && r.err == nil; n-- {
			name := string(r.bytes(r.u32()))
			r.byte()
			r.u32()
			if name == FlagExport || name == YieldExport {
				return fmt.Errorf("export name %q is reserved", name)
			}
		}
	}
	return r.err
}

// globals are the indices of the globals Instrument adds.
type globals struct{ ticks, flag uint32 }

// code rewrites the code section: a tick after every loop instruction and at the entry of every function that
// does not start with one, and the yield function's body at the end.
func (m *module) code(body []byte, g globals, yield uint32) ([]byte, error) {
	r := &reader{b: body}
	n := r.u32()
	if r.err != nil || n != m.funcs {
		return nil, fmt.Errorf("%d bodies for %d functions", n, m.funcs)
	}
	// ticks -= 1; if ticks == 0 { yield() }
	tick := slices.Concat(get(g.ticks), []byte{0x41, 1, 0x6b}, set(g.ticks), get(g.ticks), []byte{0x45, 0x04, 0x40, 0x10})
	tick = append(binary.AppendUvarint(tick, uint64(yield)), 0x0b)
	out := binary.AppendUvarint(make([]byte, 0, len(body)+len(body)/8), uint64(n)+1)
	var fn []byte
	for i := range n {
		code := r.bytes(r.u32())
		if r.err != nil {
			return nil, r.err
		}
		fn = fn[:0]
		codeAt, startsWithLoop := 0, false
		_, err := wasmcheck.Instructions(code, func(in wasmcheck.Instruction) error {
			if codeAt == 0 {
				codeAt, startsWithLoop = in.At, in.Op == 0x03
				fn = append(fn, code[:in.At]...) // the locals
			}
			switch {
			case (in.Op == 0x23 || in.Op == 0x24) && in.Index >= g.ticks:
				return fmt.Errorf("global %d does not exist", in.Index)
			case (in.Op == 0x10 || in.Op == 0xd2) && in.Index >= yield:
				return fmt.Errorf("function %d does not exist", in.Index)
			}
			fn = append(fn, code[in.At:in.Next]...)
			if in.Op == 0x03 { // loop
				fn = append(fn, tick...)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("function %d: %w", i, err)
		}
		if !startsWithLoop {
			// A function that does not start with a loop (one whose loop never runs, say) ticks on entry, so
			// that calls, recursive ones included, tick as loops do.
			fn = slices.Insert(fn, codeAt, tick...)
		}
		out = binary.AppendUvarint(out, uint64(len(fn)))
		out = append(out, fn...)
	}
	if !r.done() {
		return nil, errors.New("trailing bytes")
	}
	// The yield function: ticks = Interval; if flag { unreachable }
	y := slices.Concat([]byte{0}, i32Const(Interval), set(g.ticks), get(g.flag), []byte{0x04, 0x40, 0x00, 0x0b, 0x0b})
	out = binary.AppendUvarint(out, uint64(len(y)))
	return append(out, y...), nil
}

func get(global uint32) []byte { return binary.AppendUvarint([]byte{0x23}, uint64(global)) }
func set(global uint32) []byte { return binary.AppendUvarint([]byte{0x24}, uint64(global)) }

// i32Const is i32.const v, for 0 <= v < 1<<20.
func i32Const(v int32) []byte {
	out := []byte{0x41}
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if v == 0 && b&0x40 == 0 {
			return append(out, b)
		}
		out = append(out, b|0x80)
	}
}

func export(name string, kind byte, index uint32) []byte {
	b := binary.AppendUvarint(nil, uint64(len(name)))
	b = append(b, name...)
	b = append(b, kind)
	return binary.AppendUvarint(b, uint64(index))
}

// appendVec returns the vector body with one more entry: a count of 1 when body is empty.
func appendVec(body, entry []byte) []byte {
	if len(body) == 0 {
		return append([]byte{1}, entry...)
	}
	n, k := binary.Uvarint(body)
	return append(binary.AppendUvarint(nil, n+1), slices.Concat(body[k:], entry)...)
}

// appendEntries appends the entries of vector added (its count, then its entries) to vector body.
func appendEntries(body, added []byte) ([]byte, error) {
	n, k := binary.Uvarint(body)
	a, ka := binary.Uvarint(added)
	if k <= 0 || ka <= 0 {
		return nil, errors.New("bad vector length")
	}
	out := binary.AppendUvarint(make([]byte, 0, len(body)+len(added)), n+a)
	out = append(out, body[k:]...)
	return append(out, added[ka:]...), nil
}

func sections(wasm []byte) ([]section, error) {
	if len(wasm) < 8 || !bytes.Equal(wasm[:8], []byte{0, 'a', 's', 'm', 1, 0, 0, 0}) {
		return nil, errors.New("not a WebAssembly 1.0 binary module")
	}
	var secs []section
	for pos := 8; pos < len(wasm); {
		id := wasm[pos]
		size, n := binary.Uvarint(wasm[pos+1:])
		if n <= 0 || size > uint64(len(wasm)-pos-1-n) {
			return nil, fmt.Errorf("section %d at offset %d: bad size", id, pos)
		}
		start := pos + 1 + n
		secs = append(secs, section{id: id, body: wasm[start : start+int(size)]})
		pos = start + int(size)
	}
	return secs, nil
}

func appendSection(out []byte, id byte, body []byte) []byte {
	out = append(out, id)
	out = binary.AppendUvarint(out, uint64(len(body)))
	return append(out, body...)
}

// reader decodes the sections Instrument reads; the first error sticks.
type reader struct {
	b   []byte
	pos int
	err error
}

var errEnd = errors.New("unexpected end")

func (r *reader) done() bool { return r.err != nil || r.pos >= len(r.b) }

func (r *reader) u32() uint32 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.pos:])
	if n <= 0 || v > 1<<32-1 {
		r.err = fmt.Errorf("bad number at offset %d", r.pos)
		return 0
	}
	r.pos += n
	return uint32(v)
}

func (r *reader) byte() byte {
	b := r.bytes(1)
	if b == nil {
		return 0
	}
	return b[0]
}

func (r *reader) bytes(n uint32) []byte {
	if r.err == nil && uint64(n) > uint64(len(r.b)-r.pos) {
		r.err = errEnd
	}
	if r.err != nil {
		return nil
	}
	r.pos += int(n)
	return r.b[r.pos-int(n) : r.pos]
}

func (r *reader) skip(n uint32) { r.bytes(n) }

// limits reads a table's or a memory's limits: a flag, the minimum, and the maximum when the flag says so.
func (r *reader) limits() {
	if flag := r.byte(); flag&1 != 0 {
		r.u32()
	}
	r.u32()
}
