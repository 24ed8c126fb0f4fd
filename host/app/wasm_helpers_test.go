package app_test

import (
	"bytes"
	"encoding/binary"
)

// wasmModule assembles a module from vector sections, each an id and its entries.
func wasmModule(sections ...wasmSection) []byte {
	out := []byte("\x00asm\x01\x00\x00\x00")
	for _, s := range sections {
		body := binary.AppendUvarint(nil, uint64(len(s.entries)))
		body = append(body, bytes.Join(s.entries, nil)...)
		out = append(binary.AppendUvarint(append(out, s.id), uint64(len(body))), body...)
	}
	return out
}

type wasmSection struct {
	id      byte
	entries [][]byte
}

// wasmBody is a function body without locals.
func wasmBody(code []byte) []byte {
	body := append(append([]byte{0}, code...), 0x0b)
	return append(binary.AppendUvarint(nil, uint64(len(body))), body...)
}
