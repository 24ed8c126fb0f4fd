package plugin

import (
	"context"

	"github.com/osmhq/osm/host/pluginhost"
	"github.com/osmhq/osm/sdk/abi"
)

// module is a module loaded in the plugin host: what it declared, and how to send it to a host again (a
// host killed for another module's sake comes back empty). The controller holds no compiled code and runs
// no guest code; every call crosses to the host (package pluginhost).
type module struct {
	src pluginhost.Module
	declared
}

// declared is what a module declared when it was loaded: its metadata and optional exports.
type declared struct {
	meta      abi.Metadata
	validates bool
	encodes   bool
}

func (mod *module) Digest() string         { return mod.src.Digest }
func (mod *module) Metadata() abi.Metadata { return mod.meta }

// load sends src to the plugin host and reads what it declared.
func (m *Manager) loadModule(ctx context.Context, src pluginhost.Module) (*module, error) {
	res, err := m.host.Load(ctx, src)
	if err != nil {
		return nil, err
	}
	return &module{src: src, declared: declared{meta: res.Metadata, validates: res.Validates, encodes: res.Encodes}}, nil
}
