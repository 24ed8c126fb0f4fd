// Command selective is a test plugin that misbehaves only for MachineDeployments whose name asks for it, the
// way a real plugin bug hits some inputs and not others. It passes admission (the trial render uses other
// names) and lets the controller tests check that one bad render fails one MachineDeployment and no other.
//
// It talks the raw Extism ABI instead of using sdk/guest, so that its panics and garbage output reach the host
// unfiltered.
package main

import (
	"encoding/json"
	"strings"

	"github.com/extism/go-pdk"

	"github.com/osmhq/osm/sdk/abi"
)

var hoard [][]byte

//go:wasmexport osm_metadata
func metadata() int32 {
	pdk.OutputJSON(abi.Metadata{ABIVersion: abi.Version, Name: "selective", Version: "1.0.0", RealIdentity: true, // it decides on the name
		OperatingSystems:      []abi.OperatingSystem{{Name: "testos"}},
		ProvisioningUtilities: []string{abi.UtilityCloudInit}, CloudProviders: []string{"*"}})
	return 0
}

//go:wasmexport osm_render
func render() int32 {
	var req abi.RenderRequest
	if err := json.Unmarshal(pdk.Input(), &req); err != nil {
		pdk.SetErrorString("bad request: " + err.Error())
		return 1
	}
	name := req.Context.MachineDeployment.Name
	switch {
	case strings.HasPrefix(name, "loop-"):
		for i := 0; ; i++ {
			hoard = hoard[:0]
		}
	case strings.HasPrefix(name, "panic-"):
		panic("selective: asked to panic for " + name)
	case strings.HasPrefix(name, "oom-"):
		for {
			hoard = append(hoard, make([]byte, 1<<20))
		}
	case strings.HasPrefix(name, "recurse-"):
		return int32(recurse(1 << 40))
	case strings.HasPrefix(name, "garbage-"):
		pdk.OutputString("this is {not json")
		return 0
	case strings.HasPrefix(name, "error-"):
		pdk.SetErrorString("selective: cannot render " + name + ": spec.plugin.config.mirror is unreachable")
		return 1
	}
	cfg := req.Input
	cfg.SetFile(abi.PlainFile("/etc/osm/rendered-by", 0o644, "selective\n"))
	pdk.OutputJSON(abi.RenderResponse{ABIVersion: abi.Version, Config: cfg})
	return 0
}

// recurse calls itself n deep: without end, in effect, for the n render passes.
func recurse(n int) int {
	if n == 0 {
		return 0
	}
	return recurse(n-1) + 1
}

func main() {}
