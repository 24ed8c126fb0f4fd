package plugin

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/osmhq/osm/host/pluginhost"
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

// Plugin is a resolved plugin bound to a profile's configuration. It does not keep its module loaded: the
// plugin host pins the module for each call's duration, loading it again if it was unloaded meanwhile, so
// holding a Plugin costs nothing and an unload never breaks a call.
type Plugin struct {
	Source Source
	// Config is the profile's plugin config with the schema's defaults filled in.
	Config map[string]string

	m    *Manager
	ref  Reference
	meta abi.Metadata
	// loaded says Resolve loaded the module for this Plugin (see Discard).
	loaded    bool
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
	r := *req // a shallow copy: callers may share one request between goroutines
	r.Config = p.Config
	return p.RenderAsGiven(ctx, &r)
}

// RenderAsGiven calls osm_render with req as it is, its Config included: for tools that replay a captured or
// hand-written request (osmctl plugin run).
func (p *Plugin) RenderAsGiven(ctx context.Context, req *abi.RenderRequest) (*abi.RenderResponse, error) {
	r := *req
	r.ABIVersion = cmp.Or(r.ABIVersion, abi.Version)
	return send[abi.RenderResponse](ctx, p, abi.ExportRender, &r)
}

// Digest is the digest of the module that runs.
func (p *Plugin) Digest() string { return p.Source.ModuleDigest }

// Validate calls osm_validate with the plugin's config. A plugin without osm_validate accepts every profile
// its metadata matches, so Validate then returns an empty response.
func (p *Plugin) Validate(ctx context.Context, req *abi.ValidateRequest) (*abi.ValidateResponse, error) {
	if !p.validates {
		return &abi.ValidateResponse{ABIVersion: abi.Version}, nil
	}
	r := *req
	r.Config = p.Config
	r.ABIVersion = cmp.Or(r.ABIVersion, abi.Version)
	return send[abi.ValidateResponse](ctx, p, abi.ExportValidate, &r)
}

// Encode calls osm_encode.
func (p *Plugin) Encode(ctx context.Context, req *abi.EncodeRequest) (*abi.EncodeResponse, error) {
	if !p.encodes {
		return nil, callFailure(&runtime.Error{Plugin: p.meta.Name, Digest: p.Source.ModuleDigest, Export: abi.ExportEncode, Reason: runtime.ReasonMissingExport, Detail: "plugin does not implement " + abi.ExportEncode})
	}
	r := *req
	r.ABIVersion = cmp.Or(r.ABIVersion, abi.Version)
	return send[abi.EncodeResponse](ctx, p, abi.ExportEncode, &r)
}

// Discard tells the Manager this Plugin will not be called again, as after an admission review: the module
// is unloaded at once if this Plugin's Resolve loaded it and no call is in flight (pluginhost's Unload). A
// rejected profile thereby leaves nothing loaded behind; a render that used the module meanwhile loads it
// again from the compilation cache.
func (p *Plugin) Discard() {
	if p.loaded && p.Source.ModuleDigest != "" {
		p.m.host.Unload(p.Source.ModuleDigest)
	}
}

// send is the one way a request reaches a plugin: it encodes req as the ABI's JSON (encoding/json: the
// controller parses untrusted plugin output with the standard library only) and answers from the memo
// (memo.go) with a copy of a remembered response when it can: a hit neither loads the module nor reaches the
// plugin host, so the module of a profile whose MachineDeployments all render alike can stay unloaded.
// Otherwise it runs export in the plugin host, which pins the module for the call's duration (loading it,
// or pulling it first, if it was unloaded meanwhile), and decodes and checks the answer, which the memo then
// remembers. Its failures are callFailure's.
func send[Resp any, PResp interface {
	*Resp
	Check() error
}](ctx context.Context, p *Plugin, export string, req any) (*Resp, error) {
	name, digest := p.name(), p.Source.ModuleDigest
	fail := func(reason runtime.Reason, detail string, err error) (*Resp, error) {
		return nil, callFailure(&runtime.Error{Plugin: name, Digest: digest, Export: export, Reason: reason, Detail: detail, Err: err})
	}
	in, err := json.Marshal(req)
	if err != nil {
		return fail(runtime.ReasonInvalidInput, "cannot encode the request: "+err.Error(), err)
	}
	memo := p.m.Memo().begin(ctx, digest, export, in)
	defer memo.end()
	if memo.hit {
		return memo.resp.(*Resp), nil
	}
	src, err := p.module(ctx)
	if err != nil {
		return nil, callFailure(err)
	}
	if digest != "" && src.Digest != digest {
		return nil, callFailure(fmt.Errorf("plugin %s: module changed from %s to %s", p.ref, digest, src.Digest))
	}
	out, err := p.m.host.Call(ctx, src, export, in)
	if err != nil {
		return nil, callFailure(err)
	}
	resp := new(Resp)
	if err := json.Unmarshal(out, resp); err != nil {
		return fail(runtime.ReasonInvalidOutput, fmt.Sprintf("output is not a valid %s response: %v", export, err), err)
	}
	if err := PResp(resp).Check(); err != nil {
		return fail(runtime.ReasonInvalidOutput, err.Error(), err)
	}
	memo.keep(resp, len(out))
	return resp, nil
}

// name is what the plugin host calls the module: its label, built-in name or image repository.
func (p *Plugin) name() string {
	if p.ref.Builtin != "" {
		return cmp.Or(p.ref.Label, p.ref.Builtin)
	}
	repo, _, _ := strings.Cut(p.ref.Image, "@")
	return repo
}

// module returns the plugin's module as the plugin host takes it: a built-in's from the executable, an
// image's as a plugin host loaded it, or pulled (and loaded) again if none has it.
func (p *Plugin) module(ctx context.Context) (pluginhost.Module, error) {
	if p.ref.Builtin != "" {
		return p.m.builtinSource(p.ref.Builtin, p.ref.Label, p.Source.ModuleDigest, p.ref.Namespace), nil
	}
	return p.m.imageModule(ctx, p.ref)
}
