package ignition

import (
	"github.com/coreos/ignition/v2/config/v3_3/types"

	"github.com/osmhq/osm/sdk/abi"
)

// DefaultUser is the default user on Flatcar.
const DefaultUser = "core"

// Users authorizes the configuration's SSH keys for the default user.
func Users(cfg *abi.NodeConfig, opts Options) []types.PasswdUser {
	if len(cfg.UserSSHKeys) == 0 {
		return nil
	}
	name := opts.User
	if name == "" {
		name = DefaultUser
	}
	user := types.PasswdUser{Name: name}
	for _, k := range cfg.UserSSHKeys {
		user.SSHAuthorizedKeys = append(user.SSHAuthorizedKeys, types.SSHAuthorizedKey(k))
	}
	return []types.PasswdUser{user}
}
