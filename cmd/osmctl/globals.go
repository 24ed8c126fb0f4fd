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

	"github.com/osmhq/osm/host/plugin"
	"github.com/osmhq/osm/host/pluginsource"
	"github.com/osmhq/osm/plugins"
)

// globals are the settings every command shares.
type globals struct {
	cacheDir string
	verbose  bool
}

func (g *globals) addFlags(cmd *cobra.Command) {
	dir, _ := os.UserCacheDir()
	if dir != "" {
		dir = filepath.Join(dir, "osm", "plugins")
	}
	cmd.PersistentFlags().StringVar(&g.cacheDir, "cache-dir", dir, "Directory for compiled plugins and pulled artifacts (empty: memory only).")
	cmd.PersistentFlags().BoolVarP(&g.verbose, "verbose", "v", false, "Log plugin output and compilation to stderr.")
}

func (g *globals) logger(w io.Writer) logr.Logger {
	if !g.verbose {
		return logr.Discard()
	}
	return funcr.New(func(prefix, args string) { _, _ = io.WriteString(w, prefix+args+"\n") }, funcr.Options{Verbosity: 1})
}

// manager returns a plugin manager with the embedded default plugins and production limits.
func (g *globals) manager(cmd *cobra.Command) (*plugin.Manager, error) {
	m, err := plugin.New(plugin.Config{CacheDir: g.cacheDir}, plugins.Builtin(), prometheus.NewRegistry(), g.logger(cmd.ErrOrStderr()))
	if err != nil {
		return nil, err
	}
	cobra.OnFinalize(func() { _ = m.Close(context.Background()) })
	return m, nil
}

func (g *globals) source(cmd *cobra.Command) (*pluginsource.Source, error) {
	m, err := g.manager(cmd)
	if err != nil {
		return nil, err
	}
	return &pluginsource.Source{Manager: m}, nil
}
