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
	// Render calls osm_render. Its failures, like Encode's, are *Error (PluginFailed) saying whether the
	// same request may pass later; host/plugin's failure table decides.
	Render(ctx context.Context, req *abi.RenderRequest) (*abi.RenderResponse, error)
	// Encode calls osm_encode; it fails if the plugin has no such export.
	Encode(ctx context.Context, req *abi.EncodeRequest) (*abi.EncodeResponse, error)
}

// PluginSource resolves a profile's plugin reference to a loaded plugin.
type PluginSource interface {
	// Resolve loads the plugin a profile in namespace refers to. Errors are *Error with a condition reason
	// (PluginNotFound, PluginPullFailed, PluginInvalid, PluginFailed, Signature*) and whether they may pass
	// (host/plugin's failure table decides); an error without one is reported as RenderFailed.
	Resolve(ctx context.Context, namespace string, ref *osmv1alpha1.PluginReference) (Plugin, error)
}

// PluginIdentifier is implemented by plugin sources that can name a profile's plugin module without loading
// it (no pull, no compile), for what every reconcile needs: status and render hashes. The digest is the
// module's for a built-in and the pinned manifest digest for an image; metadata is nil unless the module
// was loaded before.
type PluginIdentifier interface {
	Identify(ctx context.Context, namespace string, ref *osmv1alpha1.PluginReference) (osmv1alpha1.ResolvedPlugin, *abi.Metadata, error)
}
