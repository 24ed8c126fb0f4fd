package main

import (
	"github.com/osmhq/osm/plugins/release"
	"github.com/osmhq/osm/sdk/node"
	"github.com/osmhq/osm/sdk/node/apt"
)

// OS describes Debian 12 (bookworm) and 13 (trixie). Debian 12 ships cloud-init 22.4, so the bootstrap's
// handoff uses the pre-24.1 command line there; containerd comes from Docker's repository by default
// because Debian's own package is older than the 2.0 the controller's configuration needs.
func OS() *node.OS {
	os := apt.OS()
	os.Name = "debian"
	os.PluginVersion = release.Version
	os.Description = "Debian 12 and 13 nodes with containerd, provisioned by cloud-init"
	os.Versions = []string{"12", "13"}
	os.CloudProviders = []string{"aws", "azure", "baremetal", "digitalocean", "edge", "gce", "hetzner", "kubevirt", "linode",
		"openstack", "scaleway", "vsphere"}
	return os
}
