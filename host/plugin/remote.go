package plugin

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/osmhq/osm/host/pluginhost"
	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/runtime"
)

// module is a module loaded in the plugin host: what it declared, and how to send it to a host again (a
// host killed for another module's sake comes back empty). The controller holds no compiled code and runs
// no guest code; every call crosses to the host (package pluginhost).
type module struct {
	src       pluginhost.Module
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
	return &module{src: src, meta: res.Metadata, validates: res.Validates, encodes: res.Encodes}, nil
}

// call encodes req as the ABI's JSON, runs export in the plugin host, and decodes and checks its answer.
func (m *Manager) callModule(ctx context.Context, mod *module, export string, req any, resp interface{ Check() error }) error {
	in, err := json.Marshal(req)
	if err != nil {
		return &runtime.Error{Plugin: mod.src.Name, Digest: mod.src.Digest, Export: export, Reason: runtime.ReasonInvalidInput, Detail: "cannot encode the request: " + err.Error(), Err: err}
	}
	// Outputs are remembered by module, export and request (memo.go): a hit skips the plugin host.
	memo := m.Memo().begin(ctx, mod.src.Digest, export, in)
	defer memo.end()
	out := memo.out
	if !memo.hit {
		if out, err = m.host.Call(ctx, mod.src, export, in); err != nil {
			return err
		}
	}
	if err := runtime.DecodeOutput(out, resp); err != nil {
		return &runtime.Error{Plugin: mod.src.Name, Digest: mod.src.Digest, Export: export, Reason: runtime.ReasonInvalidOutput,
			Detail: fmt.Sprintf("output is not a valid %s response: %v", export, err), Err: err}
	}
	if err := resp.Check(); err != nil {
		return &runtime.Error{Plugin: mod.src.Name, Digest: mod.src.Digest, Export: export, Reason: runtime.ReasonInvalidOutput, Detail: err.Error(), Err: err}
	}
	memo.keep(out)
	return nil
}
