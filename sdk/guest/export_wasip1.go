//go:build wasip1

package guest

import (
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
	var in []byte
	if hasInput {
		in = pdk.Input()
	}
	// The host runs every call on a fresh instance (SPEC.md §6): nothing is kept for a next call.
	out, err := Invoke(current(), export, in)
	if err != nil {
		pdk.SetErrorString(err.Error())
		return 1
	}
	pdk.Output(out)
	return 0
}

//go:wasmexport osm_warmup
func osmWarmup() { warmUp(current()) }
