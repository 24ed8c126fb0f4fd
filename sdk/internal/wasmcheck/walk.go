package wasmcheck

import "fmt"

// Instruction is one instruction of a function body, as Instructions decodes it.
type Instruction struct {
	// Op is the opcode (the prefix, for the 0xfc instructions).
	Op byte
	// At is the offset of the opcode in the body, and Next that of the following instruction.
	At, Next int
	// Index is the first immediate of call, global.get, global.set and ref.func: the function or global index.
	Index uint32
}

// Instructions decodes a function body (its locals, then its code) and calls visit for each instruction, in
// order, up to the body's final end. It returns the offset where the code starts, after the locals. The decoder
// is Check's: the same instructions are known, and the same malformations refused.
func Instructions(body []byte, visit func(Instruction) error) (codeStart int, err error) {
	r := &reader{b: body}
	for groups := r.u32(); groups > 0 && r.err == nil; groups-- {
		r.u32()
		r.valType()
	}
	codeStart = r.pos
	for depth := 1; depth > 0 && r.err == nil; {
		in := Instruction{At: r.pos}
		in.Op = r.byte()
		switch in.Op {
		case 0x10, 0x23, 0x24, 0xd2: // call, global.get, global.set, ref.func
			peek := *r
			in.Index = peek.u32()
		case 0x02, 0x03, 0x04: // block, loop, if
			depth++
		case 0x0b: // end
			depth--
		}
		if err := skipImmediates(r, in.Op); err != nil {
			return 0, fmt.Errorf("at offset %d: %w", in.At, err)
		}
		in.Next = r.pos
		if err := visit(in); err != nil {
			return 0, err
		}
	}
	if r.err != nil {
		return 0, r.err
	}
	if !r.done() {
		return 0, fmt.Errorf("%d bytes after the end of the body", len(body)-r.pos)
	}
	return codeStart, nil
}
