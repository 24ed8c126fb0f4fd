// Package fastio is the calling convention of the optional fast I/O path of ABI v1 (SPEC.md §8), shared by the
// guest library, which exports it, and the host runtime, which uses it when a module exports it.
//
// The standard Extism convention moves a request into the guest and the response out of it eight bytes per
// host call. On the fast path the host asks the guest for a buffer (AllocExport), copies the request into the
// guest's linear memory in one go, calls CallExport, and copies the result out in one go:
//
//	osm_v1_alloc(size i32) -> ptr i32
//	osm_v1_call(export i32, ptr i32, size i32) -> result i64
//
// The result packs the address of the output in its high 32 bits and its length in the low 31 bits; bit 31
// (ErrorFlag) says that the output is an error message instead of the export's output.
package fastio

import "github.com/osmhq/osm/sdk/abi"

// The exports of the fast path.
const (
	AllocExport = "osm_v1_alloc"
	CallExport  = "osm_v1_call"
)

// ErrorFlag marks a result whose bytes are an error message.
const ErrorFlag = 1 << 31

// MaxLen is the largest output a result can describe.
const MaxLen = ErrorFlag - 1

// exports maps export IDs, the first argument of osm_v1_call, to ABI exports. The IDs are part of the ABI:
// never renumber them.
var exports = [...]string{
	0: abi.ExportMetadata,
	1: abi.ExportRender,
	2: abi.ExportValidate,
	3: abi.ExportEncode,
}

// ID returns the export ID of an ABI export, or false when the export has none.
func ID(export string) (int32, bool) {
	for id, e := range exports {
		if e == export {
			return int32(id), true
		}
	}
	return 0, false
}

// Export returns the ABI export with the ID, or false for an unknown ID.
func Export(id int32) (string, bool) {
	if id < 0 || int(id) >= len(exports) {
		return "", false
	}
	return exports[id], true
}

// Pack encodes a result. n must not exceed MaxLen.
func Pack(ptr, n uint32, failed bool) uint64 {
	r := uint64(ptr)<<32 | uint64(n&MaxLen)
	if failed {
		r |= ErrorFlag
	}
	return r
}

// Unpack decodes a result.
func Unpack(r uint64) (ptr, n uint32, failed bool) {
	return uint32(r >> 32), uint32(r) & MaxLen, uint32(r)&ErrorFlag != 0
}
