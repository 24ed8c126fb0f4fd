package app

import (
	"github.com/osmhq/osm/host/plugin"
	"github.com/osmhq/osm/plugins"
)

// pluginConfig is o.Plugins with the default plugins' precompiled machine code (plugins.PrecompiledDir) unless
// it names its own: so that neither a pod nor a test compiles a default plugin.
func (o Options) pluginConfig() plugin.Config { return withPrecompiled(o.Plugins) }

func (o WebhookOptions) pluginConfig() plugin.Config { return withPrecompiled(o.Plugins) }

func withPrecompiled(cfg plugin.Config) plugin.Config {
	if cfg.Precompiled == "" {
		cfg.Precompiled = plugins.PrecompiledDir()
	}
	return cfg
}
