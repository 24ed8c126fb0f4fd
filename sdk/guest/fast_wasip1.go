//go:build wasip1

package guest

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/osmhq/osm/sdk/internal/fastio"
)

// The fast I/O path (SPEC.md §8), an optional part of ABI v1 that hosts use when a module exports it: the host
// copies the request straight into a buffer of this module's linear memory and reads the output straight out of
// it, instead of moving both through the Extism kernel eight bytes per host call. The exports above stay for
// hosts that only speak the standard path; both paths run the same Invoke, so they give the same output.

var (
	// fastIn is the request buffer osm_v1_alloc handed out. It is reused by later calls (decoded requests do
	// not reference it) and referenced here so that the collector keeps it while the host fills it.
	fastIn []byte
	// fastOut is the last result, referenced until the next call so that it survives until the host read it.
	fastOut []byte
)

//go:wasmexport osm_v1_alloc
func osmV1Alloc(size int32) int32 {
	fastOut = nil
	if size <= 0 {
		fastIn = fastIn[:0]
		return 0
	}
	if int(size) > cap(fastIn) || cap(fastIn) > maxKept {
		fastIn = nil // let the collector take the old buffer if it must
		fastIn = make([]byte, size)
	}
	fastIn = fastIn[:size]
	return int32(uintptr(unsafe.Pointer(unsafe.SliceData(fastIn))))
}

//go:wasmexport osm_v1_call
func osmV1Call(exportID, ptr, size int32) int64 {
	defer afterCall()
	export, ok := fastio.Export(exportID)
	if !ok {
		return fastResult(nil, fmt.Errorf("osm_v1_call: unknown export id %d", exportID))
	}
	var in []byte
	if size != 0 {
		if size < 0 || int(size) != len(fastIn) || ptr != int32(uintptr(unsafe.Pointer(unsafe.SliceData(fastIn)))) {
			return fastResult(nil, errors.New("osm_v1_call: the input is not the buffer osm_v1_alloc returned"))
		}
		in = fastIn
	}
	return fastResult(call(export, in))
}

// fastResult keeps the output (or the error message) alive for the host and packs its address and length.
func fastResult(out []byte, err error) int64 {
	failed := err != nil
	if failed {
		out = []byte(err.Error())
	} else if len(out) > fastio.MaxLen {
		failed, out = true, []byte(fmt.Sprintf("output of %d bytes exceeds the fast path's limit of %d bytes", len(out), fastio.MaxLen))
	}
	fastOut = out
	var ptr uint32
	if len(out) > 0 {
		ptr = uint32(uintptr(unsafe.Pointer(unsafe.SliceData(out))))
	}
	return int64(fastio.Pack(ptr, uint32(len(out)), failed))
}
