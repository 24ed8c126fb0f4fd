package main

import (
	"fmt"
	"strings"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/node"
)

// Keys of this plugin's own configuration, next to the kit's common ones (CNI, cri-tools, journald).
const (
	keyContainerdVersion = "containerdVersion"
	keyContainerdBaseURL = "containerdBaseURL"
	// secretRegistrationCode is the SLES registration code, a plugin secret: the profile hands it over from a
	// Secret (spec.plugin.secrets), the plugin only ever sees a placeholder. openSUSE Leap needs none.
	secretRegistrationCode = "registration-code"
)

// regcodePath holds the registration code on the node (root only) for SUSEConnect.
const regcodePath = "/etc/osm/suse-regcode"

// OS describes openSUSE Leap 15.6 and SLES 15 SP6. What differs from the distributions the kit's apt and dnf
// families cover: packages come from zypper; the distribution's containerd is 1.7, older than the 2.0 the
// controller's configuration needs, so containerd comes from its upstream release, verified with its
// published SHA-256; CAs go to /etc/pki/trust/anchors; the host firewall is firewalld; a static network is
// configured the wicked way (ifcfg files).
func OS() *node.OS {
	return &node.OS{
		Name:           "opensuse",
		PluginVersion:  "v0.1.0",
		Description:    "openSUSE Leap 15.6 and SLES 15 SP6 nodes with containerd 2, provisioned by cloud-init",
		Versions:       []string{"15.6", "15-SP6"},
		Utilities:      []string{abi.UtilityCloudInit},
		CloudProviders: []string{"aws", "azure", "gce", "hetzner", "kubevirt", "openstack", "vsphere"},
		Options: []node.Option{
			{ConfigOption: abi.ConfigOption{Name: keyContainerdVersion, Default: "2.1.4",
				Description: "containerd release installed to /usr/local/bin, e.g. 2.1.4 (2.0 or newer)."}, Check: containerdVersion},
			{ConfigOption: abi.ConfigOption{Name: keyContainerdBaseURL, Default: "https://github.com/containerd/containerd/releases/download",
				Description: "Where containerd is downloaded from: <url>/v<version>/containerd-<version>-linux-<arch>.tar.gz and .sha256sum."}, Check: node.BaseURL},
			node.ExtraPackagesOption(),
			node.SecretOption(secretRegistrationCode, "SLES registration code: the node registers with SUSEConnect before installing packages.", false),
		},
		Trust:        node.Trust{Path: "/etc/pki/trust/anchors/osm-host-ca.pem", Update: "update-ca-certificates"},
		Firewall:     "firewalld.service",
		Network:      wickedNetwork,
		Handoff:      node.CloudInitHandoff(nil),
		UnrunModules: node.CloudInitUnrunModules,
		Install:      install,
		Provisioning: provisioning,
	}
}

func containerdVersion(v string) error {
	if err := node.ReleaseVersion("v" + v); err != nil || strings.HasPrefix(v, "1.") {
		return fmt.Errorf("%q is not a containerd 2.x release version: use e.g. 2.1.4", v)
	}
	return nil
}

// basePackages: tools the kubelet and kube-proxy call, NFS client support, runc for containerd, and tar for
// the release archives.
var basePackages = []string{"conntrack-tools", "ethtool", "iptables", "ipvsadm", "nfs-client", "runc", "socat", "tar"}

// install writes the zypper run and containerd's installation into osm-setup.
func install(r *node.Request, s *node.Script) error {
	pkgs := append(append([]string(nil), basePackages...), node.SplitList(r.Config[node.KeyExtraPackages])...)
	if _, ok := r.Ctx.Secrets.Plugin[secretRegistrationCode]; ok {
		s.Section("SLES: register with the code the profile hands over (" + regcodePath + "), once.")
		s.Line("if [ -s " + regcodePath + " ]; then SUSEConnect --regcode \"$(cat " + regcodePath + ")\" && rm -f " + regcodePath + "; fi")
	}
	s.Section("Packages, waiting up to 10 minutes for the image's own zypper runs to release the lock.")
	s.Line("export ZYPP_LOCK_TIMEOUT=600")
	s.Line("zypper --non-interactive --gpg-auto-import-keys refresh")
	s.Line("zypper --non-interactive install --no-recommends " + strings.Join(pkgs, " "))

	s.Section("containerd from its upstream release (the distribution's is 1.7).")
	s.Line("ctr_version=" + node.Quote(r.Config[keyContainerdVersion]))
	s.Line("ctr_base=" + node.Quote(strings.TrimRight(r.Config[keyContainerdBaseURL], "/")))
	s.Raw(`if [ "$(cat /usr/local/bin/.containerd-version 2>/dev/null)" != "$ctr_version" ]; then
  f=containerd-$ctr_version-linux-$arch.tar.gz
  download "$ctr_base/v$ctr_version/$f" "$tmp/$f" "$ctr_base/v$ctr_version/$f.sha256sum"
  tar -xzf "$tmp/$f" -C /usr/local
  echo "$ctr_version" >/usr/local/bin/.containerd-version
fi
`)
	return nil
}

// provisioning adds what the provisioning stage needs beyond the kit's: containerd's unit and, for SLES, the
// registration code's file. The code is the placeholder, copied verbatim into plain file content; the host
// puts the real code there only in the user-data Secret.
func provisioning(r *node.Request, cfg *abi.NodeConfig) error {
	if code, ok := r.Ctx.Secrets.Plugin[secretRegistrationCode]; ok {
		cfg.SetFile(abi.PlainFile(regcodePath, 0o600, code))
	}
	return containerdUnit(r, cfg)
}

// containerdUnit gives the kit's containerd.service (a drop-in elsewhere) the unit the release does not ship.
func containerdUnit(_ *node.Request, cfg *abi.NodeConfig) error {
	u := cfg.Unit(node.ContainerdUnit)
	if u == nil {
		return fmt.Errorf("plugin bug: no %s unit", node.ContainerdUnit)
	}
	content := `[Unit]
Description=containerd container runtime
After=network.target local-fs.target

[Service]
ExecStartPre=-/sbin/modprobe overlay
ExecStart=/usr/local/bin/containerd --config ` + node.ContainerdConfigPath + `
Type=notify
Delegate=yes
KillMode=process
OOMScoreAdjust=-999

[Install]
WantedBy=multi-user.target
`
	u.Content = &content
	return nil
}

// wickedNetwork writes a static address for eth0 in wicked's ifcfg format and applies it before the fetch.
func wickedNetwork(r *node.Request, cfg *abi.NodeConfig, s *node.Script) error {
	n := r.Ctx.Network
	for _, v := range append([]string{n.CIDR, n.Gateway}, n.DNSServers...) {
		if strings.ContainsAny(v, " \t\r\n'\"\\$`") {
			return fmt.Errorf("static network value %q is not an address", v)
		}
	}
	cfg.Files = append(cfg.Files,
		abi.PlainFile("/etc/sysconfig/network/ifcfg-eth0", 0o644, "BOOTPROTO='static'\nSTARTMODE='auto'\nIPADDR='"+n.CIDR+"'\n"),
		abi.PlainFile("/etc/sysconfig/network/routes", 0o644, "default "+n.Gateway+" - -\n"))
	if len(n.DNSServers) > 0 {
		s.Line(`sed -i "s/^NETCONFIG_DNS_STATIC_SERVERS=.*/NETCONFIG_DNS_STATIC_SERVERS='` + strings.Join(n.DNSServers, " ") + `'/" /etc/sysconfig/network/config`)
		s.Line("netconfig update -f")
	}
	s.Line("wicked ifreload all")
	return nil
}
