// Package dnf is the Red Hat family (RHEL, Rocky Linux, Amazon Linux 2023) part of the default OS plugins:
// packages and containerd with dnf, SELinux and firewalld, the Red Hat trust store, and cloud-init as
// provisioning utility.
//
// What the family assumes, each a field of Family that a vendor changes without copying the family (OS
// returns RHEL's values; New takes a Family whose zero fields mean RHEL's):
//
//   - Package manager: `dnf install -y --setopt=install_weak_deps=False --setopt=retries=10`
//     (Family.InstallCommand; Azure Linux: `tdnf install -y`), base packages of RHEL's names (Family.Packages),
//     containerd locked at its installed version with dnf's versionlock plugin (Family.NoVersionLock turns the
//     lock off, e.g. for tdnf, which has none).
//   - Repositories: containerdSource docker adds Docker's repository for RHEL, <dockerRepoURL>/rhel, with
//     dnf's $releasever and $basearch (Family.DockerRepoDistro: "centos", "fedora"); the sources a profile
//     may choose and the default are Family.ContainerdSources (nil: the image's own containerd only,
//     node.ContainerdPreinstalled), the containerd.io version pattern Family.ContainerdVersion.
//   - Network stack: NetworkManager (Family.Network: NetworkSystemdNetworkd for Azure Linux). It matters on
//     Azure, where cloud-init's local stage runs again after `cloud-init clean` and its ephemeral DHCP only
//     works while the network service does not hold the interface: the bootstrap stops that service, flushes
//     eth0, runs the local stage and starts the service again.
//   - Firewall: firewalld.service is masked (Family.Firewall, NoFirewall for none), SELinux permissive by
//     default (plugin config selinux).
//   - Trust store: /etc/pki/ca-trust with update-ca-trust (Family.Trust).
package dnf

import (
	"strings"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/node"
)

// Values of the selinux key.
const (
	// SELinuxPermissive switches SELinux to permissive mode, as upstream OSM does: many CNI and CSI plugins
	// write host paths without SELinux labels.
	SELinuxPermissive = "permissive"
	// SELinuxKeep leaves the image's SELinux mode alone, for clusters whose workloads are labelled correctly.
	SELinuxKeep = "keep"
)

// basePackages: tools the kubelet and kube-proxy call, NFS client support, and tar for the binary archives
// (minimal images lack it). curl is not listed: the images ship curl-minimal, which conflicts with curl.
var basePackages = []string{"conntrack-tools", "ethtool", "iptables-nft", "ipvsadm", "nfs-utils", "socat", "tar"}

var providerPackages = map[string][]string{
	"vsphere":  {"open-vm-tools"},
	"nutanix":  {"iscsi-initiator-utils"},
	"kubevirt": {"qemu-guest-agent"},
}

var providerServices = map[string][]string{
	"vsphere":  {"vmtoolsd.service"},
	"nutanix":  {"iscsid.service"},
	"kubevirt": {"qemu-guest-agent.service"},
}

// DockerRepoPath is the repository file for Docker's repository.
const DockerRepoPath = "/etc/yum.repos.d/osm-docker-ce.repo"

// Values of Family.Network.
const (
	NetworkNetworkManager  = "NetworkManager"
	NetworkSystemdNetworkd = "systemd-networkd"
)

// NoFirewall as Family.Firewall: the image runs no firewall service.
const NoFirewall = "none"

// Family is what the family assumes about a distribution (see the package documentation); a zero field means
// RHEL's value.
type Family struct {
	// ContainerdSources are the accepted containerdSource values, the first being the default (nil: only
	// node.ContainerdPreinstalled); ContainerdVersion the default containerd.io version pattern
	// (node.DefaultContainerdVersion when empty).
	ContainerdSources []string
	ContainerdVersion string
	// InstallCommand installs packages given as arguments.
	InstallCommand string
	// NoVersionLock leaves containerd unlocked (for package managers without dnf's versionlock plugin).
	NoVersionLock bool
	// Packages replace the base packages every node gets.
	Packages []string
	// DockerRepoDistro is the directory of Docker's repository for the distribution: rhel, centos or fedora.
	DockerRepoDistro string
	// Network is the network service: NetworkNetworkManager or NetworkSystemdNetworkd.
	Network string
	// Firewall is the firewall unit masked on every node, or NoFirewall.
	Firewall string
	// Trust is the system CA trust store.
	Trust node.Trust
}

// RHEL is the family's defaults.
var RHEL = Family{
	InstallCommand:   "dnf install -y --setopt=install_weak_deps=False --setopt=retries=10",
	Packages:         basePackages,
	DockerRepoDistro: "rhel",
	Network:          NetworkNetworkManager,
	Firewall:         "firewalld.service",
	Trust:            node.Trust{Path: "/etc/pki/ca-trust/source/anchors/osm-host-ca.crt", Update: "update-ca-trust extract"},
}

func (f Family) withDefaults() Family {
	d := RHEL
	if f.InstallCommand == "" {
		f.InstallCommand = d.InstallCommand
	}
	if f.Packages == nil {
		f.Packages = d.Packages
	}
	if f.DockerRepoDistro == "" {
		f.DockerRepoDistro = d.DockerRepoDistro
	}
	if f.Network == "" {
		f.Network = d.Network
	}
	if f.Firewall == "" {
		f.Firewall = d.Firewall
	}
	if f.Trust.Path == "" {
		f.Trust = d.Trust
	}
	return f
}

// OS returns the Red Hat family's OS description with RHEL's assumptions. sources are the accepted
// containerdSource values (the first is the default; nil: the image's own containerd) and containerdVersion
// the default package version pattern (node.DefaultContainerdVersion when empty).
func OS(sources []string, containerdVersion string) *node.OS {
	return New(Family{ContainerdSources: sources, ContainerdVersion: containerdVersion})
}

// New returns the family's OS description for f; the caller fills in metadata and extras.
func New(f Family) *node.OS {
	f = f.withDefaults()
	opts := node.ContainerdOptions(f.ContainerdSources, f.ContainerdVersion)
	opts = append(opts, node.ExtraPackagesOption(),
		node.Option{ConfigOption: abi.ConfigOption{Name: node.KeySELinux, Type: abi.ConfigEnum, Default: SELinuxPermissive, Enum: []string{SELinuxPermissive, SELinuxKeep},
			Description: "SELinux mode: permissive (switch to permissive mode, as upstream OSM does) or keep (leave the image's mode)."}})
	firewall := f.Firewall
	if firewall == NoFirewall {
		firewall = ""
	}
	return &node.OS{
		Utilities:    []string{abi.UtilityCloudInit},
		Options:      opts,
		Trust:        f.Trust,
		Handoff:      node.CloudInitHandoff(f.preInit),
		UnrunModules: node.CloudInitUnrunModules,
		Prepare:      Prepare,
		Install:      f.Install,
		Provisioning: f.Provisioning,
		Firewall:     firewall,
	}
}

// preInit: Azure's datasource needs the local stage again after `cloud-init clean`, and its ephemeral DHCP
// only works while the network service does not hold the interface.
func (f Family) preInit(r *node.Request, s *node.Script) {
	if r.Provider() != "azure" {
		return
	}
	if f.Network == NetworkSystemdNetworkd {
		s.Line("systemctl stop systemd-networkd.socket systemd-networkd || true")
		s.Line("ip addr flush dev eth0 && ip route flush dev eth0")
		s.Line(`cloud-init init --local || log "cloud-init init --local reported errors (exit $?)"`)
		s.Line("systemctl start systemd-networkd")
		s.Line("/usr/lib/systemd/systemd-networkd-wait-online --timeout=120 || true")
		return
	}
	s.Line("systemctl stop NetworkManager")
	s.Line("ip addr flush dev eth0 && ip route flush dev eth0")
	s.Line(`cloud-init init --local || log "cloud-init init --local reported errors (exit $?)"`)
	s.Line("systemctl start NetworkManager")
	s.Line("nm-online -q -t 120 || true")
}

// Prepare switches SELinux to permissive mode unless the profile keeps it.
func Prepare(r *node.Request, s *node.Script) {
	if r.Config[node.KeySELinux] != SELinuxPermissive {
		return
	}
	s.Section("SELinux permissive, now and after reboots.")
	s.Line("if command -v setenforce >/dev/null; then setenforce 0 || true; fi")
	s.Line("if [ -f /etc/selinux/config ]; then sed -i -e 's/^SELINUX=enforcing$/SELINUX=permissive/' /etc/selinux/config; fi")
}

// Provisioning adds Docker's repository when containerd comes from there. The repository file uses
// dnf's own $releasever and $basearch, as Docker's does.
func Provisioning(r *node.Request, cfg *abi.NodeConfig) error { return RHEL.Provisioning(r, cfg) }

// Provisioning adds Docker's repository for f.DockerRepoDistro when containerd comes from there.
func (f Family) Provisioning(r *node.Request, cfg *abi.NodeConfig) error {
	f = f.withDefaults()
	if r.Config[node.KeyContainerdSource] == node.ContainerdDocker {
		repo := strings.TrimRight(r.Config[node.KeyDockerRepoURL], "/") + "/" + f.DockerRepoDistro
		cfg.Files = append(cfg.Files, abi.PlainFile(DockerRepoPath, 0o644, `[osm-docker-ce-stable]
name=Docker CE stable (OSM)
baseurl=`+repo+`/$releasever/$basearch/stable
enabled=1
gpgcheck=1
gpgkey=`+repo+`/gpg
`))
	}
	return nil
}

// Install writes the package and containerd installation of osm-setup with RHEL's assumptions.
func Install(r *node.Request, s *node.Script) error { return RHEL.Install(r, s) }

// Install writes the package and containerd installation of osm-setup.
func (f Family) Install(r *node.Request, s *node.Script) error {
	f = f.withDefaults()
	pkgs := append(append(append([]string(nil), f.Packages...), providerPackages[r.Provider()]...), node.SplitList(r.Config[node.KeyExtraPackages])...)
	s.Section("Packages.")
	s.Line(`dnf_install() { ` + f.InstallCommand + ` "$@"; }`)
	if len(pkgs) > 0 {
		s.Line("dnf_install " + strings.Join(pkgs, " "))
	}
	for _, svc := range providerServices[r.Provider()] {
		s.Line("systemctl enable --now " + svc + ` || log "could not start ` + svc + `"`)
	}
	switch r.Config[node.KeyContainerdSource] {
	case node.ContainerdDocker:
		if f.NoVersionLock {
			s.Section("containerd.io from Docker's repository (" + DockerRepoPath + ") at the configured version.")
			s.Line("dnf_install " + node.Quote("containerd.io-"+r.Config[node.KeyContainerdVersion]))
			break
		}
		s.Section("containerd.io from Docker's repository (" + DockerRepoPath + "), locked at the configured version.")
		s.Line(`dnf_install 'dnf-command(versionlock)'`)
		s.Line("dnf_install " + node.Quote("containerd.io-"+r.Config[node.KeyContainerdVersion]))
		s.Line("dnf versionlock add containerd.io")
	case node.ContainerdDistro:
		if f.NoVersionLock {
			s.Section("The distribution's containerd package.")
			s.Line("dnf_install containerd")
			break
		}
		s.Section("The distribution's containerd package, locked at the installed version.")
		s.Line(`dnf_install 'dnf-command(versionlock)' containerd`)
		s.Line("dnf versionlock add containerd")
	}
	return nil
}
