package main

import (
	"github.com/osmhq/osm/plugins/release"
	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/node"
	"github.com/osmhq/osm/sdk/node/apt"
)

// OS describes Ubuntu 22.04 and 24.04 LTS.
func OS() *node.OS {
	os := apt.OS()
	os.Name = "ubuntu"
	os.PluginVersion = release.Version
	os.Description = "Ubuntu 22.04 and 24.04 LTS nodes with containerd, provisioned by cloud-init"
	os.Versions = []string{"22.04", "24.04"}
	os.CloudProviders = []string{"alibaba", "aws", "azure", "baremetal", "digitalocean", "edge", "equinixmetal", "gce", "hetzner",
		"kubevirt", "linode", "nutanix", "openstack", "scaleway", "vmware-cloud-director", "vsphere"}
	os.BootstrapPrepare = bootstrapPrepare
	return os
}

// bootstrapPrepare: Ubuntu 24.04 machines on Hetzner lose name resolution around the second cloud-init run
// (seen by upstream OSM even where netplan is not re-applied), which the fetch and every download depend
// on, so systemd-resolved gets public fallback servers. The script writes the drop-in itself rather than
// shipping it as a file: inside the gzipped script it costs a fraction of the user-data space.
func bootstrapPrepare(r *node.Request, _ *abi.NodeConfig, s *node.Script) {
	if r.Provider() != "hetzner" {
		return
	}
	s.Section("Fallback DNS servers for systemd-resolved on Hetzner.")
	s.Line("mkdir -p /etc/systemd/resolved.conf.d")
	s.Line(`printf '[Resolve]\nFallbackDNS=1.1.1.1 1.0.0.1 2606:4700:4700::1111 2606:4700:4700::1001\n' >/etc/systemd/resolved.conf.d/90-osm-fallback-dns.conf`)
	s.Line("systemctl restart systemd-resolved")
}
