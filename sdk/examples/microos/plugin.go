package main

import (
	"github.com/osmhq/osm/sdk/node"
	"github.com/osmhq/osm/sdk/node/ignition"
)

// OS describes MicroOS. Everything about its first boot is data of the Ignition family (ignition.MicroOS:
// the user config on the file system labelled "ignition", a first boot made by removing
// /boot/writable/firstboot_happened, the SUSE trust store, root as the SSH user); what remains is the host
// firewall and the packages.
func OS() *node.OS {
	os := ignition.OS(ignition.MicroOS)
	os.Name, os.PluginVersion = "microos", "v0.1.0"
	os.Description = "openSUSE MicroOS and SLE Micro nodes provisioned by Ignition, packages by transactional-update"
	os.Versions = []string{"tumbleweed", "6.*"}
	os.CloudProviders = []string{"aws", "edge", "kubevirt", "openstack", "vsphere"}
	os.Firewall = "firewalld.service"
	os.Options = []node.Option{node.ExtraPackagesOption()}
	os.Install = install
	return os
}

// basePackages are what the kubelet, kube-proxy and the kit need beyond the image, with the command that
// tells whether each is there.
var basePackages = [][2]string{{"containerd", "containerd"}, {"conntrack-tools", "conntrack"}, {"socat", "socat"},
	{"ethtool", "ethtool"}, {"iptables", "iptables"}}

// install writes the package step of osm-setup. The root file system is a read-only snapshot: packages go
// into a new snapshot with transactional-update, which `transactional-update apply` makes the running one
// without a reboot. Only missing packages are installed, so a re-run of osm-setup (it restarts after a
// failure) does not stack up snapshots, and an image that ships them all is left alone.
func install(r *node.Request, s *node.Script) error {
	s.Section("Packages into a new snapshot, applied to the running system.")
	s.Line("missing=")
	for _, p := range basePackages {
		s.Line("command -v " + p[1] + " >/dev/null || missing=\"$missing " + p[0] + "\"")
	}
	for _, p := range node.SplitList(r.Config[node.KeyExtraPackages]) {
		s.Line("rpm -q --quiet " + node.Quote(p) + " 2>/dev/null || missing=\"$missing \"" + node.Quote(p))
	}
	s.Line(`if [ -n "$missing" ]; then`)
	s.Line(`  log "installing$missing with transactional-update"`)
	s.Line(`  transactional-update --non-interactive pkg install --no-recommends $missing`)
	s.Line(`  transactional-update --non-interactive apply`)
	s.Line(`fi`)
	return nil
}
