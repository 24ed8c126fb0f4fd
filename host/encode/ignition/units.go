package ignition

import (
	"github.com/coreos/ignition/v2/config/v3_3/types"
	"k8s.io/utils/ptr"

	"github.com/osmhq/osm/sdk/abi"
)

// Units turns the configuration's systemd units into Ignition units. An empty content means the unit ships
// with the OS and only its drop-ins, enablement or mask are set.
func Units(cfg *abi.NodeConfig) []types.Unit {
	out := make([]types.Unit, 0, len(cfg.Units))
	for _, u := range cfg.Units {
		unit := types.Unit{Name: u.Name, Enabled: u.Enable, Mask: u.Mask}
		if u.Content != nil && *u.Content != "" {
			unit.Contents = ptr.To(*u.Content)
		}
		for _, d := range u.DropIns {
			unit.Dropins = append(unit.Dropins, types.Dropin{Name: d.Name, Contents: ptr.To(d.Content)})
		}
		out = append(out, unit)
	}
	return out
}
