package wasmcheck

// weight is what an instruction costs wazero's compiler, in units of about 256 bytes of allocation or 0.2–0.5
// µs, measured by class with 10,000 of one instruction in a function (what an instruction that can trap costs
// is mostly its trap's exit path); the bulk operations weigh what they cost in time. The compiler keeps what
// one function needs until that function is done, so the weight of a function bounds the compile's memory
// (Limits.Weight); the weight of a module bounds its compile time (Limits.TotalWeight). r is positioned
// after op.
func weight(op byte, r *reader) uint64 {
	switch {
	case op == 0x03: // loop, and the tick package wasmstop adds after it
		return 1 + tickWeight
	case op == 0x10: // call: 1.6 KB
		return 7
	case op == 0x11: // call_indirect: 14.3 KB
		return 60
	case op >= 0x28 && op <= 0x3e: // loads and stores: 5.3–5.9 KB
		return 24
	case op == 0x0c || op == 0x0d || op == 0x0e || op == 0x04: // br, br_if, br_table, if: 6 KB (br_if)
		return 24
	case op >= 0x6d && op <= 0x70, op >= 0x7f && op <= 0x82: // div, rem: 4.3–6.6 KB
		return 28
	case op >= 0xa8 && op <= 0xab, op >= 0xae && op <= 0xb1: // truncations that trap: 8.1 KB
		return 32
	case op == 0x25 || op == 0x26: // table.get, table.set: 4.3 KB
		return 18
	case op == 0x40: // memory.grow: 2.4 KB
		return 10
	case op == 0x24 || op == 0x1b || op == 0x1c || op == 0x3f: // global.set, select, memory.size: under 1 KB
		return 4
	case op == 0xfc:
		peek := *r
		switch peek.u32() {
		case 11, 17: // memory.fill, table.fill: 34 KB, and time that grows with their square in a function
			// (10,000: 3.7 s, 20,000: 16 s); at 140, a module of them within the limits took 19 s.
			return 400
		case 8, 10, 12, 14: // memory.init, memory.copy, table.init, table.copy: 16–22.5 KB, 47 µs
			return 160
		case 15: // table.grow: 3.2 KB
			return 14
		}
		return 4
	case op == 0xfd:
		peek := *r
		if sub := peek.u32(); sub <= 11 || sub >= 84 && sub <= 93 { // v128 loads and stores: 5.3 KB
			return 24
		}
		return 4
	}
	return 1
}

// tickWeight is what the tick package wasmstop adds at every loop header, and at the entry of every function
// that does not start with a loop, weighs: global.get, i32.const, i32.sub, global.set, global.get, i32.eqz,
// if, call. Check weighs the module wazero will compile, which is the rewritten one.
const tickWeight = 1 + 1 + 1 + 4 + 1 + 1 + 24 + 7

// labelWeight is what one br_table label costs in memory: 2.4 KB. Their time (8–23 µs) is bounded by
// Limits.Labels and Limits.TotalLabels.
const labelWeight = 10
