package wasmsnap

import (
	"errors"
	"fmt"

	"github.com/osmhq/osm/sdk/internal/wasmcheck"
)

// Segment is a run of bytes at an offset of a memory image.
type Segment struct {
	Offset uint32
	Bytes  []byte // a slice of the module Split was given
}

// Split takes a module Build returned apart, for a host that gives each instance its initial memory itself
// (a copy-on-write mapping of the image: an instance then copies only the pages it writes, where wazero
// would copy every segment into every instance). It returns the module without its data section, the size
// of the memory its instances start with, and the segments the image consists of, in place (no copy).
//
// Only what Build writes is accepted: one memory, and active segments at constant offsets; anything else is
// an error, and the host then instantiates the module as it is.
func Split(built []byte) (code []byte, memorySize uint64, segs []Segment, err error) {
	secs, err := wasmcheck.Sections(built)
	if err != nil {
		return nil, 0, nil, err
	}
	size := len(built)
	for _, s := range secs {
		if s.ID == secData {
			size -= len(s.Body) // the section's header stays over-counted: a few bytes
		}
	}
	code = make([]byte, 0, size)
	code = append(code, built[:8]...)
	haveMemory := false
	for _, s := range secs {
		switch s.ID {
		case secCount:
			return nil, 0, nil, errors.New("module has a data count section")
		case secMemory:
			if memorySize, err = memoryMinimum(s.Body); err != nil {
				return nil, 0, nil, fmt.Errorf("memory section: %w", err)
			}
			haveMemory = true
		case secData:
			if segs, err = activeSegments(s.Body); err != nil {
				return nil, 0, nil, fmt.Errorf("data section: %w", err)
			}
			continue
		}
		code = wasmcheck.AppendSection(code, s.ID, s.Body)
	}
	if !haveMemory {
		return nil, 0, nil, errors.New("module defines no memory")
	}
	for _, seg := range segs {
		if uint64(seg.Offset)+uint64(len(seg.Bytes)) > memorySize {
			return nil, 0, nil, fmt.Errorf("segment at %d of %d bytes exceeds the memory of %d bytes", seg.Offset, len(seg.Bytes), memorySize)
		}
	}
	return code, memorySize, segs, nil
}

// memoryMinimum reads the minimum size in bytes of a memory section's only memory.
func memoryMinimum(b []byte) (uint64, error) {
	r := &body{b: b}
	if n := r.u32(); r.err == nil && n != 1 {
		return 0, fmt.Errorf("%d memories", n)
	}
	if flags := r.byte(); r.err == nil && flags != 0 && flags != 1 {
		return 0, fmt.Errorf("memory with flags %#x", flags)
	}
	pages := r.u32()
	return uint64(pages) * pageSize, r.err
}

// activeSegments reads a data section of active segments of memory 0 at i32.const offsets.
func activeSegments(b []byte) ([]Segment, error) {
	r := &body{b: b}
	n := r.u32()
	segs := make([]Segment, 0, n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		if flags := r.u32(); r.err == nil && flags != 0 {
			return nil, fmt.Errorf("segment %d is not an active segment of memory 0", i)
		}
		if op := r.byte(); r.err == nil && op != 0x41 {
			return nil, fmt.Errorf("segment %d has a non-constant offset", i)
		}
		offset := r.sleb32()
		if end := r.byte(); r.err == nil && end != 0x0b {
			return nil, fmt.Errorf("segment %d: offset expression does not end", i)
		}
		size := r.u32()
		start := r.pos
		r.skip(size)
		if r.err == nil {
			segs = append(segs, Segment{Offset: uint32(offset), Bytes: b[start:r.pos:r.pos]})
		}
	}
	if r.err == nil && r.pos != len(b) {
		r.err = errors.New("trailing bytes")
	}
	return segs, r.err
}

// sleb32 reads a signed LEB128 i32.
func (r *body) sleb32() int32 {
	var v int64
	var shift uint
	for r.err == nil {
		c := r.byte()
		v |= int64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			break
		}
		if shift >= 35 {
			r.err = errors.New("signed number too long")
		}
	}
	return int32(v)
}
