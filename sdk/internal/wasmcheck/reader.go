package wasmcheck

import (
	"errors"
	"fmt"
)

// reader decodes the binary format. The first error sticks; later reads return zero values, so callers check
// r.err once after a group of reads.
type reader struct {
	b   []byte
	pos int
	err error
}

var errEnd = errors.New("unexpected end")

func (r *reader) done() bool { return r.err != nil || r.pos >= len(r.b) }

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
}

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.pos >= len(r.b) {
		r.err = errEnd
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

func (r *reader) bytes(n uint32) []byte {
	if r.err != nil {
		return nil
	}
	if uint64(n) > uint64(len(r.b)-r.pos) {
		r.err = errEnd
		return nil
	}
	b := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return b
}

// uleb reads an unsigned LEB128 number of at most bits bits.
func (r *reader) uleb(bits int) uint64 {
	var v uint64
	for shift := 0; ; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		if shift >= bits {
			r.err = errors.New("integer too long")
			return 0
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
}

// sleb skips a signed LEB128 number of at most bits bits.
func (r *reader) sleb(bits int) {
	for shift := 0; ; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return
		}
		if shift >= bits {
			r.err = errors.New("integer too long")
			return
		}
		if c&0x80 == 0 {
			return
		}
	}
}

func (r *reader) u32() uint32 { return uint32(r.uleb(32)) }

func (r *reader) name() string { return string(r.bytes(r.u32())) }

// valType reads one value type.
func (r *reader) valType() byte {
	t := r.byte()
	switch t {
	case i32, i64, f32, f64, v128, funcRef, externRef:
	default:
		r.fail("unsupported value type %#x", t)
	}
	return t
}

// tableLimits are a table's or a memory's limits. grown marks a table some table.grow may grow.
type tableLimits struct {
	min, max      uint32
	hasMax, grown bool
}

// limits reads a table's or a memory's limits.
func (r *reader) limits() tableLimits {
	switch flags := r.byte(); flags {
	case 0x00, 0x02:
		return tableLimits{min: r.u32()}
	case 0x01, 0x03:
		return tableLimits{min: r.u32(), max: r.u32(), hasMax: true}
	default:
		r.fail("unsupported limits flags %#x", flags)
		return tableLimits{}
	}
}

// Value types.
const (
	i32       = 0x7f
	i64       = 0x7e
	f32       = 0x7d
	f64       = 0x7c
	v128      = 0x7b
	funcRef   = 0x70
	externRef = 0x6f
)
