// Command abiv2 is a plugin built for an ABI the host does not speak.
package main

import (
	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/guest"
)

type plugin struct{}

func (plugin) Metadata() abi.Metadata {
	return abi.Metadata{ABIVersion: "v2", Name: "abiv2", Version: "2.0.0", OperatingSystems: []abi.OperatingSystem{{Name: "testos"}},
		ProvisioningUtilities: []string{abi.UtilityCloudInit}, CloudProviders: []string{"*"}}
}

func (plugin) Render(*abi.RenderRequest) (*abi.RenderResponse, error) {
	return &abi.RenderResponse{}, nil
}

func init() { guest.Register(plugin{}) }

func main() {}
