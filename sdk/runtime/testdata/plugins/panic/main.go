// Command panic is a hostile plugin that panics where the guest package cannot recover: in a goroutine, which
// takes the whole Go runtime of the module down.
package main

import (
	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/guest"
)

type plugin struct{}

func (plugin) Metadata() abi.Metadata {
	return abi.Metadata{Name: "panic", Version: "1.0.0", OperatingSystems: []abi.OperatingSystem{{Name: "testos"}},
		ProvisioningUtilities: []string{abi.UtilityCloudInit}, CloudProviders: []string{"*"}}
}

func (plugin) Render(req *abi.RenderRequest) (*abi.RenderResponse, error) {
	if req.Config["mode"] == "recoverable" {
		panic("render exploded")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		panic("goroutine exploded")
	}()
	<-done
	return &abi.RenderResponse{}, nil
}

func init() { guest.Register(plugin{}) }

func main() {}
