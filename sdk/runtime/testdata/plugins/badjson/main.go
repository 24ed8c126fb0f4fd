// Command badjson is a plugin written against the Extism PDK directly (not the guest package) whose render
// output is not JSON, and whose validate output is JSON of the wrong shape.
package main

import "github.com/extism/go-pdk"

//go:wasmexport osm_metadata
func osmMetadata() int32 {
	pdk.OutputString(`{"abiVersion":"v1","name":"badjson","version":"1.0.0","operatingSystems":[{"name":"testos"}],` +
		`"provisioningUtilities":["cloud-init"],"cloudProviders":["*"]}`)
	return 0
}

//go:wasmexport osm_render
func osmRender() int32 {
	pdk.OutputString("this is not {json")
	return 0
}

//go:wasmexport osm_validate
func osmValidate() int32 {
	pdk.OutputString(`{"abiVersion":"v1","errors":"everything"}`)
	return 0
}

func main() {}
