package plugin

import (
	"path/filepath"
	"time"

	"github.com/osmhq/osm/host/oci"
	"github.com/osmhq/osm/sdk/runtime"
)

// Config configures a Manager. The zero value is usable: production limits, memory-only caches.
type Config struct {
	// MemoryLimit caps each plugin instance's memory, in bytes. Default runtime.DefaultMemoryLimit.
	MemoryLimit uint64
	// Timeout bounds each plugin call. Default runtime.DefaultTimeout.
	Timeout time.Duration
	// MaxIdleInstances is how many warm instances each plugin keeps. Default GOMAXPROCS.
	MaxIdleInstances int
	// CacheDir holds compiled code (<dir>/wazero) and pulled artifacts (<dir>/oci) across restarts. Empty keeps
	// both in memory only, which makes every controller restart compile every plugin from scratch.
	CacheDir string
	// Registry holds the settings for pulling plugin images; credentials come per resolution.
	Registry RegistryConfig
}

// RegistryConfig is how the controller reaches registries.
type RegistryConfig struct {
	// CABundle is PEM certificates trusted in addition to the system roots.
	CABundle []byte
	// InsecureSkipTLSVerify disables certificate verification.
	InsecureSkipTLSVerify bool
	// PlainHTTP uses HTTP instead of HTTPS.
	PlainHTTP bool
	// MaxModuleSize bounds a pulled module. Default oci.DefaultMaxModuleSize.
	MaxModuleSize int64
}

func (c Config) runtimeConfig(hooks runtime.Hooks) runtime.Config {
	rc := runtime.Config{MemoryLimit: c.MemoryLimit, Timeout: c.Timeout, MaxIdleInstances: c.MaxIdleInstances, Hooks: hooks}
	if c.CacheDir != "" {
		rc.CacheDir = filepath.Join(c.CacheDir, "wazero")
	}
	return rc
}

func (c Config) ociOptions(dockerConfig []byte) oci.Options {
	o := oci.Options{
		DockerConfig:          dockerConfig,
		CABundle:              c.Registry.CABundle,
		InsecureSkipTLSVerify: c.Registry.InsecureSkipTLSVerify,
		PlainHTTP:             c.Registry.PlainHTTP,
		MaxModuleSize:         c.Registry.MaxModuleSize,
		UserAgent:             "osm-controller",
	}
	if c.CacheDir != "" {
		o.CacheDir = filepath.Join(c.CacheDir, "oci")
	}
	return o
}
