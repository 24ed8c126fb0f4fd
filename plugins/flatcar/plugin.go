package main

import (
	"fmt"

	"github.com/osmhq/osm/plugins/release"
	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/node"
	"github.com/osmhq/osm/sdk/node/ignition"
)

// OS describes Flatcar Container Linux. Flatcar ships containerd and every tool a node needs, so nothing is
// installed: the plugin points the built-in containerd at the controller's configuration, puts the
// Kubernetes binaries into /opt/bin and sets up the update services the MachineDeployment asks for.
//
// With Ignition the bootstrap stores the provisioning config where Flatcar's Ignition reads an OEM config,
// flags the next boot as a first boot and reboots; every unit the node needs is an enabled systemd unit,
// because Ignition has no runcmd. With cloud-init (for providers without Ignition) Flatcar's coreos-cloudinit
// applies the configuration.
func OS() *node.OS {
	os := ignition.OS(ignition.Flatcar)
	os.Name = "flatcar"
	os.PluginVersion = release.Version
	os.Description = "Flatcar Container Linux nodes with the built-in containerd, provisioned by Ignition or coreos-cloudinit"
	os.Versions = nil // Flatcar releases every few weeks; every current release works.
	os.Utilities = []string{abi.UtilityIgnition, abi.UtilityCloudInit}
	os.CloudProviders = []string{"anexia", "aws", "azure", "equinixmetal", "gce", "kubevirt", "openstack",
		"vmware-cloud-director", "vsphere"}
	os.Handoff = handoff
	os.UnrunModules = unrunModules
	family := os.Provisioning
	os.Provisioning = func(r *node.Request, cfg *abi.NodeConfig) error { return provisioning(r, cfg, family) }
	return os
}

// staticNetworkPath is a systemd-networkd configuration; Flatcar's network is managed by networkd.
const staticNetworkPath = ignition.NetworkdPath

// handoff: with Ignition, the SDK's Flatcar shape (node.FlatcarIgnition): Flatcar's Ignition applies a config
// found on the OEM partition (/oem since the 2023 releases, /usr/share/oem before) at a boot flagged as first
// boot, and a new machine ID makes systemd apply the presets of a first boot as well. With cloud-init,
// coreos-cloudinit applies the cloud-config and osm-setup does the rest.
func handoff(r *node.Request, s *node.Script) {
	if r.Utility() == abi.UtilityIgnition {
		node.IgnitionHandoff(node.FlatcarIgnition)(r, s)
		return
	}
	s.Section("Apply it with coreos-cloudinit.")
	s.Line("install -m 600 $cfg /var/lib/osm/provisioning.cfg")
	s.Line("coreos-cloudinit --from-file=/var/lib/osm/provisioning.cfg")
	s.Line("touch " + node.BootstrapDone)
	s.Line("systemctl daemon-reload")
	s.Line("systemctl start --no-block " + node.SetupUnit)
}

// unrunModules: Ignition has no commands, and the host turns bootcmd and runcmd into a unit of its own;
// coreos-cloudinit knows neither key, so osm-setup runs both.
func unrunModules(r *node.Request) (bootcmd, runcmd bool) {
	if r.Utility() == abi.UtilityIgnition {
		return node.IgnitionUnrunModules(r)
	}
	return true, true
}

// provisioning points containerd at /etc/containerd/config.toml, applies the MachineDeployment's update
// settings, and (the family's part) makes the kubelet wait for the AWS metadata.
func provisioning(r *node.Request, cfg *abi.NodeConfig, family func(*node.Request, *abi.NodeConfig) error) error {
	containerd := cfg.Unit(node.ContainerdUnit)
	if containerd == nil {
		return fmt.Errorf("plugin bug: no %s unit to configure", node.ContainerdUnit)
	}
	// Releases before 2023 ran containerd from torcx, whose binary directory is in /run/metadata/torcx; the
	// empty TORCX_BINDIR of newer releases leaves PATH unchanged.
	containerd.DropIns = append(containerd.DropIns, abi.DropIn{Name: "20-osm-flatcar-config.conf", Content: `[Service]
EnvironmentFile=-/run/metadata/torcx
Environment=CONTAINERD_CONFIG=` + node.ContainerdConfigPath + `
ExecStart=
ExecStart=/usr/bin/env PATH=${TORCX_BINDIR}:${PATH} containerd --config ${CONTAINERD_CONFIG}
`})
	// The family makes the kubelet wait for coreos-metadata on AWS.
	if err := family(r, cfg); err != nil {
		return err
	}

	spec := r.Flatcar
	noUpdateEngine := spec.DisableUpdateEngine || spec.DisableAutoUpdate
	t := true
	if noUpdateEngine {
		cfg.Units = append(cfg.Units, abi.Unit{Name: "update-engine.service", Mask: &t})
	} else if p := r.Ctx.Proxy.HTTPProxy; p != "" {
		cfg.Units = append(cfg.Units, abi.Unit{Name: "update-engine.service", DropIns: []abi.DropIn{{Name: "50-osm-proxy.conf",
			Content: "[Service]\nEnvironment=ALL_PROXY=" + p + "\n"}}})
	}
	if spec.DisableLocksmithD || spec.DisableAutoUpdate {
		cfg.Units = append(cfg.Units, abi.Unit{Name: "locksmithd.service", Mask: &t})
	}
	return nil
}
