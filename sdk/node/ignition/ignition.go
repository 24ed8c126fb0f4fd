// Package ignition is the family of image-based OSes provisioned by Ignition: Flatcar Container Linux, Fedora
// CoreOS and the images built like them (RHEL CoreOS, CentOS Stream CoreOS).
//
// What the family assumes, each a field of Image a vendor changes without copying the family:
//
//   - Provisioning utility: Ignition only (spec 3.x, which the host writes). The bootstrap stage's Ignition
//     config starts osm-bootstrap; the handoff stores the fetched provisioning config where the image's
//     Ignition reads one, flags a first boot and reboots (Image.Boot, node.IgnitionBoot), and the units of
//     that second Ignition run are enabled although Ignition only presets them (node.IgnitionBoot.EnableUnits
//     or ResetMachineID).
//   - Packages: none are installed. The image ships containerd 2.x (containerd.service reading
//     /etc/containerd/config.toml), bash, curl, iptables, conntrack and socat; the kit puts the Kubernetes
//     binaries, CNI plugins and cri-tools into /opt/bin. Docker, where the image has it, is stopped.
//   - Network stack: static addresses (providerSpec.value.network) go to systemd-networkd (Flatcar,
//     NetworkNetworkd) or NetworkManager (Fedora CoreOS, NetworkNetworkManager); Image.Network.
//   - Trust store: Image.Trust (Flatcar: /etc/ssl/certs with update-ca-certificates; Fedora CoreOS:
//     /etc/pki/ca-trust with update-ca-trust).
//   - Metadata agent: on AWS the node name is the EC2 private DNS name the image's metadata agent writes
//     (Image.MetadataUnit, MetadataFile, AWSHostnameKey: Flatcar's coreos-metadata, Fedora CoreOS's afterburn),
//     and the kubelet waits for that agent.
//   - SELinux: left as the image has it unless Image.SELinuxPermissive.
//
// A plugin for an Ignition OS is then
//
//	os := ignition.OS(ignition.FedoraCoreOS)
//	os.Name, os.PluginVersion, os.Versions = "fedora-coreos", "v0.1.0", []string{"42.*"}
//	os.CloudProviders = []string{"aws", "openstack"}
//
// and its tests check the boot contract with plugintest.Check and the encoded config with
// plugintest.IgnitionConfig and plugintest.IgnitionValidate.
package ignition

import (
	"fmt"
	"strings"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/node"
)

// Values of Image.Network.
const (
	// NetworkNetworkd writes a systemd-networkd .network file.
	NetworkNetworkd = "systemd-networkd"
	// NetworkNetworkManager writes a NetworkManager keyfile.
	NetworkNetworkManager = "NetworkManager"
	// NetworkNone refuses machines that ask for a static address.
	NetworkNone = "none"
)

// Image is what differs between Ignition OSes. A zero field takes Fedora CoreOS's value.
type Image struct {
	// Boot is where the image's Ignition reads a config and how a boot becomes a first boot.
	Boot node.IgnitionBoot
	// Trust is the image's system CA trust store.
	Trust node.Trust
	// Network is the stack static addresses are written for: NetworkNetworkd, NetworkNetworkManager or
	// NetworkNone.
	Network string
	// MetadataUnit is the image's metadata agent, which the kubelet waits for on AWS.
	MetadataUnit string
	// MetadataFile and AWSHostnameKey: the agent's environment file and the key of the EC2 host name in it.
	MetadataFile, AWSHostnameKey string
	// SELinuxPermissive switches SELinux to permissive mode in osm-setup, as upstream OSM does on Red Hat
	// systems (CNI and CSI plugins that write host paths without labels).
	SELinuxPermissive bool
}

// Flatcar is Flatcar Container Linux.
var Flatcar = Image{
	Boot:           node.FlatcarIgnition,
	Trust:          node.Trust{Path: "/etc/ssl/certs/osm-host-ca.pem", Update: "update-ca-certificates"},
	Network:        NetworkNetworkd,
	MetadataUnit:   "coreos-metadata.service",
	MetadataFile:   "/run/metadata/flatcar",
	AWSHostnameKey: "COREOS_EC2_HOSTNAME",
}

// FedoraCoreOS is Fedora CoreOS.
var FedoraCoreOS = Image{
	Boot:              node.FedoraCoreOSIgnition,
	Trust:             node.Trust{Path: "/etc/pki/ca-trust/source/anchors/osm-host-ca.crt", Update: "update-ca-trust extract"},
	Network:           NetworkNetworkManager,
	MetadataUnit:      "afterburn.service",
	MetadataFile:      "/run/metadata/afterburn",
	AWSHostnameKey:    "AFTERBURN_AWS_HOSTNAME",
	SELinuxPermissive: true,
}

// withDefaults fills the zero fields of img with Fedora CoreOS's values.
func (img Image) withDefaults() Image {
	d := FedoraCoreOS
	if img.Boot.ConfigPath == "" && img.Boot.FirstBootFlag == "" {
		img.Boot = d.Boot
	}
	if img.Trust.Path == "" {
		img.Trust = d.Trust
	}
	if img.Network == "" {
		img.Network = d.Network
	}
	if img.MetadataUnit == "" && img.MetadataFile == "" {
		img.MetadataUnit, img.MetadataFile, img.AWSHostnameKey = d.MetadataUnit, d.MetadataFile, d.AWSHostnameKey
	}
	return img
}

// OS returns the family's OS description for img; the caller fills in Name, PluginVersion, Description,
// Versions and CloudProviders.
func OS(img Image) *node.OS {
	img = img.withDefaults()
	os := &node.OS{
		Utilities:    []string{abi.UtilityIgnition},
		Trust:        img.Trust,
		Handoff:      node.IgnitionHandoff(img.Boot),
		UnrunModules: node.IgnitionUnrunModules,
		Prepare:      img.Prepare,
		Provisioning: img.Provisioning,
		Hostname:     img.Hostname,
	}
	switch img.Network {
	case NetworkNetworkd:
		os.Network = Networkd
	case NetworkNetworkManager:
		os.Network = NetworkManager
	}
	return os
}

// NetworkdPath is the systemd-networkd configuration of a static address.
const NetworkdPath = "/etc/systemd/network/10-osm-static.network"

// NetworkManagerPath is the NetworkManager keyfile of a static address.
const NetworkManagerPath = "/etc/NetworkManager/system-connections/osm-static.nmconnection"

func checkNetworkValues(n abi.Network) error {
	values := append([]string{n.CIDR, n.Gateway}, n.DNSServers...)
	for _, v := range values {
		if strings.ContainsAny(v, " \t\r\n;") {
			return fmt.Errorf("static network value %q contains white space or ';'", v)
		}
	}
	return nil
}

// Networkd configures the machine's static address for the NIC named en* or eth* (providers without DHCP
// attach exactly one) with systemd-networkd. Ignition writes it before networkd starts; a utility that applies
// it later (Flatcar's coreos-cloudinit) needs the restart this adds for cloud-init.
func Networkd(r *node.Request, cfg *abi.NodeConfig, s *node.Script) error {
	n := r.Ctx.Network
	if err := checkNetworkValues(n); err != nil {
		return err
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
	cfg.Files = append(cfg.Files, abi.PlainFile(NetworkdPath, 0o644, b.String()))
	if r.Utility() == abi.UtilityCloudInit {
		s.Line("systemctl restart systemd-networkd")
		s.Line("/usr/lib/systemd/systemd-networkd-wait-online --timeout=120 || true")
	}
	return nil
}

// NetworkManager configures the machine's static address with a NetworkManager keyfile (mode 0600, as
// NetworkManager requires) for the first Ethernet NIC. Ignition writes it before NetworkManager starts.
func NetworkManager(r *node.Request, cfg *abi.NodeConfig, _ *node.Script) error {
	n := r.Ctx.Network
	if err := checkNetworkValues(n); err != nil {
		return err
	}
	family := "ipv4"
	if strings.Contains(n.CIDR, ":") {
		family = "ipv6"
	}
	var b strings.Builder
	b.WriteString("[connection]\nid=osm-static\ntype=ethernet\nautoconnect-priority=100\n\n[" + family + "]\nmethod=manual\n")
	if n.CIDR != "" {
		b.WriteString("address1=" + n.CIDR)
		if n.Gateway != "" {
			b.WriteString("," + n.Gateway)
		}
		b.WriteString("\n")
	}
	if len(n.DNSServers) > 0 {
		b.WriteString("dns=" + strings.Join(n.DNSServers, ";") + ";\n")
	}
	cfg.Files = append(cfg.Files, abi.PlainFile(NetworkManagerPath, 0o600, b.String()))
	return nil
}

// Prepare stops Docker, which the images start by socket activation (the kubelet talks to containerd), and
// switches SELinux to permissive mode when the image asks for it.
func (img Image) Prepare(_ *node.Request, s *node.Script) {
	s.Section("Docker is not used; the kubelet talks to containerd directly.")
	s.Line("systemctl disable --now docker.socket docker.service 2>/dev/null || true")
	if img.SELinuxPermissive {
		s.Section("SELinux permissive, now and after reboots.")
		s.Line("if command -v setenforce >/dev/null; then setenforce 0 || true; fi")
		s.Line("if [ -f /etc/selinux/config ]; then sed -i -e 's/^SELINUX=enforcing$/SELINUX=permissive/' /etc/selinux/config; fi")
	}
}

// Hostname: on AWS the node name must be the private DNS name, which the image's metadata agent writes to
// MetadataFile (the kubelet waits for the agent, see Provisioning); without that file the kit's name stays.
func (img Image) Hostname(r *node.Request, s *node.Script) {
	if r.Provider() == "aws" && img.MetadataFile != "" && img.AWSHostnameKey != "" {
		s.Line(`ec2=$(sed -n 's/^` + img.AWSHostnameKey + `=//p' ` + img.MetadataFile + ` 2>/dev/null || true)`)
		s.Line(`if [ -n "$ec2" ]; then name=$ec2; fi`)
	}
}

// Provisioning makes the kubelet wait for the metadata agent on AWS.
func (img Image) Provisioning(r *node.Request, cfg *abi.NodeConfig) error {
	if r.Provider() == "aws" && img.MetadataUnit != "" {
		if k := cfg.Unit(node.KubeletUnit); k != nil {
			k.DropIns = append(k.DropIns, abi.DropIn{Name: "10-osm-aws-metadata.conf",
				Content: "[Unit]\nRequires=" + img.MetadataUnit + "\nAfter=" + img.MetadataUnit + "\n"})
		}
	}
	return nil
}
