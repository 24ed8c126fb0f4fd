package plugin

import (
	"context"
	"fmt"

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
	// ModuleDigest is the digest of the WebAssembly module that runs. Identify leaves it empty for images.
	ModuleDigest string `json:"moduleDigest"`
}

// Plugin is a resolved plugin bound to a profile's configuration. It does not keep its module loaded: each
// call pins the module for its duration, loading it again if the Manager unloaded it meanwhile, so holding a
// Plugin costs nothing and an unload never breaks a call.
type Plugin struct {
	Source Source
	// Config is the profile's plugin config with the schema's defaults filled in.
	Config map[string]string

	m    *Manager
	ref  Reference
	meta abi.Metadata
	// owner identifies this Plugin to the Manager (see Discard).
	owner     *byte
	validates bool
	encodes   bool
}

// Metadata returns the plugin's metadata.
func (p *Plugin) Metadata() abi.Metadata { return p.meta }

// Implements reports whether the plugin implements an optional export.
func (p *Plugin) Implements(export string) bool {
	switch export {
	case abi.ExportValidate:
		return p.validates
	case abi.ExportEncode:
		return p.encodes
	case abi.ExportMetadata, abi.ExportRender:
		return true
	}
	return false
}

// Render calls osm_render with the plugin's config; req.Config is ignored.
func (p *Plugin) Render(ctx context.Context, req *abi.RenderRequest) (*abi.RenderResponse, error) {
	r := *req
	r.Config = p.Config
	return call(ctx, p, func(mod *runtime.Module) (*abi.RenderResponse, error) { return mod.Render(ctx, &r) })
}

// Validate calls osm_validate with the plugin's config. A plugin without osm_validate accepts every profile
// its metadata matches, so Validate then returns an empty response.
func (p *Plugin) Validate(ctx context.Context, req *abi.ValidateRequest) (*abi.ValidateResponse, error) {
	if !p.validates {
		return &abi.ValidateResponse{ABIVersion: abi.Version}, nil
	}
	r := *req
	r.Config = p.Config
	return call(ctx, p, func(mod *runtime.Module) (*abi.ValidateResponse, error) { return mod.Validate(ctx, &r) })
}

// Encode calls osm_encode.
func (p *Plugin) Encode(ctx context.Context, req *abi.EncodeRequest) (*abi.EncodeResponse, error) {
	return call(ctx, p, func(mod *runtime.Module) (*abi.EncodeResponse, error) { return mod.Encode(ctx, req) })
}

// Discard tells the Manager this Plugin will not be called again, as after an admission review: the module
// is unloaded at once if this Plugin loaded it, no call is in flight and no other Plugin has used it. A
// rejected profile thereby leaves nothing loaded behind.
func (p *Plugin) Discard() {
	if p.Source.ModuleDigest != "" {
		p.m.discard(p.Source.ModuleDigest, p.owner)
	}
}

func call[T any](ctx context.Context, p *Plugin, fn func(*runtime.Module) (T, error)) (T, error) {
	var zero T
	mod, release, err := p.acquire(ctx)
	if err != nil {
		return zero, err
	}
	defer release()
	if p.Source.ModuleDigest != "" && mod.Digest() != p.Source.ModuleDigest {
		return zero, fmt.Errorf("plugin %s: module changed from %s to %s", p.ref, p.Source.ModuleDigest, mod.Digest())
	}
	return fn(mod)
}

// acquire pins the plugin's module, loading (built-in) or pulling and loading (image) it if needed.
func (p *Plugin) acquire(ctx context.Context) (*runtime.Module, func(), error) {
	if p.ref.Builtin != "" {
		return p.m.acquire(ctx, p.Source.ModuleDigest, p.owner, func(ctx context.Context, rt *runtime.Runtime) (*runtime.Module, error) {
			return p.m.loadBuiltin(ctx, rt, p.ref.Builtin)
		})
	}
	return p.m.acquireImage(ctx, p.ref, p.owner)
}

// Session is a sequence of calls on one sandbox instance for one MachineDeployment (runtime.Session), with the
// plugin's module pinned until Close.
type Session struct {
	p       *Plugin
	s       *runtime.Session
	release func()
}

// Session starts a session: the render of a MachineDeployment's stages then costs one instance, not one per
// call, and nothing of it survives Close.
func (p *Plugin) Session(ctx context.Context) (*Session, error) {
	mod, release, err := p.acquire(ctx)
	if err != nil {
		return nil, err
	}
	if p.Source.ModuleDigest != "" && mod.Digest() != p.Source.ModuleDigest {
		release()
		return nil, fmt.Errorf("plugin %s: module changed from %s to %s", p.ref, p.Source.ModuleDigest, mod.Digest())
	}
	s, err := mod.Session(ctx)
	if err != nil {
		release()
		return nil, err
	}
	return &Session{p: p, s: s, release: release}, nil
}

// Render calls osm_render with the plugin's config on the session's instance; req.Config is ignored.
func (s *Session) Render(ctx context.Context, req *abi.RenderRequest) (*abi.RenderResponse, error) {
	r := *req
	r.Config = s.p.Config
	return s.s.Render(ctx, &r)
}

// Close ends the session and unpins the module.
func (s *Session) Close() {
	if s.release == nil {
		return
	}
	s.s.Close()
	s.release()
	s.release = nil
}
