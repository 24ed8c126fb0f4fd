// Package ignition is the family of image-based OSes provisioned by Ignition: Flatcar Container Linux, Fedora
// CoreOS and the images built like them (RHEL CoreOS, CentOS Stream CoreOS), openSUSE MicroOS and SLE Micro.
//
// What the family assumes, each a field of Image a vendor changes without copying the family:
//
//   - Provisioning utility: Ignition only (spec 3.x, which the host writes). The bootstrap stage's Ignition
//     config starts osm-bootstrap; the handoff stores the fetched provisioning config where the image's
//     Ignition reads one (a path, or a path on a labelled file system), makes the next boot a first boot
//     (touch a flag, remove a flag, or a kernel argument; read-only mounts remounted) and reboots
//     (Image.Boot, node.IgnitionBoot, node.FirstBootTrigger), and the units of
//     that second Ignition run are enabled although Ignition only presets them (node.IgnitionBoot.EnableUnits
//     or ResetMachineID).
//   - Packages: none are installed. The image ships containerd 2.x (containerd.service reading
//     /etc/containerd/config.toml), bash, curl, iptables, conntrack and socat; the kit puts the Kubernetes
//     binaries, CNI plugins and cri-tools into /opt/bin. Docker, where the image has it, is stopped.
//   - Network stack: static addresses (providerSpec.value.network) go to systemd-networkd (Flatcar,
//     NetworkNetworkd) or NetworkManager (Fedora CoreOS, NetworkNetworkManager); Image.Network.
//   - Trust store: Image.Trust (Flatcar: /etc/ssl/certs with update-ca-certificates; Fedora CoreOS:
//     /etc/pki/ca-trust with update-ca-trust; MicroOS: /etc/pki/trust/anchors).
//   - Metadata agent: on AWS the node name is the EC2 private DNS name the image's metadata agent writes
//     (Image.Metadata: Flatcar's coreos-metadata, Fedora CoreOS's afterburn; NoMetadataAgent for MicroOS),
//     and the kubelet waits for that agent.
//   - SELinux: left as the image has it unless Image.SELinuxPermissive.
//   - SSH user: Image.SSHUser (core on Flatcar and Fedora CoreOS, root on MicroOS).
//
// A zero field of Image means "the image has none", never Fedora CoreOS's value.
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
	// NetworkNone (or "") refuses machines that ask for a static address.
	NetworkNone = "none"
)

// Image is what differs between Ignition OSes. Every field is explicit: a zero field means the image has
// none of it (no trust store the kit writes to, no network stack for static addresses, no metadata agent, no
// SSH user of its own), never another image's value; Flatcar, FedoraCoreOS and MicroOS are complete values
// to start from.
type Image struct {
	// Boot is where the image's Ignition reads a config and how a boot becomes a first boot (required: a
	// zero Boot leaves the OS without a handoff, which the bootstrap stage refuses to render).
	Boot node.IgnitionBoot
	// Trust is the image's system CA trust store; zero: none, and machines of a controller with an extra CA
	// bundle (-host-ca-bundle) are refused.
	Trust node.Trust
	// Network is the stack static addresses are written for: NetworkNetworkd, NetworkNetworkManager, or
	// NetworkNone (also ""), which refuses machines that ask for a static address.
	Network string
	// Metadata is the image's metadata agent; zero (NoMetadataAgent): none.
	Metadata MetadataAgent
	// SELinuxPermissive switches SELinux to permissive mode in osm-setup, as upstream OSM does on Red Hat
	// systems (CNI and CSI plugins that write host paths without labels).
	SELinuxPermissive bool
	// SSHUser is the image's user the machine's SSH keys are authorized for (abi.Metadata.SSHUser); empty:
	// the host's default for Ignition, core.
	SSHUser string
}

// MetadataAgent is an image's metadata agent: on AWS the node name must be the EC2 private DNS name, which the
// agent writes to File under AWSHostnameKey, and the kubelet waits for Unit.
type MetadataAgent struct {
	Unit, File, AWSHostnameKey string
}

// NoMetadataAgent is an image without a metadata agent: the node name is the kit's (the machine's name, else
// `hostname -f`), on AWS too.
var NoMetadataAgent = MetadataAgent{}

// Flatcar is Flatcar Container Linux.
var Flatcar = Image{
	Boot:     node.FlatcarIgnition,
	Trust:    node.Trust{Path: "/etc/ssl/certs/osm-host-ca.pem", Update: "update-ca-certificates"},
	Network:  NetworkNetworkd,
	Metadata: MetadataAgent{Unit: "coreos-metadata.service", File: "/run/metadata/flatcar", AWSHostnameKey: "COREOS_EC2_HOSTNAME"},
	SSHUser:  "core",
}

// FedoraCoreOS is Fedora CoreOS.
var FedoraCoreOS = Image{
	Boot:              node.FedoraCoreOSIgnition,
	Trust:             node.Trust{Path: "/etc/pki/ca-trust/source/anchors/osm-host-ca.crt", Update: "update-ca-trust extract"},
	Network:           NetworkNetworkManager,
	Metadata:          MetadataAgent{Unit: "afterburn.service", File: "/run/metadata/afterburn", AWSHostnameKey: "AFTERBURN_AWS_HOSTNAME"},
	SELinuxPermissive: true,
	SSHUser:           "core",
}

// MicroOS is openSUSE MicroOS and SLE Micro: node.MicroOSIgnition, the trust store of SUSE systems, NetworkManager,
// SELinux left enforcing (the images ship a policy for containers), no metadata agent, and root as the SSH
// user (the images have no default user).
var MicroOS = Image{
	Boot:    node.MicroOSIgnition,
	Trust:   node.Trust{Path: "/etc/pki/trust/anchors/osm-host-ca.pem", Update: "update-ca-certificates"},
	Network: NetworkNetworkManager,
	SSHUser: "root",
}

// OS returns the family's OS description for img; the caller fills in Name, PluginVersion, Description,
// Versions and CloudProviders.
func OS(img Image) *node.OS {
	os := &node.OS{
		Utilities:    []string{abi.UtilityIgnition},
		Trust:        img.Trust,
		UnrunModules: node.IgnitionUnrunModules,
		Prepare:      img.Prepare,
		Provisioning: img.Provisioning,
		SSHUser:      img.SSHUser,
	}
	if img.Boot.ConfigPath != "" {
		os.Handoff = node.IgnitionHandoff(img.Boot)
	}
	if img.Metadata.File != "" && img.Metadata.AWSHostnameKey != "" {
		os.Hostname = img.Hostname
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
	if m := img.Metadata; r.Provider() == "aws" && m.File != "" && m.AWSHostnameKey != "" {
		s.Line(`ec2=$(sed -n 's/^` + m.AWSHostnameKey + `=//p' ` + m.File + ` 2>/dev/null || true)`)
		s.Line(`if [ -n "$ec2" ]; then name=$ec2; fi`)
	}
}

// Provisioning makes the kubelet wait for the metadata agent on AWS.
func (img Image) Provisioning(r *node.Request, cfg *abi.NodeConfig) error {
	if u := img.Metadata.Unit; r.Provider() == "aws" && u != "" {
		if k := cfg.Unit(node.KubeletUnit); k != nil {
			k.DropIns = append(k.DropIns, abi.DropIn{Name: "10-osm-aws-metadata.conf",
				Content: "[Unit]\nRequires=" + u + "\nAfter=" + u + "\n"})
		}
	}
	return nil
}
