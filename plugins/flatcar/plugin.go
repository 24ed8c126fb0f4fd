package main

import (
	"fmt"
	"github.com/osmhq/osm/plugins/release"
	"strings"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/node"
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
	return &node.OS{
		Name:          "flatcar",
		PluginVersion: release.Version,
		Description:   "Flatcar Container Linux nodes with the built-in containerd, provisioned by Ignition or coreos-cloudinit",
		Versions:      nil, // Flatcar releases every few weeks; every current release works.
		Utilities:     []string{abi.UtilityIgnition, abi.UtilityCloudInit},
		CloudProviders: []string{"anexia", "aws", "azure", "equinixmetal", "gce", "kubevirt", "openstack",
			"vmware-cloud-director", "vsphere"},
		Trust:        node.Trust{Path: "/etc/ssl/certs/osm-host-ca.pem", Update: "update-ca-certificates"},
		Network:      staticNetwork,
		Handoff:      handoff,
		Prepare:      prepare,
		Provisioning: provisioning,
		Hostname:     hostname,
		UnrunModules: unrunModules,
	}
}

// staticNetworkPath is a systemd-networkd configuration; Flatcar's network is managed by networkd.
const staticNetworkPath = "/etc/systemd/network/10-osm-static.network"

// staticNetwork configures the machine's static address for the NIC named en* or eth* (providers without
// DHCP attach exactly one). Ignition writes it before networkd starts; coreos-cloudinit writes it later,
// hence the restart.
func staticNetwork(r *node.Request, cfg *abi.NodeConfig, s *node.Script) error {
	n := r.Ctx.Network
	values := append([]string{n.CIDR, n.Gateway}, n.DNSServers...)
	for _, v := range values {
		if strings.ContainsAny(v, " \t\r\n") {
			return fmt.Errorf("static network value %q contains white space", v)
		}
	}
	var b strings.Builder
	b.WriteString("[Match]\nName=en* eth*\n\n[Network]\nDHCP=no\n")
	if n.CIDR != "" {
		b.WriteString("Address=" + n.CIDR + "\n")
	}
	if n.Gateway != "" {
		b.WriteString("Gateway=" + n.Gateway + "\n")
	}
	for _, d := range n.DNSServers {
		b.WriteString("DNS=" + d + "\n")
	}
	cfg.Files = append(cfg.Files, abi.PlainFile(staticNetworkPath, 0o644, b.String()))
	if r.Utility() == abi.UtilityCloudInit {
		s.Line("systemctl restart systemd-networkd")
		s.Line("/usr/lib/systemd/systemd-networkd-wait-online --timeout=120 || true")
	}
	return nil
}

// handoff: Flatcar's Ignition applies a config found on the OEM partition (/oem since the 2023 releases,
// /usr/share/oem before) at a boot flagged as first boot; a new machine ID makes systemd apply the presets
// of a first boot as well. With cloud-init, coreos-cloudinit applies the cloud-config and osm-setup does the
// rest.
func handoff(r *node.Request, s *node.Script) {
	if r.Utility() == abi.UtilityIgnition {
		s.Section("Store it as the OEM Ignition config and reboot into a first boot to apply it.")
		s.Line("t=/usr/share/oem/config.ign")
		s.Line("if [ -d /oem ]; then t=/oem/config.ign; fi")
		s.Line("install -m 600 $cfg $t")
		s.Line("touch /boot/flatcar/first_boot " + node.BootstrapDone)
		s.Line("rm -f /etc/machine-id $cfg")
		s.Line(`log "rebooting to apply $t"`)
		s.Line("systemctl --no-block reboot")
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
		return false, false
	}
	return true, true
}

// prepare stops Docker, which Flatcar starts by socket activation; the kubelet talks to containerd.
func prepare(_ *node.Request, s *node.Script) {
	s.Section("Docker is not used; the kubelet talks to containerd directly.")
	s.Line("systemctl disable --now docker.socket docker.service 2>/dev/null || true")
}

// hostname: on AWS the node name must be the private DNS name, which coreos-metadata writes to
// /run/metadata/flatcar (the kubelet waits for it, see provisioning).
func hostname(r *node.Request, s *node.Script) {
	s.Line(`name=$(hostname -f 2>/dev/null || hostname)`)
	if r.Provider() == "aws" {
		s.Line(`ec2=$(sed -n 's/^COREOS_EC2_HOSTNAME=//p' /run/metadata/flatcar 2>/dev/null || true)`)
		s.Line(`if [ -n "$ec2" ]; then name=$ec2; fi`)
	}
}

// provisioning points containerd at /etc/containerd/config.toml, applies the MachineDeployment's update
// settings, and makes the kubelet wait for the AWS metadata.
func provisioning(r *node.Request, cfg *abi.NodeConfig) error {
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
	if r.Provider() == "aws" {
		if k := cfg.Unit(node.KubeletUnit); k != nil {
			k.DropIns = append(k.DropIns, abi.DropIn{Name: "10-osm-aws-metadata.conf",
				Content: "[Unit]\nRequires=coreos-metadata.service\nAfter=coreos-metadata.service\n"})
		}
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
