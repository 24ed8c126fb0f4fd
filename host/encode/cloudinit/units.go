package cloudinit

import (
	"github.com/osmhq/osm/sdk/abi"
)

// SystemdDir is where unit files and drop-ins are written.
const SystemdDir = "/etc/systemd/system/"

// Units writes each unit and its drop-ins as files and adds the systemctl calls that mask or enable and start
// them. The calls run first in runcmd, after a daemon-reload, so that commands of the profile can rely on the
// units being in place.
func Units(doc *Document, cfg *abi.NodeConfig) {
	if len(cfg.Units) == 0 {
		return
	}
	var cmds []string
	for _, u := range cfg.Units {
		if u.Content != nil && *u.Content != "" {
			doc.WriteFiles = append(doc.WriteFiles, WriteFile{Path: SystemdDir + u.Name, Permissions: "0644", Content: *u.Content})
		}
		for _, d := range u.DropIns {
			doc.WriteFiles = append(doc.WriteFiles, WriteFile{Path: SystemdDir + u.Name + ".d/" + d.Name, Permissions: "0644", Content: d.Content})
		}
	}
	cmds = append(cmds, "systemctl daemon-reload")
	for _, u := range cfg.Units {
		switch {
		case u.Mask != nil && *u.Mask:
			cmds = append(cmds, "systemctl mask --now "+u.Name)
		case u.Enable != nil && *u.Enable:
			cmds = append(cmds, "systemctl enable --now "+u.Name)
		}
	}
	doc.RunCMD = append(cmds, doc.RunCMD...)
}
