//go:build wasip1

package guest

import (
	"runtime"

	"github.com/extism/go-pdk"

	"github.com/osmhq/osm/sdk/abi"
)

// The ABI exports. Each returns 0 on success and 1 after setting the Extism error, which is how the host tells
// a plugin error from a trap. They live in this package, not in the author's main, so that every plugin
// speaks the ABI the same way.

//go:wasmexport osm_metadata
func osmMetadata() int32 { return serve(abi.ExportMetadata, false) }

//go:wasmexport osm_render
func osmRender() int32 { return serve(abi.ExportRender, true) }

//go:wasmexport osm_validate
func osmValidate() int32 { return serve(abi.ExportValidate, true) }

//go:wasmexport osm_encode
func osmEncode() int32 { return serve(abi.ExportEncode, true) }

func serve(export string, hasInput bool) int32 {
	defer afterCall()
	var in []byte
	if hasInput {
		in = pdk.Input()
	}
	out, err := call(export, in)
	if err != nil {
		pdk.SetErrorString(err.Error())
		return 1
	}
	pdk.Output(out)
	return 0
}

// maxKept bounds the buffers kept for the next call, so that one huge request or output does not stay
// referenced (and scanned, and counted against the heap goal) for the instance's lifetime.
const maxKept = 1 << 20

// outBuf is the storage outputs are encoded into, reused from call to call. The host has copied an output out
// of the module before it makes the next call.
var outBuf []byte

// call runs an export of the registered plugin, encoding its output into outBuf.
func call(export string, in []byte) ([]byte, error) {
	if cap(outBuf) > maxKept {
		outBuf = nil
	}
	out, err := invoke(current(), export, in, outBuf)
	if err == nil {
		outBuf = out
	}
	return out, err
}

// afterCall lets the Go runtime's background goroutines run, every yieldEvery calls, before the export returns.
// A c-shared module runs Go code only while the host is in one of its exports, and an export that never
// yields leaves a garbage collection cycle to the allocating goroutine's mark assists: the cycle then spans
// many calls, everything allocated meanwhile counts as live, and every heap goal is higher than the last (the
// Ubuntu plugin was measured growing to over 100 MiB, past the host's idle-instance limit, instead of staying
// at ~37 MiB). Yielding lets the mark worker finish the cycle and the sweeper sweep. A yield costs ~10 µs
// even when no collection is under way, hence not on every call.
func afterCall() {
	calls++
	if calls%yieldEvery == 0 {
		runtime.Gosched()
	}
}

const yieldEvery = 4

var calls uint
