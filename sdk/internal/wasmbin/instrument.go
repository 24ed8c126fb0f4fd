package wasmbin

import (
	"errors"
	"fmt"
)

// Version changes whenever Instrument's output for a given module does, so that caches of compiled code can tell.
const Version = "1"

// Instrument returns wasm with a fuel check at the entry of every function and at the head of every loop.
// The fuel is a new mutable i32 global, starting at fuel; a check decrements it and, when it reaches zero, sets
// it back to fuel and calls the imported function hookModule.hookName, which must have the type [] -> [i32]
// (its result is dropped): the hook runs once every fuel checks. The module's own code cannot read or write the new global: it did not exist when that
// code was written. Instrument fails on modules it cannot fully decode; the caller then runs wasm unchanged.
func Instrument(wasm []byte, hookModule, hookName string, fuel int32) ([]byte, error) {
	if fuel <= 0 {
		return nil, errors.New("fuel must be positive")
	}
	p, err := parse(wasm)
	if err != nil {
		return nil, err
	}
	hook, ok := uint32(0), false
	for _, imp := range p.imports {
		if imp.kind != KindFunc {
			continue
		}
		if imp.module == hookModule && imp.name == hookName {
			if t := p.funcType(imp.typeIdx, KindFunc); !t.Equal(nil, []ValType{I32}) {
				return nil, fmt.Errorf("%s.%s has type %v, want [] -> [i32]", hookModule, hookName, t)
			}
			ok = true
			break
		}
		hook++
	}
	if !ok {
		return nil, fmt.Errorf("module does not import %s.%s", hookModule, hookName)
	}
	global := p.importedGlobs + p.definedGlobs
	check := fuelCheck(global, hook, fuel)
	newGlobal := append([]byte{byte(I32), 0x01, 0x41}, appendS32(nil, fuel)...) // mut i32 = i32.const fuel
	newGlobal = append(newGlobal, 0x0b)

	out := append(make([]byte, 0, len(wasm)+len(wasm)/8), header...)
	addedGlobal, sawCode := false, false
	for _, s := range p.sections {
		body := s.body
		switch s.id {
		case 6:
			r := &reader{b: body}
			n := r.u32()
			if r.err != nil {
				return nil, r.err
			}
			body = appendU32(nil, n+1)
			body = append(body, s.body[r.pos:]...)
			body = append(body, newGlobal...)
			addedGlobal = true
		case 10:
			if body, err = instrumentCode(body, check); err != nil {
				return nil, fmt.Errorf("code section: %w", err)
			}
			sawCode = true
		case 0:
			// Custom sections are copied, except DWARF, whose code offsets the checks would make wrong.
			r := &reader{b: body}
			if name := r.name(); r.err == nil && len(name) > 7 && name[:7] == ".debug_" {
				continue
			}
		}
		if !addedGlobal && !p.hasGlobalSec && s.id != 0 && order(s.id) > order(6) {
			out = appendSection(out, 6, append([]byte{1}, newGlobal...))
			addedGlobal = true
		}
		out = appendSection(out, s.id, body)
	}
	if !addedGlobal {
		out = appendSection(out, 6, append([]byte{1}, newGlobal...))
	}
	if !sawCode && len(p.funcTypes) > 0 {
		return nil, errors.New("module declares functions but has no code section")
	}
	return out, nil
}

// order is a known section's position in a module (custom sections aside).
func order(id byte) int {
	// type, import, function, table, memory, tag, global, export, start, element, data count, code, data
	for i, s := range []byte{1, 2, 3, 4, 5, 13, 6, 7, 8, 9, 12, 10, 11} {
		if s == id {
			return i
		}
	}
	return -1
}

func appendSection(out []byte, id byte, body []byte) []byte {
	out = append(out, id)
	out = appendU32(out, uint32(len(body)))
	return append(out, body...)
}

// fuelCheck is the instruction sequence of a check, which calls the hook every fuel checks:
//
//	global.get $fuel
//	i32.const -1
//	i32.add
//	global.set $fuel
//	global.get $fuel
//	i32.eqz
//	if
//	  i32.const <fuel>
//	  global.set $fuel
//	  call $hook
//	  drop
//	end
func fuelCheck(global, hook uint32, fuel int32) []byte {
	g := appendU32(nil, global)
	b := append([]byte{0x23}, g...)
	b = append(b, 0x41, 0x7f, 0x6a, 0x24)
	b = append(b, g...)
	b = append(b, 0x23)
	b = append(b, g...)
	b = append(b, 0x45, 0x04, 0x40, 0x41)
	b = appendS32(b, fuel)
	b = append(b, 0x24)
	b = append(b, g...)
	b = append(b, 0x10)
	b = appendU32(b, hook)
	return append(b, 0x1a, 0x0b)
}

func instrumentCode(sec []byte, check []byte) ([]byte, error) {
	r := &reader{b: sec}
	n := r.u32()
	out := appendU32(make([]byte, 0, len(sec)+len(sec)/8), n)
	var body []byte
	for i := uint32(0); i < n && r.err == nil; i++ {
		size := r.u32()
		code := r.bytes(int(size))
		if r.err != nil {
			break
		}
		var err error
		if body, err = instrumentBody(body[:0], code, check); err != nil {
			return nil, fmt.Errorf("function body %d: %w", i, err)
		}
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	if r.err == nil && !r.done() {
		r.err = errors.New("trailing bytes")
	}
	return out, r.err
}

// instrumentBody copies one function body, adding the check after every loop's block type and at the entry,
// unless every entry reaches a loop's check before it can call or branch anywhere (as every Go function does:
// its body is a loop that dispatches on the resume point).
func instrumentBody(out, code, check []byte) ([]byte, error) {
	r := &reader{b: code}
	groups := r.u32()
	for i := uint32(0); i < groups && r.err == nil; i++ {
		r.u32()
		switch t := ValType(r.byte()); t {
		case I32, I64, F32, F64, V128, FuncRef, ExternRef:
		default:
			if r.err == nil {
				return nil, fmt.Errorf("unsupported local type %#x", byte(t))
			}
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	out = append(out, code[:r.pos]...)
	if !loopFirst(code, r.pos) {
		out = append(out, check...)
	}
	copied := r.pos // code before this is in out
	depth := 1      // the function body's own block
	for depth > 0 {
		start := r.pos
		if start >= len(code) {
			return nil, errors.New("unexpected end of the body")
		}
		op := code[start]
		r.pos++
		// The common cases inline: no immediate, or a one-byte index.
		switch kind := immediates[op]; {
		case kind == immNone:
		case kind == immU32 && r.pos < len(code) && code[r.pos] < 0x80:
			r.pos++
		default:
			if err := skipImmediates(r, op); err != nil {
				return nil, fmt.Errorf("%w at offset %d", err, start)
			}
		}
		switch op {
		case 0x02, 0x04: // block, if
			depth++
		case 0x03: // loop
			depth++
			out = append(out, code[copied:r.pos]...)
			out = append(out, check...)
			copied = r.pos
		case 0x0b: // end
			depth--
		}
	}
	if r.pos != len(code) {
		return nil, fmt.Errorf("%d bytes after the end of the body", len(code)-r.pos)
	}
	return append(out, code[copied:]...), nil
}

// loopFirst reports whether the code from pos reaches a loop through straight-line instructions only: blocks,
// locals, globals and constants, which neither call nor branch.
func loopFirst(code []byte, pos int) bool {
	r := &reader{b: code, pos: pos}
	for {
		op := r.byte()
		if skipImmediates(r, op) != nil {
			return false
		}
		switch {
		case op == 0x03:
			return true
		case op == 0x01, op == 0x02, op >= 0x20 && op <= 0x24, op >= 0x41 && op <= 0x44:
		default:
			return false
		}
	}
}

// Immediate kinds of one-byte opcodes.
const (
	immInvalid byte = iota
	immNone
	immU32     // an index or a label
	immU32x2   // call_indirect, loads and stores (align, offset)
	immBlock   // a block type
	immBrTable // a label vector and a default label
	immSelect  // select t*
	immS32
	immS64
	immF32
	immF64
	immMisc // the 0xfc prefix
)

// immediates is the immediate kind of every one-byte opcode the decoder knows: the MVP, sign extension,
// reference types and tail calls (0xfc is a prefix).
var immediates = func() (t [256]byte) {
	set := func(kind byte, ops ...byte) {
		for _, op := range ops {
			t[op] = kind
		}
	}
	set(immNone, 0x00, 0x01, 0x05, 0x0b, 0x0f, 0x1a, 0x1b, 0xd1)
	for op := 0x45; op <= 0xc4; op++ {
		t[op] = immNone
	}
	set(immBlock, 0x02, 0x03, 0x04, 0xd0) // block, loop, if; ref.null's heap type has the same encoding
	set(immU32, 0x0c, 0x0d, 0x10, 0x12, 0x3f, 0x40, 0xd2)
	for op := 0x20; op <= 0x26; op++ {
		t[op] = immU32 // local.*, global.*, table.get/set
	}
	set(immU32x2, 0x11, 0x13)
	for op := 0x28; op <= 0x3e; op++ {
		t[op] = immU32x2
	}
	set(immBrTable, 0x0e)
	set(immSelect, 0x1c)
	set(immS32, 0x41)
	set(immS64, 0x42)
	set(immF32, 0x43)
	set(immF64, 0x44)
	set(immMisc, 0xfc)
	return t
}()

// skipImmediates reads the immediates of the instruction op.
func skipImmediates(r *reader, op byte) error {
	if r.err != nil {
		return r.err
	}
	switch immediates[op] {
	case immNone:
	case immU32:
		r.u32()
	case immU32x2:
		r.u32()
		r.u32()
	case immBlock:
		r.sleb(33)
	case immBrTable:
		for n := r.u32(); n > 0 && r.err == nil; n-- {
			r.u32()
		}
		r.u32()
	case immSelect:
		r.valTypes()
	case immS32:
		r.sleb(32)
	case immS64:
		r.sleb(64)
	case immF32:
		r.bytes(4)
	case immF64:
		r.bytes(8)
	case immMisc:
		switch sub := r.u32(); {
		case r.err != nil:
		case sub <= 7: // saturating truncations
		case sub == 8, sub == 10, sub == 12, sub == 14: // memory.init, memory.copy, table.init, table.copy
			r.u32()
			r.u32()
		case sub == 9, sub == 11, sub == 13, sub >= 15 && sub <= 17: // data.drop, memory.fill, elem.drop, table.grow/size/fill
			r.u32()
		default:
			return fmt.Errorf("unsupported instruction 0xfc %d", sub)
		}
	default:
		return fmt.Errorf("unsupported instruction %#x", op)
	}
	return r.err
}
