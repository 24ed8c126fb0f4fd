// Package dnf is the Red Hat family (RHEL, Rocky Linux, Amazon Linux 2023) part of the default OS plugins:
// packages and containerd with dnf, SELinux and firewalld, the Red Hat trust store, and cloud-init as
// provisioning utility.
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

// OS returns the Red Hat family's OS description. sources are the accepted containerdSource values (the first
// is the default) and containerdVersion the default package version pattern.
func OS(sources []string, containerdVersion string) *node.OS {
	opts := node.ContainerdOptions(sources, containerdVersion)
	opts = append(opts, node.ExtraPackagesOption(),
		node.Option{ConfigOption: abi.ConfigOption{Name: node.KeySELinux, Type: abi.ConfigEnum, Default: SELinuxPermissive, Enum: []string{SELinuxPermissive, SELinuxKeep},
			Description: "SELinux mode: permissive (switch to permissive mode, as upstream OSM does) or keep (leave the image's mode)."}})
	return &node.OS{
		Utilities:    []string{abi.UtilityCloudInit},
		Options:      opts,
		Trust:        node.Trust{Path: "/etc/pki/ca-trust/source/anchors/osm-host-ca.crt", Update: "update-ca-trust extract"},
		Handoff:      node.CloudInitHandoff(preInit),
		UnrunModules: node.CloudInitUnrunModules,
		Prepare:      Prepare,
		Install:      Install,
		Provisioning: Provisioning,
		Firewall:     "firewalld.service",
	}
}

// preInit: Azure's datasource needs the local stage again after `cloud-init clean`, and its ephemeral DHCP
// only works while NetworkManager does not hold the interface.
func preInit(r *node.Request, s *node.Script) {
	if r.Provider() != "azure" {
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
func Provisioning(r *node.Request, cfg *abi.NodeConfig) error {
	if r.Config[node.KeyContainerdSource] == node.ContainerdDocker {
		repo := strings.TrimRight(r.Config[node.KeyDockerRepoURL], "/") + "/rhel"
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

// Install writes the package and containerd installation of osm-setup.
func Install(r *node.Request, s *node.Script) error {
	pkgs := append(append(append([]string(nil), basePackages...), providerPackages[r.Provider()]...), node.SplitList(r.Config[node.KeyExtraPackages])...)
	s.Section("Packages.")
	s.Line(`dnf_install() { dnf install -y --setopt=install_weak_deps=False --setopt=retries=10 "$@"; }`)
	s.Line("dnf_install " + strings.Join(pkgs, " "))
	for _, svc := range providerServices[r.Provider()] {
		s.Line("systemctl enable --now " + svc + ` || log "could not start ` + svc + `"`)
	}
	switch r.Config[node.KeyContainerdSource] {
	case node.ContainerdDocker:
		s.Section("containerd.io from Docker's repository (" + DockerRepoPath + "), locked at the configured version.")
		s.Line(`dnf_install 'dnf-command(versionlock)'`)
		s.Line("dnf_install " + node.Quote("containerd.io-"+r.Config[node.KeyContainerdVersion]))
		s.Line("dnf versionlock add containerd.io")
	case node.ContainerdDistro:
		s.Section("The distribution's containerd package, locked at the installed version.")
		s.Line(`dnf_install 'dnf-command(versionlock)' containerd`)
		s.Line("dnf versionlock add containerd")
	}
	return nil
}
