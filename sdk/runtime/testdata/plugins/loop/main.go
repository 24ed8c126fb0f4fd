// Command loop is a hostile plugin whose render never returns.
package main

import (
	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/guest"
)

type plugin struct{}

var sink int

func (plugin) Metadata() abi.Metadata {
	return abi.Metadata{Name: "loop", Version: "1.0.0", OperatingSystems: []abi.OperatingSystem{{Name: "testos"}},
		ProvisioningUtilities: []string{abi.UtilityCloudInit}, CloudProviders: []string{"*"}}
}

func (plugin) Render(*abi.RenderRequest) (*abi.RenderResponse, error) {
	for i := 0; ; i++ {
		sink = i
	}
}

func init() { guest.Register(plugin{}) }

func main() {}
