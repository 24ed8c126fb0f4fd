package cloudinit

import (
	"github.com/osmhq/osm/sdk/abi"
)

// CoreOS is the coreos section of Flatcar's coreos-cloudinit, the cloud-config dialect Flatcar reads when it
// is provisioned with cloud-init instead of Ignition.
type CoreOS struct {
	Units []CoreOSUnit `yaml:"units,omitempty"`
}

// CoreOSUnit is a unit in coreos-cloudinit's format; command start makes coreos-cloudinit start it.
type CoreOSUnit struct {
	Name    string         `yaml:"name"`
	Enable  bool           `yaml:"enable,omitempty"`
	Mask    bool           `yaml:"mask,omitempty"`
	Command string         `yaml:"command,omitempty"`
	Content string         `yaml:"content,omitempty"`
	DropIns []CoreOSDropIn `yaml:"drop-ins,omitempty"`
}

// CoreOSDropIn is a drop-in of a CoreOSUnit.
type CoreOSDropIn struct {
	Name    string `yaml:"name"`
	Content string `yaml:"content"`
}

// CoreOSUnits writes the configuration's units in the coreos section: enabled units are enabled and started,
// as Units does with systemctl on other systems.
func CoreOSUnits(doc *Document, cfg *abi.NodeConfig) {
	if len(cfg.Units) == 0 {
		return
	}
	doc.CoreOS = &CoreOS{}
	for _, u := range cfg.Units {
		cu := CoreOSUnit{Name: u.Name}
		if u.Mask != nil && *u.Mask {
			cu.Mask = true
		} else if u.Enable != nil && *u.Enable {
			cu.Enable, cu.Command = true, "start"
		}
		if u.Content != nil {
			cu.Content = *u.Content
		}
		for _, d := range u.DropIns {
			cu.DropIns = append(cu.DropIns, CoreOSDropIn{Name: d.Name, Content: d.Content})
		}
		doc.CoreOS.Units = append(doc.CoreOS.Units, cu)
	}
}
