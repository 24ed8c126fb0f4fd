// Package pluginsource connects the render pipeline to the plugin manager: it turns a profile's
// spec.plugin into a loaded plugin, fetching the image pull Secret when the reference names one, or names the
// plugin's module without loading it (Identify) for status and render hashes.
package pluginsource

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/plugin"
	"github.com/osmhq/osm/host/pluginhost"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/signature/policy"
	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/runtime"
)

// PullSecretFunc returns the .dockerconfigjson content of the pull Secret name in namespace.
type PullSecretFunc func(ctx context.Context, namespace, name string) ([]byte, error)

// Source resolves plugin references through a plugin.Manager.
type Source struct {
	Manager *plugin.Manager
	// PullSecret fetches pull Secrets; nil means references with a pullSecret cannot be resolved.
	PullSecret PullSecretFunc
	// WaitForPulls makes resolutions wait for image pulls (each bounded by the pull timeout) instead of
	// returning a plugin.PendingError: for admission reviews and the CLI, where someone waits for the answer.
	// Reconcilers leave it unset, so a slow registry never holds a worker.
	WaitForPulls bool
	// Verification returns the Verifier of a profile namespace's plugin image (package policy),
	// or nil when the image is not verified; nil means no image is.
	Verification func(ctx context.Context, namespace, image string) (plugin.Verifier, error)
}

var (
	_ render.PluginSource     = (*Source)(nil)
	_ render.PluginIdentifier = (*Source)(nil)
)

// Resolve loads the plugin ref names, checking the cheap things first: the reference, then the pull Secret,
// then the verification policy, then the pull and the load. Errors carry the condition reason that fits: PluginNotFound for an unknown
// built-in, PluginPullFailed when the image or its pull Secret cannot be fetched (or is still being pulled:
// errors.Is(err, plugin.ErrPending)), PluginInvalid when the module is not a plugin this host can run.
func (s *Source) Resolve(ctx context.Context, namespace string, ref *osmv1alpha1.PluginReference) (render.Plugin, error) {
	pref := plugin.Reference{Builtin: ref.Builtin, Image: ref.Image, Config: ref.Config, Namespace: namespace}
	if _, err := s.Manager.Identify(pref); err != nil {
		return nil, sourceError(ref, err)
	}
	if ref.PullSecret != "" {
		if s.PullSecret == nil {
			return nil, &render.Error{Reason: osmv1alpha1.ReasonPluginPullFailed, Err: fmt.Errorf("plugin %s: pull Secret %q cannot be read here", pref, ref.PullSecret)}
		}
		data, err := s.PullSecret(ctx, namespace, ref.PullSecret)
		if err != nil {
			return nil, &render.Error{Reason: osmv1alpha1.ReasonPluginPullFailed, Err: fmt.Errorf("plugin %s: pull Secret %s/%s: %w", pref, namespace, ref.PullSecret, err), Transient: true}
		}
		pref.PullSecret = data
	}
	if ref.Image != "" && s.Verification != nil {
		v, err := s.Verification(ctx, namespace, ref.Image)
		if err != nil {
			return nil, &render.Error{Reason: osmv1alpha1.ReasonPluginPullFailed, Err: fmt.Errorf("plugin %s: %w", pref, err), Transient: true}
		}
		pref.Verify = v
	}
	if s.WaitForPulls {
		ctx = plugin.WaitForPulls(ctx)
	}
	p, err := s.Manager.Resolve(ctx, pref)
	if err != nil {
		return nil, sourceError(ref, err)
	}
	return &loaded{Plugin: p}, nil
}

// Identify names the module ref refers to without pulling, compiling or reading a Secret: a built-in by the
// digest of its embedded bytes, an image by its pinned manifest digest. Name and Version come from the
// plugin's metadata once it has been loaded in this process; before that, Name is the built-in's name or the
// image's repository name, and the metadata is nil.
func (s *Source) Identify(_ context.Context, _ string, ref *osmv1alpha1.PluginReference) (osmv1alpha1.ResolvedPlugin, *abi.Metadata, error) {
	src, err := s.Manager.Identify(plugin.Reference{Builtin: ref.Builtin, Image: ref.Image})
	if err != nil {
		return osmv1alpha1.ResolvedPlugin{}, nil, sourceError(ref, err)
	}
	id := osmv1alpha1.ResolvedPlugin{Name: src.Builtin, Source: "builtin", Digest: src.ModuleDigest}
	if src.Image != "" {
		id.Source, id.Digest = src.Image, src.ManifestDigest
		id.Name = path.Base(src.Image[:strings.LastIndex(src.Image, "@")])
		return id, nil, nil
	}
	md, ok := s.Manager.Metadata(src.ModuleDigest)
	if !ok {
		return id, nil, nil
	}
	id.Name, id.Version = md.Name, md.Version
	return id, &md, nil
}

// sourceError is a failure to identify or load ref's plugin as the render reports it: PluginFailed for a load
// that may not fail again (mayPass) and PluginPullFailed for an image that could not be fetched, both
// Transient; PluginInvalid for a module that is not a plugin this host can run, PluginNotFound for an unknown
// built-in, neither of which passes without a change; SignatureMissing or SignatureInvalid (Transient) for an
// image the verification policy refused (package policy).
func sourceError(ref *osmv1alpha1.PluginReference, err error) *render.Error {
	if serr, refused := errors.AsType[*policy.Error](err); refused {
		// Transient: a signature may be attached, or the policy changed, without the profile changing.
		return &render.Error{Reason: serr.Reason, Err: err, Transient: true}
	}
	rerr, loaded := errors.AsType[*runtime.Error](err)
	switch {
	case loaded && mayPass(rerr.Reason):
		return &render.Error{Reason: osmv1alpha1.ReasonPluginFailed, Err: err, Transient: true}
	case loaded:
		return &render.Error{Reason: osmv1alpha1.ReasonPluginInvalid, Err: err}
	case ref.Image != "":
		return &render.Error{Reason: osmv1alpha1.ReasonPluginPullFailed, Err: err, Transient: true}
	default:
		return &render.Error{Reason: osmv1alpha1.ReasonPluginNotFound, Err: err}
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

// mayPass says a load failure may not repeat: the load ran out of time or memory, or its plugin host died or
// was killed, or the module is quarantined for a while. Those are PluginFailed, which the controller retries
// after a pause; a module that is not a plugin at all is PluginInvalid, which waits for a change.
func mayPass(r runtime.Reason) bool {
	switch r {
	case runtime.ReasonTimeout, runtime.ReasonCanceled, runtime.ReasonClosed, runtime.ReasonOutOfMemory,
		pluginhost.ReasonHostCrashed, pluginhost.ReasonQuarantined:
		return true
	}
	return false
}
