// Package apt is the Debian family (Ubuntu, Debian) part of the default OS plugins: packages and containerd
// with apt, the Debian trust store, and cloud-init as provisioning utility.
//
// What it assumes: apt-get with Debian's package names; containerd.io from Docker's repository for the
// image's $ID and $VERSION_CODENAME (<dockerRepoURL>/<ID>), held with apt-mark, or the distribution's package
// (plugin config containerdSource); ufw.service as the firewall, masked; the trust store of
// update-ca-certificates; on Azure, cloud-init's local stage again after the clean; no network stack: the
// image's own (netplan, ifupdown) keeps DHCP, and a MachineDeployment that asks for a static address
// (providerSpec.value.network) is refused until a vendor sets OS.Network. OS returns a node.OS whose fields
// (Install, Firewall, Trust, Handoff, Network) a vendor replaces where the distribution differs.
package apt

import (
	"strings"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/node"
)

// Packages every node gets: tools the kubelet and kube-proxy call (conntrack, iptables, ebtables, ethtool,
// socat, ipvsadm) and NFS client support for volumes.
var basePackages = []string{"ca-certificates", "conntrack", "curl", "ebtables", "ethtool", "iptables", "ipvsadm", "kmod", "nfs-common", "socat"}

// providerPackages are the guest agents and storage initiators the providers' CSI drivers and consoles need.
var providerPackages = map[string][]string{
	"vsphere":               {"open-vm-tools"},
	"vmware-cloud-director": {"open-vm-tools"},
	"nutanix":               {"open-iscsi"},
	"kubevirt":              {"qemu-guest-agent"},
}

// providerServices are started once their packages are installed.
var providerServices = map[string][]string{
	"nutanix":  {"iscsid.service"},
	"kubevirt": {"qemu-guest-agent.service"},
}

// OS returns the Debian family's OS description; the caller fills in metadata and extras.
func OS() *node.OS {
	return &node.OS{
		Utilities: []string{abi.UtilityCloudInit},
		Options: append(node.ContainerdOptions([]string{node.ContainerdDocker, node.ContainerdDistro, node.ContainerdPreinstalled}, "2.2*"),
			node.ExtraPackagesOption()),
		Trust:        node.Trust{Path: "/usr/local/share/ca-certificates/osm-host-ca.crt", Update: "update-ca-certificates"},
		Handoff:      node.CloudInitHandoff(preInit),
		UnrunModules: node.CloudInitUnrunModules,
		Install:      Install,
		Firewall:     "ufw.service",
	}
}

// preInit: after `cloud-init clean`, Azure's datasource needs the local stage again before the init stage can
// read its metadata.
func preInit(r *node.Request, s *node.Script) {
	if r.Provider() == "azure" {
		s.Line(`cloud-init init --local || log "cloud-init init --local reported errors (exit $?)"`)
	}
}

// Install writes the package and containerd installation of osm-setup.
func Install(r *node.Request, s *node.Script) error {
	pkgs := append(append(append([]string(nil), basePackages...), providerPackages[r.Provider()]...), node.SplitList(r.Config[node.KeyExtraPackages])...)
	s.Section("Packages, waiting for the image's own first-boot apt runs to release the lock.")
	s.Line("export DEBIAN_FRONTEND=noninteractive")
	s.Line(`apt_get() { apt-get -o DPkg::Lock::Timeout=600 -o Acquire::Retries=5 "$@"; }`)
	s.Line("apt_get update")
	s.Line("apt_get install -y --no-install-recommends " + strings.Join(pkgs, " "))
	for _, svc := range providerServices[r.Provider()] {
		s.Line("systemctl enable --now " + svc + ` || log "could not start ` + svc + `"`)
	}

	// The config.toml is in place before the package is installed; --force-confold keeps it.
	switch r.Config[node.KeyContainerdSource] {
	case node.ContainerdDocker:
		s.Section("containerd.io from Docker's repository, held at the configured version.")
		s.Line("repo=" + node.Quote(strings.TrimRight(r.Config[node.KeyDockerRepoURL], "/")))
		s.Line(". /etc/os-release")
		s.Line("install -m 0755 -d /etc/apt/keyrings")
		s.Line(`curl -fsSL --retry 10 --retry-all-errors -o /etc/apt/keyrings/osm-docker.asc "$repo/$ID/gpg"`)
		s.Line(`echo "deb [arch=$(dpkg --print-architecture) signed-by=/etc/apt/keyrings/osm-docker.asc] $repo/$ID $VERSION_CODENAME stable" >/etc/apt/sources.list.d/osm-docker.list`)
		s.Line("apt_get update")
		s.Line("apt_get install -y --allow-downgrades --allow-change-held-packages -o Dpkg::Options::=--force-confold " +
			node.Quote("containerd.io="+r.Config[node.KeyContainerdVersion]))
		s.Line("apt-mark hold containerd.io")
	case node.ContainerdDistro:
		s.Section("The distribution's containerd package.")
		s.Line("apt_get install -y -o Dpkg::Options::=--force-confold containerd")
		s.Line("apt-mark hold containerd")
	}
	return nil
}
