package plugin

import (
	"context"
	"fmt"
	"path"
	"strings"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/sdk/abi"
)

// PullSecretFunc returns the .dockerconfigjson content of the pull Secret name in namespace.
type PullSecretFunc func(ctx context.Context, namespace, name string) ([]byte, error)

// Resolver is the render pipeline's plugin source (render.PluginSource, render.PluginIdentifier): it turns a
// profile's spec.plugin into a Plugin of its Manager, fetching the image pull Secret when the reference names
// one, or names the plugin's module without loading it (Identify) for status and render hashes. Its
// failures are *render.Error with the condition reason the failure table gives (errors.go).
type Resolver struct {
	Manager *Manager
	// PullSecret fetches pull Secrets; nil means references with a pullSecret cannot be resolved.
	PullSecret PullSecretFunc
	// WaitForPulls makes resolutions wait for image pulls (each bounded by the pull timeout) instead of
	// returning a PendingError: for admission reviews and the CLI, where someone waits for the answer.
	// Reconcilers leave it unset, so a slow registry never holds a worker.
	WaitForPulls bool
	// Verification returns the Verifier of a profile namespace's plugin image (package signature's policy),
	// or nil when the image is not verified; nil means no image is.
	Verification func(ctx context.Context, namespace, image string) (Verifier, error)
}

var (
	_ render.PluginSource     = (*Resolver)(nil)
	_ render.PluginIdentifier = (*Resolver)(nil)
	_ render.Plugin           = (*Plugin)(nil)
)

// Resolve loads the plugin ref names, checking the cheap things first: the reference, then the pull Secret,
// then the verification policy, then the pull and the load.
func (s *Resolver) Resolve(ctx context.Context, namespace string, ref *osmv1alpha1.PluginReference) (render.Plugin, error) {
	pref := Reference{Builtin: ref.Builtin, Image: ref.Image, Config: ref.Config, Namespace: namespace}
	if _, err := s.Manager.Identify(pref); err != nil {
		return nil, loadFailure(pref, err)
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
		ctx = WaitForPulls(ctx)
	}
	p, err := s.Manager.Resolve(ctx, pref)
	if err != nil {
		return nil, loadFailure(pref, err)
	}
	return p, nil
}

// Identify names the module ref refers to without pulling, compiling or reading a Secret: a built-in by the
// digest of its embedded bytes, an image by its pinned manifest digest. Name and Version come from the
// plugin's metadata once it has been loaded in this process; before that, Name is the built-in's name or the
// image's repository name, and the metadata is nil.
func (s *Resolver) Identify(_ context.Context, _ string, ref *osmv1alpha1.PluginReference) (osmv1alpha1.ResolvedPlugin, *abi.Metadata, error) {
	pref := Reference{Builtin: ref.Builtin, Image: ref.Image}
	src, err := s.Manager.Identify(pref)
	if err != nil {
		return osmv1alpha1.ResolvedPlugin{}, nil, loadFailure(pref, err)
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

// Identity says exactly which module p runs, for the OSP and OSC status.
func (p *Plugin) Identity() osmv1alpha1.ResolvedPlugin {
	id := osmv1alpha1.ResolvedPlugin{Name: p.meta.Name, Version: p.meta.Version, Digest: p.Source.ModuleDigest, Source: "builtin"}
	if p.Source.Image != "" {
		id.Source = p.Source.Image
	}
	return id
}
