package plugin

import (
	"context"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/runtime"
)

// Source says where a resolved plugin came from; the OSP status shows it.
type Source struct {
	// Builtin is the built-in plugin's name, if it is one.
	Builtin string `json:"builtin,omitempty"`
	// Image is the pinned image reference, if it is one.
	Image string `json:"image,omitempty"`
	// ManifestDigest is the image's manifest digest (images only).
	ManifestDigest string `json:"manifestDigest,omitempty"`
	// ModuleDigest is the digest of the WebAssembly module that runs.
	ModuleDigest string `json:"moduleDigest"`
}

// Plugin is a loaded plugin bound to a profile's configuration. Calls through it carry that configuration;
// Module is there for anything else (metadata, raw calls).
type Plugin struct {
	Module *runtime.Module
	Source Source
	// Config is the profile's plugin config with the schema's defaults filled in.
	Config map[string]string
}

// Metadata returns the plugin's metadata.
func (p *Plugin) Metadata() abi.Metadata { return p.Module.Metadata() }

// Implements reports whether the plugin implements an optional export.
func (p *Plugin) Implements(export string) bool { return p.Module.Implements(export) }

// Render calls osm_render with the plugin's config; req.Config is ignored.
func (p *Plugin) Render(ctx context.Context, req *abi.RenderRequest) (*abi.RenderResponse, error) {
	r := *req
	r.Config = p.Config
	return p.Module.Render(ctx, &r)
}

// Validate calls osm_validate with the plugin's config. A plugin without osm_validate accepts every profile
// its metadata matches, so Validate then returns an empty response.
func (p *Plugin) Validate(ctx context.Context, req *abi.ValidateRequest) (*abi.ValidateResponse, error) {
	if !p.Implements(abi.ExportValidate) {
		return &abi.ValidateResponse{ABIVersion: abi.Version}, nil
	}
	r := *req
	r.Config = p.Config
	return p.Module.Validate(ctx, &r)
}

// Encode calls osm_encode.
func (p *Plugin) Encode(ctx context.Context, req *abi.EncodeRequest) (*abi.EncodeResponse, error) {
	return p.Module.Encode(ctx, req)
}
