package main

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing/fstest"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/plugin"
	"github.com/osmhq/osm/host/render"
)

// pluginFileFlag names the flag of render, lint and diff that serves a profile's plugin from a local module.
const pluginFileFlag = "plugin-file"

const pluginFileUsage = "Plugin module file (.wasm) that stands in for the profile's plugin (spec.plugin), " +
	"so a plugin renders before it is pushed to a registry; the profile's plugin config still applies."

// fileSource serves every profile's plugin from one local module file, loaded with the controller's limits by
// the same plugin manager (config schema check included) that serves built-in plugins.
type fileSource struct {
	manager *plugin.Manager
	name    string
	path    string
}

var _ render.PluginSource = (*fileSource)(nil)

// fileSource loads path and returns a source that answers every plugin reference with it.
func (g *globals) fileSource(cmd *cobra.Command, path string) (render.PluginSource, error) {
	wasm, err := readModuleFile(path)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", pluginFileFlag, err)
	}
	// The manager serves built-in plugins from an fs.FS; the file becomes the only one, under a name that says
	// where it came from.
	name := "file-" + strings.TrimSuffix(filepath.Base(path), ".wasm")
	if !fs.ValidPath(name) {
		name = "file-plugin"
	}
	m, err := plugin.New(plugin.Config{CacheDir: g.cacheDir}, fstest.MapFS{name + ".wasm": {Data: wasm}},
		prometheus.NewRegistry(), g.logger(cmd.ErrOrStderr()))
	if err != nil {
		return nil, err
	}
	g.closers = append(g.closers, func() { _ = m.Close(context.Background()) })
	return &fileSource{manager: m, name: name, path: path}, nil
}

func (s *fileSource) Resolve(ctx context.Context, _ string, ref *osmv1alpha1.PluginReference) (render.Plugin, error) {
	p, err := s.manager.Resolve(ctx, plugin.Reference{Builtin: s.name, Config: ref.Config})
	if err != nil {
		return nil, &render.Error{Reason: osmv1alpha1.ReasonPluginInvalid, Err: fmt.Errorf("plugin file %s: %w", s.path, pluginError(err))}
	}
	return &filePlugin{Plugin: p, path: s.path}, nil
}

// filePlugin is a plugin loaded from a file; its identity names the file.
type filePlugin struct {
	*plugin.Plugin
	path string
}

func (f *filePlugin) Identity() osmv1alpha1.ResolvedPlugin {
	md := f.Metadata()
	return osmv1alpha1.ResolvedPlugin{Name: md.Name, Version: md.Version, Digest: f.Source.ModuleDigest, Source: "file:" + f.path}
}

// withPluginFile returns the profile to render with --plugin-file: the same profile, which must name a plugin
// (the file stands in for it, whatever it is).
func withPluginFile(osp *osmv1alpha1.OperatingSystemProfile, path string) error {
	if osp.Spec.Plugin == nil {
		return fmt.Errorf("--%s %s: profile %s has no spec.plugin for the file to stand in for; add one, e.g. spec.plugin.image: registry.example.com/osm/<name>:<version>", pluginFileFlag, path, osp.Name)
	}
	return nil
}
