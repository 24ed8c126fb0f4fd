package wasmcheck

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Section is one section of a module: its id and its body.
type Section struct {
	ID   byte
	Body []byte
}

// Sections splits a module into its sections, in order, without reading them. The packages that rewrite
// modules (wasmsnap) work section by section.
func Sections(wasm []byte) ([]Section, error) {
	if !bytes.HasPrefix(wasm, header) {
		return nil, errors.New("not a WebAssembly 1.0 binary module")
	}
	var secs []Section
	for pos := len(header); pos < len(wasm); {
		id := wasm[pos]
		size, n := binary.Uvarint(wasm[pos+1:])
		if n <= 0 || size > uint64(len(wasm)-pos-1-n) {
			return nil, fmt.Errorf("section %d at offset %d: bad size", id, pos)
		}
		start := pos + 1 + n
		secs = append(secs, Section{ID: id, Body: wasm[start : start+int(size)]})
		pos = start + int(size)
	}
	return secs, nil
}

// AppendSection appends a section to a module being written.
func AppendSection(out []byte, id byte, body []byte) []byte {
	out = append(out, id)
	out = binary.AppendUvarint(out, uint64(len(body)))
	return append(out, body...)
}
