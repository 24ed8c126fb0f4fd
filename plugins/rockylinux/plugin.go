package main

import (
	"github.com/osmhq/osm/plugins/release"
	"github.com/osmhq/osm/sdk/node"
	"github.com/osmhq/osm/sdk/node/dnf"
)

// OS describes Rocky Linux 9. containerd comes from Docker's RHEL repository, which serves Rocky Linux as
// well, because the distribution ships no containerd.
func OS() *node.OS {
	os := dnf.OS([]string{node.ContainerdDocker, node.ContainerdPreinstalled}, "2.2*")
	os.Name = "rockylinux"
	os.PluginVersion = release.Version
	os.Description = "Rocky Linux 9 nodes with containerd, provisioned by cloud-init"
	os.Versions = []string{"9", "9.*"}
	os.CloudProviders = []string{"aws", "azure", "digitalocean", "equinixmetal", "gce", "hetzner", "kubevirt", "openstack", "vsphere"}
	return os
}
