package render

import (
	"encoding/base64"
	"strings"

	"github.com/osmhq/osm/sdk/abi"
)

// deferredCommands is the last DeferredCommands a plugin returned for the provisioning stage, with how many
// bootcmd and runcmd lines the configuration had when it did: the lines after those were added later (by the
// profile's later plugins or by extensions), and the plugin's script does not have them yet.
type deferredCommands struct {
	abi.DeferredCommands
	boot, run int
}

// noteDeferred records a plugin's DeferredCommands for the provisioning stage.
func (o *Output) noteDeferred(stage abi.Stage, resp *abi.RenderResponse) {
	if stage != abi.StageProvisioning || resp.DeferredCommands == nil || resp.DeferredCommands.Path == "" {
		return
	}
	d := &deferredCommands{DeferredCommands: *resp.DeferredCommands}
	if m := resp.Config.Modules; m != nil {
		d.boot, d.run = len(m.BootCMD), len(m.RunCMD)
	}
	o.deferred = d
}

// appendDeferred appends the commands added after the plugin that deferred them to its script, so that an
// extension's bootcmd and runcmd run on the node wherever the profile's do (cloud-init's init stage, which
// applies the provisioning configuration, runs no runcmd; coreos-cloudinit runs neither).
func (o *Output) appendDeferred(stage abi.Stage, cfg *abi.NodeConfig, utility string) {
	d := o.deferred
	if stage != abi.StageProvisioning || d == nil || cfg.Modules == nil {
		return
	}
	var add []string
	if d.BootCMD && len(cfg.Modules.BootCMD) > d.boot {
		add = append(add, cfg.Modules.BootCMD[d.boot:]...)
	}
	if d.RunCMD && len(cfg.Modules.RunCMD) > d.run {
		add = append(add, cfg.Modules.RunCMD[d.run:]...)
	}
	if len(add) == 0 {
		return
	}
	lines := strings.Join(add, "\n") + "\n"
	f := cfg.File(d.Path)
	if f == nil || f.Content.Inline == nil {
		cfg.SetFile(abi.PlainFile(d.Path, 0o700, "#!/bin/sh\n# Provisioning commands that "+utility+" does not run when the bootstrap applies the configuration;\n"+
			"# osm-setup runs them once the node is set up.\n"+lines))
		return
	}
	in := f.Content.Inline
	data := in.Data
	if in.Encoding == "b64" || in.Encoding == "base64" {
		raw, err := base64.StdEncoding.DecodeString(in.Data)
		if err != nil {
			return
		}
		data = string(raw)
	}
	if data != "" && !strings.HasSuffix(data, "\n") {
		data += "\n"
	}
	f.Content.Inline = &abi.FileContentInline{Data: data + lines}
}
