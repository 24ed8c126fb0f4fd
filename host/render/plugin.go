package render

import (
	"context"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/sdk/abi"
)

// Plugin is a loaded OS plugin, as the render pipeline uses it. Calls are safe for concurrent use; the plugin
// runtime gives each call its own sandbox instance.
type Plugin interface {
	// Metadata is what the plugin declared when it was loaded.
	Metadata() abi.Metadata
	// Identity says exactly which module this is (name, version, source, digest).
	Identity() osmv1alpha1.ResolvedPlugin
	// Render calls osm_render.
	Render(ctx context.Context, req *abi.RenderRequest) (*abi.RenderResponse, error)
	// Encode calls osm_encode; it fails if the plugin has no such export.
	Encode(ctx context.Context, req *abi.EncodeRequest) (*abi.EncodeResponse, error)
}

// PluginSession renders several stages of one MachineDeployment on one sandbox instance. Close discards it.
type PluginSession interface {
	Render(ctx context.Context, req *abi.RenderRequest) (*abi.RenderResponse, error)
	Close()
}

// sessionPlugin is a Plugin that can render a MachineDeployment's stages in one session, paying for one sandbox
// instance instead of one per stage.
type sessionPlugin interface {
	Session(ctx context.Context) (PluginSession, error)
}

// withSession returns p rendering through one session, and the function that ends it; p itself when it has no
// sessions.
func withSession(ctx context.Context, p Plugin) (Plugin, func(), error) {
	sp, ok := p.(sessionPlugin)
	if !ok {
		return p, func() {}, nil
	}
	s, err := sp.Session(ctx)
	if err != nil {
		return nil, nil, pluginFailed(err)
	}
	return sessionRender{Plugin: p, s: s}, s.Close, nil
}

// sessionRender is a Plugin whose renders go to a session.
type sessionRender struct {
	Plugin
	s PluginSession
}

func (r sessionRender) Render(ctx context.Context, req *abi.RenderRequest) (*abi.RenderResponse, error) {
	return r.s.Render(ctx, req)
}

// PluginSource resolves a profile's plugin reference to a loaded plugin.
type PluginSource interface {
	// Resolve loads the plugin a profile in namespace refers to. Errors carry a condition reason (see
	// Reason): PluginNotFound, PluginPullFailed or PluginInvalid.
	Resolve(ctx context.Context, namespace string, ref *osmv1alpha1.PluginReference) (Plugin, error)
}

// PluginIdentifier is implemented by plugin sources that can name a profile's plugin module without loading
// it (no pull, no compile), for what every reconcile needs: status and render hashes. The digest is the
// module's for a built-in and the pinned manifest digest for an image; metadata is nil unless the module
// was loaded before.
type PluginIdentifier interface {
	Identify(ctx context.Context, namespace string, ref *osmv1alpha1.PluginReference) (osmv1alpha1.ResolvedPlugin, *abi.Metadata, error)
}
