package wasmcheck

// weight is what an instruction costs wazero's compiler, in units of about 256 bytes of allocation or 0.2–0.5
// µs, measured by class with 10,000 of one instruction in a function (what an instruction that can trap costs
// is mostly its trap's exit path); the bulk operations weigh what they cost in time. The compiler keeps what
// one function needs until that function is done, so the weight of a function bounds the compile's memory
// (Limits.Weight); the weight of a module bounds its compile time (Limits.TotalWeight). r is positioned
// after op.
func weight(op byte, r *reader) uint64 {
	switch op {
	case 0xfc:
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
	case 0xfd:
		peek := *r
		if sub := peek.u32(); sub <= 11 || sub >= 84 && sub <= 93 { // v128 loads and stores: 5.3 KB
			return 24
		}
		return 4
	}
	return uint64(weights[op])
}

// weights are the weights of the one-byte opcodes.
var weights = func() (w [256]uint8) {
	set := func(weight uint8, ops ...byte) {
		for _, op := range ops {
			w[op] = weight
		}
	}
	span := func(from, to byte) []byte {
		var ops []byte
		for op := from; op <= to; op++ {
			ops = append(ops, op)
		}
		return ops
	}
	for op := range w {
		w[op] = 1
	}
	set(1+tickWeight, 0x03)                                   // loop, and the tick package wasmstop adds after it
	set(7, 0x10)                                              // call: 1.6 KB
	set(60, 0x11)                                             // call_indirect: 14.3 KB
	set(24, span(0x28, 0x3e)...)                              // loads and stores: 5.3–5.9 KB
	set(24, 0x04, 0x0c, 0x0d, 0x0e)                           // if, br, br_if, br_table: 6 KB (br_if)
	set(28, append(span(0x6d, 0x70), span(0x7f, 0x82)...)...) // div, rem: 4.3–6.6 KB
	set(32, append(span(0xa8, 0xab), span(0xae, 0xb1)...)...) // truncations that trap: 8.1 KB
	set(18, 0x25, 0x26)                                       // table.get, table.set: 4.3 KB
	set(10, 0x40)                                             // memory.grow: 2.4 KB
	set(4, 0x24, 0x1b, 0x1c, 0x3f)                            // global.set, select, memory.size: under 1 KB
	return w
}()

// tickWeight is what the tick package wasmstop adds at every loop header, and at the entry of every function
// that does not start with a loop, weighs: global.get, i32.const, i32.sub, global.set, global.get, i32.eqz,
// if, call. Check weighs the module wazero will compile, which is the rewritten one.
const tickWeight = 1 + 1 + 1 + 4 + 1 + 1 + 24 + 7

// labelWeight is what one br_table label costs in memory: 2.4 KB. Their time (8–23 µs) is bounded by
// Limits.Labels and Limits.TotalLabels.
const labelWeight = 10
