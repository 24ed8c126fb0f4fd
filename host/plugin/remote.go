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

// encodeRequest is req as the ABI's JSON.
func encodeRequest(name, digest, export string, req any) ([]byte, error) {
	in, err := json.Marshal(req)
	if err != nil {
		return nil, &runtime.Error{Plugin: name, Digest: digest, Export: export, Reason: runtime.ReasonInvalidInput, Detail: "cannot encode the request: " + err.Error(), Err: err}
	}
	return in, nil
}

// decodeResponse decodes and checks an export's answer.
func decodeResponse(name, digest, export string, out []byte, resp interface{ Check() error }) error {
	if err := runtime.DecodeOutput(out, resp); err != nil {
		return &runtime.Error{Plugin: name, Digest: digest, Export: export, Reason: runtime.ReasonInvalidOutput,
			Detail: fmt.Sprintf("output is not a valid %s response: %v", export, err), Err: err}
	}
	if err := resp.Check(); err != nil {
		return &runtime.Error{Plugin: name, Digest: digest, Export: export, Reason: runtime.ReasonInvalidOutput, Detail: err.Error(), Err: err}
	}
	return nil
}
