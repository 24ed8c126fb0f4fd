package main

import (
	"github.com/osmhq/osm/plugins/release"
	"github.com/osmhq/osm/sdk/node"
	"github.com/osmhq/osm/sdk/node/dnf"
)

// OS describes Red Hat Enterprise Linux 9. The machine's subscription is registered by cloud-init's
// rh_subscription module, which the controller injects into both stages and the plugin keeps; containerd
// comes from Docker's RHEL repository because RHEL ships no containerd.
func OS() *node.OS {
	os := dnf.OS([]string{node.ContainerdDocker, node.ContainerdPreinstalled}, "2.2*")
	os.Name = "rhel"
	os.PluginVersion = release.Version
	os.Description = "Red Hat Enterprise Linux 9 nodes with containerd, provisioned by cloud-init"
	os.Versions = []string{"9", "9.*"}
	os.CloudProviders = []string{"aws", "azure", "gce", "kubevirt", "openstack", "vsphere"}
	return os
}
