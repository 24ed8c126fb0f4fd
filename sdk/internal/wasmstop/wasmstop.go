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
	"math"
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

// Interval is how many ticks (loop iterations, calls of functions that do not start with a loop) run between
// two calls of the yield function. A tight loop runs them in tens of microseconds; a call to Go costs a
// fraction of a microsecond.
const Interval = 1 << 14

// Section ids.
const (
	secCustom   = 0
	secType     = 1
	secFunction = 3
	secGlobal   = 6
	secExport   = 7
	secCode     = 10
)

// order is the place of each known section in a module (data count, 12, comes before code).
var order = map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6, 7: 7, 8: 8, 9: 9, 12: 10, 10: 11, 11: 12}

// unlimited lets wasmcheck read any module: the limits are the caller's business, checked before.
var unlimited = wasmcheck.Limits{ModuleBytes: math.MaxInt, Functions: math.MaxUint32, BodyBytes: math.MaxUint32,
	Locals: math.MaxUint32, Branches: math.MaxUint32, Cost: math.MaxUint64, Globals: math.MaxUint32, Exports: math.MaxUint32,
	DataSegments: math.MaxUint32, Params: math.MaxUint32, Slots: math.MaxUint64, Merges: math.MaxUint64, TotalMerges: math.MaxUint64,
	Labels: math.MaxUint64, TotalLabels: math.MaxUint64, Weight: math.MaxUint64, TotalWeight: math.MaxUint64, Names: math.MaxUint64}

// Instrument returns wasm with a tick at every loop header and at the entry of every function that does not
// start with one, and the yield function (see the package documentation).
func Instrument(wasm []byte) ([]byte, error) {
	m, err := wasmcheck.Check(wasm, unlimited)
	if err != nil {
		return nil, err
	}
	for _, name := range []string{FlagExport, YieldExport} {
		if _, ok := m.Exports[name]; ok {
			return nil, fmt.Errorf("export name %q is reserved", name)
		}
	}
	secs, err := wasmcheck.Sections(wasm)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(secs, func(s wasmcheck.Section) bool { return s.ID == secCode }) {
		return wasm, nil // no code of its own to stop
	}
	g := globals{ticks: m.ImportedGlobals + m.Globals, flag: m.ImportedGlobals + m.Globals + 1}
	yield := m.Functions
	added := map[byte][]byte{
		secType:     appendVec(nil, []byte{0x60, 0, 0}), // func [] -> []
		secFunction: appendVec(nil, binary.AppendUvarint(nil, uint64(m.Types))),
		secGlobal: appendVec(appendVec(nil, slices.Concat([]byte{0x7f, 1}, i32Const(Interval), []byte{0x0b})), // mut i32 ticks = Interval
			[]byte{0x7f, 1, 0x41, 0, 0x0b}), // mut i32 flag = 0
		secExport: appendVec(appendVec(nil, export(FlagExport, wasmcheck.KindGlobal, g.flag)),
			export(YieldExport, wasmcheck.KindFunc, yield)),
	}
	out := bytes.Clone(wasm[:8])
	for _, s := range secs {
		for _, a := range missingBefore(added, s.ID) {
			out = wasmcheck.AppendSection(out, a.ID, a.Body)
		}
		body := s.Body
		switch s.ID {
		case secType, secFunction, secGlobal, secExport:
			body, err = appendEntries(body, added[s.ID])
			delete(added, s.ID)
		case secCode:
			body, err = code(body, g, yield)
		}
		if err != nil {
			return nil, fmt.Errorf("section %d: %w", s.ID, err)
		}
		out = wasmcheck.AppendSection(out, s.ID, body)
	}
	return out, nil
}

// missingBefore returns in order, and removes from added, the added sections the module lacks that go before a
// section with the given id: those not met yet (a section met is removed from added when it is).
func missingBefore(added map[byte][]byte, id byte) []wasmcheck.Section {
	if id == secCustom {
		return nil
	}
	var out []wasmcheck.Section
	for _, a := range []byte{secType, secFunction, secGlobal, secExport} {
		if body, ok := added[a]; ok && order[a] < order[id] {
			out = append(out, wasmcheck.Section{ID: a, Body: body})
			delete(added, a)
		}
	}
	return out
}

// globals are the indices of the globals Instrument adds.
type globals struct{ ticks, flag uint32 }

// code rewrites the code section: a tick after every loop instruction and at the entry of every function that
// does not start with one, and the yield function's body at the end.
func code(body []byte, g globals, yield uint32) ([]byte, error) {
	n, k := binary.Uvarint(body)
	if k <= 0 {
		return nil, errors.New("bad body count")
	}
	body = body[k:]
	// ticks -= 1; if ticks == 0 { yield() }
	tick := slices.Concat(get(g.ticks), []byte{0x41, 1, 0x6b}, set(g.ticks), get(g.ticks), []byte{0x45, 0x04, 0x40, 0x10})
	tick = append(binary.AppendUvarint(tick, uint64(yield)), 0x0b)
	out := binary.AppendUvarint(make([]byte, 0, len(body)+len(body)/8), n+1)
	var fn []byte
	for i := range n {
		size, k := binary.Uvarint(body)
		if k <= 0 || size > uint64(len(body)-k) {
			return nil, fmt.Errorf("function %d: bad body size", i)
		}
		code := body[k : k+int(size)]
		body = body[k+int(size):]
		// The body is copied in runs, up to and including each loop instruction, followed by a tick.
		fn = fn[:0]
		codeAt, copied := 0, 0
		_, err := wasmcheck.Instructions(code, func(in wasmcheck.Instruction) error {
			if codeAt == 0 {
				codeAt = in.At
				if in.Op != 0x03 {
					// A function that does not start with a loop (one whose loop never runs, say) ticks on
					// entry, so that calls, recursive ones included, tick as loops do.
					fn = append(append(fn, code[:in.At]...), tick...)
					copied = in.At
				}
			}
			switch {
			case (in.Op == 0x23 || in.Op == 0x24) && in.Index >= g.ticks:
				return fmt.Errorf("global %d does not exist", in.Index)
			case (in.Op == 0x10 || in.Op == 0xd2) && in.Index >= yield:
				return fmt.Errorf("function %d does not exist", in.Index)
			case in.Op == 0x03: // loop
				fn = append(append(fn, code[copied:in.Next]...), tick...)
				copied = in.Next
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("function %d: %w", i, err)
		}
		fn = append(fn, code[copied:]...)
		out = binary.AppendUvarint(out, uint64(len(fn)))
		out = append(out, fn...)
	}
	if len(body) > 0 {
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
