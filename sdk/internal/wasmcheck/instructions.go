package wasmcheck

import "fmt"

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
	immRefNull // a heap type
	immMisc    // the 0xfc prefix
)

// immediates is the immediate kind of every one-byte opcode the decoder knows: the MVP, sign extension,
// multiple values and reference types (0xfc is a prefix). Anything else is immInvalid.
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
	set(immBlock, 0x02, 0x03, 0x04)
	set(immU32, 0x0c, 0x0d, 0x10, 0x3f, 0x40, 0xd2)
	for op := 0x20; op <= 0x26; op++ {
		t[op] = immU32 // local.*, global.*, table.get/set
	}
	set(immU32x2, 0x11)
	for op := 0x28; op <= 0x3e; op++ {
		t[op] = immU32x2
	}
	set(immBrTable, 0x0e)
	set(immSelect, 0x1c)
	set(immS32, 0x41)
	set(immS64, 0x42)
	set(immF32, 0x43)
	set(immF64, 0x44)
	set(immRefNull, 0xd0)
	set(immMisc, 0xfc)
	return t
}()

// skipImmediates reads the immediates of the instruction op. Counts of labels and types are checked against the
// bytes left (each takes at least one), so a huge count fails at once instead of looping.
func skipImmediates(r *reader, op byte) error {
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
		n := r.u32()
		if uint64(n) > uint64(len(r.b)-r.pos) {
			r.fail("br_table with %d labels in %d remaining bytes", n, len(r.b)-r.pos)
			return r.err
		}
		for ; n > 0 && r.err == nil; n-- {
			r.u32()
		}
		r.u32()
	case immSelect:
		n := r.u32()
		if uint64(n) > uint64(len(r.b)-r.pos) {
			r.fail("select with %d types in %d remaining bytes", n, len(r.b)-r.pos)
			return r.err
		}
		for ; n > 0 && r.err == nil; n-- {
			r.valType()
		}
	case immS32:
		r.sleb(32)
	case immS64:
		r.sleb(64)
	case immF32:
		r.bytes(4)
	case immF64:
		r.bytes(8)
	case immRefNull:
		if t := r.byte(); r.err == nil && t != funcRef && t != externRef {
			r.fail("ref.null of unsupported type %#x", t)
		}
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
		if r.err != nil {
			return r.err
		}
		return fmt.Errorf("unsupported instruction %#x", op)
	}
	return r.err
}
