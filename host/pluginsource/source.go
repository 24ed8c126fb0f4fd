// Package pluginsource connects the render pipeline to the plugin manager: it turns a profile's
// spec.plugin into a loaded plugin, fetching the image pull Secret when the reference names one.
package pluginsource

import (
	"context"
	"errors"
	"fmt"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/plugin"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/sdk/runtime"
)

// PullSecretFunc returns the .dockerconfigjson content of the pull Secret name in namespace.
type PullSecretFunc func(ctx context.Context, namespace, name string) ([]byte, error)

// Source resolves plugin references through a plugin.Manager.
type Source struct {
	Manager *plugin.Manager
	// PullSecret fetches pull Secrets; nil means references with a pullSecret cannot be resolved.
	PullSecret PullSecretFunc
}

var _ render.PluginSource = (*Source)(nil)

// Resolve loads the plugin ref names. Errors carry the condition reason that fits: PluginNotFound for an
// unknown built-in, PluginPullFailed when the image or its pull Secret cannot be fetched, PluginInvalid when
// the module is not a plugin this host can run.
func (s *Source) Resolve(ctx context.Context, namespace string, ref *osmv1alpha1.PluginReference) (render.Plugin, error) {
	pref := plugin.Reference{Builtin: ref.Builtin, Image: ref.Image, Config: ref.Config}
	if ref.PullSecret != "" {
		if s.PullSecret == nil {
			return nil, &render.Error{Reason: osmv1alpha1.ReasonPluginPullFailed, Err: fmt.Errorf("plugin %s: pull Secret %q cannot be read here", pref, ref.PullSecret)}
		}
		data, err := s.PullSecret(ctx, namespace, ref.PullSecret)
		if err != nil {
			return nil, &render.Error{Reason: osmv1alpha1.ReasonPluginPullFailed, Err: fmt.Errorf("plugin %s: pull Secret %s/%s: %w", pref, namespace, ref.PullSecret, err)}
		}
		pref.PullSecret = data
	}
	p, err := s.Manager.Resolve(ctx, pref)
	if err != nil {
		return nil, &render.Error{Reason: reason(ref, err), Err: err}
	}
	return &loaded{Plugin: p}, nil
}

func reason(ref *osmv1alpha1.PluginReference, err error) string {
	var rerr *runtime.Error
	switch {
	case errors.As(err, &rerr):
		return osmv1alpha1.ReasonPluginInvalid
	case ref.Image != "":
		return osmv1alpha1.ReasonPluginPullFailed
	default:
		return osmv1alpha1.ReasonPluginNotFound
	}
}

// loaded adapts a plugin.Plugin to render.Plugin.
type loaded struct {
	*plugin.Plugin
}

func (l *loaded) Identity() osmv1alpha1.ResolvedPlugin {
	md := l.Metadata()
	id := osmv1alpha1.ResolvedPlugin{Name: md.Name, Version: md.Version, Digest: l.Source.ModuleDigest, Source: "builtin"}
	if l.Source.Image != "" {
		id.Source = l.Source.Image
	}
	return id
}
