package main

import (
	"context"
	"io"
	"os"
	"path/filepath"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/osmhq/osm/host/oci"
	"github.com/osmhq/osm/host/plugin"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/plugins"
)

// globals are the settings every command shares, and what a run must release when it ends.
type globals struct {
	cacheDir string
	verbose  bool

	closers []func()
}

func (g *globals) addFlags(cmd *cobra.Command) {
	dir, _ := os.UserCacheDir()
	if dir != "" {
		dir = filepath.Join(dir, "osm", "plugins")
	}
	cmd.PersistentFlags().StringVar(&g.cacheDir, "cache-dir", dir, "Directory for compiled plugins and pulled artifacts (empty: memory only).")
	cmd.PersistentFlags().BoolVarP(&g.verbose, "verbose", "v", false, "Log plugin output and compilation to stderr.")
}

// close releases what the commands of this run opened (plugin runtimes), newest first.
func (g *globals) close() {
	for i := len(g.closers) - 1; i >= 0; i-- {
		g.closers[i]()
	}
	g.closers = nil
}

func (g *globals) logger(w io.Writer) logr.Logger {
	if !g.verbose {
		return logr.Discard()
	}
	return funcr.New(func(prefix, args string) { _, _ = io.WriteString(w, prefix+args+"\n") }, funcr.Options{Verbosity: 1})
}

// subCacheDir is a directory below the cache directory, "" when caching is off.
func (g *globals) subCacheDir(name string) string {
	if g.cacheDir == "" {
		return ""
	}
	return filepath.Join(g.cacheDir, name)
}

// manager returns a plugin manager with the embedded default plugins, production limits, and the registry
// settings of reg for plugin images: the same code path the controller resolves plugins with.
func (g *globals) manager(cmd *cobra.Command, reg *registryFlags) (*plugin.Manager, error) {
	rc, err := reg.registryConfig()
	if err != nil {
		return nil, err
	}
	m, err := plugin.New(plugin.Config{CacheDir: g.cacheDir, Registry: rc, Precompiled: plugins.PrecompiledDir()}, plugins.Builtin(), prometheus.NewRegistry(), g.logger(cmd.ErrOrStderr()))
	if err != nil {
		return nil, err
	}
	g.closers = append(g.closers, func() { _ = m.Close(context.Background()) })
	return m, nil
}

// source returns the plugin source for render and lint: built-in plugins, and plugin images pulled with the
// credentials of the local docker config.
func (g *globals) source(cmd *cobra.Command, reg *registryFlags) (render.PluginSource, error) {
	m, err := g.manager(cmd, reg)
	if err != nil {
		return nil, err
	}
	// Registries on this machine that do not speak TLS get a manager of their own with plain HTTP (see
	// registryFlags.forReference), made on first use.
	var local *plugin.Manager
	localManager := func() (*plugin.Manager, error) {
		if local != nil {
			return local, nil
		}
		plain := *reg
		plain.plainHTTP = true
		lm, err := g.manager(cmd, &plain)
		if err != nil {
			return nil, err
		}
		local = lm
		return local, nil
	}
	return &cliSource{manager: m, registry: reg, local: localManager}, nil
}

// ociClient returns a registry client with the settings of reg, caching verified blobs like the controller.
func (g *globals) ociClient(reg *registryFlags) (*oci.Client, error) {
	opts, err := reg.options()
	if err != nil {
		return nil, err
	}
	opts.CacheDir = g.subCacheDir("oci")
	opts.UserAgent = "osmctl"
	return oci.NewClient(opts)
}
