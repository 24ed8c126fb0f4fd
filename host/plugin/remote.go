package plugin

import (
	"context"

	"github.com/osmhq/osm/host/pluginhost"
	"github.com/osmhq/osm/sdk/abi"
)

// declared is what a module declared when it was loaded: its metadata and optional exports.
type declared struct {
	meta      abi.Metadata
	validates bool
	encodes   bool
}

// load has the plugin host load src (once: a loaded module answers at once) and remembers what it declared.
// The controller holds no compiled code and runs no guest code; every call crosses to the host (package
// pluginhost), which keeps the module, with its bytes for a host that must load it again.
func (m *Manager) load(ctx context.Context, src pluginhost.Module) (declared, error) {
	res, err := m.host.Load(ctx, src)
	if err != nil {
		return declared{}, err
	}
	d := declared{meta: res.Metadata, validates: res.Validates, encodes: res.Encodes}
	m.remember(src.Digest, d)
	return d, nil
}
