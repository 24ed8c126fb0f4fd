package wirejson

import "encoding/binary"

// Word-at-a-time tests on eight bytes loaded little-endian.

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// unquoteMask has the high bit set in the lowest byte of x that is a quote, a backslash or a control
// character (higher bits may be spurious, the lowest is exact), so bits.TrailingZeros64(m)/8 is its index:
// the decoder jumps there instead of walking bytes, because in the sandbox every loop iteration costs a trip
// through the host's interrupt check.
func unquoteMask(x uint64) uint64 {
	q := x ^ (ones * '"')
	b := x ^ (ones * '\\')
	return (((q - ones) &^ q) | ((b - ones) &^ b) | ((x - ones*0x20) &^ x)) & highs
}

// quoteMask is unquoteMask for encoding: it also flags <, >, & (which encoding/json escapes) and non-ASCII
// bytes (which need a UTF-8 check).
//
// It is written out (rather than calling unquoteMask) to stay within the compiler's inlining budget: the
// encoder calls it for every eight bytes of every string, and in the sandbox a call costs more than the test.
func quoteMask(x uint64) uint64 {
	q := x ^ (ones * '"')
	b := x ^ (ones * '\\')
	lt := x ^ (ones * '<')
	gt := x ^ (ones * '>')
	amp := x ^ (ones * '&')
	return ((q-ones)&^q | (b-ones)&^b | (x-ones*0x20)&^x | (lt-ones)&^lt | (gt-ones)&^gt | (amp-ones)&^amp | x) & highs
}

// textMask is quoteMask without the HTML characters (AppendText).
func textMask(x uint64) uint64 {
	q := x ^ (ones * '"')
	b := x ^ (ones * '\\')
	return ((q-ones)&^q | (b-ones)&^b | (x-ones*0x20)&^x | x) & highs
}

// stringWord loads eight bytes of s at i, little-endian, without converting s to a byte slice (which would
// copy through a runtime call).
func stringWord(s string, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// word loads eight bytes of b at i, little-endian (the generated key comparisons).
func word(b []byte, i int) uint64 { return binary.LittleEndian.Uint64(b[i:]) }

// tail loads the last 1–7 bytes of b from i, little-endian, without a loop.
func tail(b []byte, i int) uint64 {
	var x uint64
	switch len(b) - i {
	case 7:
		x |= uint64(b[i+6]) << 48
		fallthrough
	case 6:
		x |= uint64(b[i+5]) << 40
		fallthrough
	case 5:
		x |= uint64(b[i+4]) << 32
		fallthrough
	case 4:
		x |= uint64(b[i+3]) << 24
		fallthrough
	case 3:
		x |= uint64(b[i+2]) << 16
		fallthrough
	case 2:
		x |= uint64(b[i+1]) << 8
		fallthrough
	case 1:
		x |= uint64(b[i])
	}
	return x
}
