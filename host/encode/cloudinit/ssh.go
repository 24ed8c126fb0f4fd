package cloudinit

import (
	"k8s.io/utils/ptr"

	"github.com/osmhq/osm/sdk/abi"
)

// SSHKeys authorizes the configuration's keys for the image's default user and turns password logins off, as
// upstream OSM does.
func SSHKeys(doc *Document, cfg *abi.NodeConfig) {
	doc.SSHPwauth = ptr.To(false)
	doc.SSHAuthorizedKeys = append(doc.SSHAuthorizedKeys, cfg.UserSSHKeys...)
}
