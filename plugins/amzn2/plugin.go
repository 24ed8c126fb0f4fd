package main

import (
	"github.com/osmhq/osm/plugins/release"
	"github.com/osmhq/osm/sdk/node"
	"github.com/osmhq/osm/sdk/node/dnf"
)

// OS describes Amazon Linux 2023. The OS name stays "amzn2", which is what machine-controller calls Amazon
// Linux, and the version is "2023". containerd is Amazon's own package (Docker publishes none for Amazon
// Linux); it runs only on AWS.
func OS() *node.OS {
	os := dnf.OS([]string{node.ContainerdDistro, node.ContainerdPreinstalled}, "")
	os.Name = "amzn2"
	os.PluginVersion = release.Version
	os.Description = "Amazon Linux 2023 nodes with containerd, provisioned by cloud-init (osName amzn2 as in machine-controller)"
	os.Versions = []string{"2023", "2023.*"}
	os.CloudProviders = []string{"aws"}
	return os
}
