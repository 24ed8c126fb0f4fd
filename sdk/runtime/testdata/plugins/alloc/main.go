// Command alloc is a hostile plugin whose render allocates, and touches, memory until it runs out.
package main

import (
	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/guest"
)

type plugin struct{}

var keep [][]byte

func (plugin) Metadata() abi.Metadata {
	return abi.Metadata{Name: "alloc", Version: "1.0.0", OperatingSystems: []abi.OperatingSystem{{Name: "testos"}},
		ProvisioningUtilities: []string{abi.UtilityCloudInit}, CloudProviders: []string{"*"}}
}

func (plugin) Render(*abi.RenderRequest) (*abi.RenderResponse, error) {
	for {
		b := make([]byte, 16<<20)
		for i := 0; i < len(b); i += 4096 { // touch every page, so the host really backs it
			b[i] = 1
		}
		keep = append(keep, b)
	}
}

func init() { guest.Register(plugin{}) }

func main() {}
