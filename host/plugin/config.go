package plugin

import (
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/osmhq/osm/host/oci"
	"github.com/osmhq/osm/host/pluginhost"
	"github.com/osmhq/osm/sdk/runtime"
)

// Defaults for Config fields left zero.
const (
	// DefaultMaxLoadedModules bounds the tenants' modules loaded at once, each in a plugin host of its own
	// (pluginhost.DefaultMaxHosts); the built-ins share one host besides.
	DefaultMaxLoadedModules = pluginhost.DefaultMaxHosts
	// DefaultIdleTimeout stops a plugin host, and has the built-in host forget a module, that no call used for
	// this long (pluginhost.DefaultIdleTimeout). Calls the output memo answers never use the module, so it
	// serves only configurations not seen before, which come in bursts milliseconds apart: once a burst ends,
	// its machine code (~18 MiB per default plugin) is memory the host holds for nothing. With 10 minutes,
	// five OSes rendered one after the other kept 92 MiB of it resident through a start of 500
	// MachineDeployments; with 2 s, 55 MiB; with 500 ms, 18 MiB (make bench-compare, OSM_BENCH_OS with five
	// OSes, 2026-11-27). Loading a module again from the compilation cache costs 40-90 ms of the host's CPU.
	DefaultIdleTimeout = pluginhost.DefaultIdleTimeout
	// DefaultPullTimeout bounds one pull of a plugin image, every byte included.
	DefaultPullTimeout = 60 * time.Second
	// DefaultMaxConcurrentPulls bounds pulls running at once; more wait their turn.
	DefaultMaxConcurrentPulls = 2
	// DefaultPendingAfter is how long a resolution waits for a pull before reporting it pending, so a fast
	// registry costs no requeue and a slow one holds no worker.
	DefaultPendingAfter = time.Second
)

// Config configures a Manager. The zero value is usable: production limits, memory-only caches.
type Config struct {
	// MemoryLimit caps each plugin instance's memory, in bytes. Default runtime.DefaultMemoryLimit.
	MemoryLimit uint64
	// Timeout bounds each plugin call. Default runtime.DefaultTimeout.
	Timeout time.Duration
	// MemoryBudget bounds the memory of all plugin calls at once, across every loaded module: each call
	// reserves its instance's worst case (MemoryLimit plus its input and output plus runtime.MaxStackBytes of
	// call stack) first. Default runtime.DefaultMemoryBudget.
	MemoryBudget uint64
	// MaxLoadedModules bounds the tenants' modules loaded at once, each in a plugin host of its own
	// (pluginhost.Config.MaxHosts; the built-ins share one more host). Beyond it the least recently used host
	// without a call in flight stops; its module's next call loads it again (from CacheDir: a tenth of a
	// second). Default DefaultMaxLoadedModules.
	MaxLoadedModules int
	// MaxBuiltinModules bounds the built-in modules the built-in host holds at once
	// (pluginhost.Config.MaxBuiltinModules). Default pluginhost.DefaultMaxBuiltinModules.
	MaxBuiltinModules int
	// IdleTimeout stops a plugin host, and has the built-in host forget a module, that no call used for this
	// long (pluginhost.Config.IdleTimeout). Default DefaultIdleTimeout; negative: never (the bound still
	// stops tenants' idle hosts).
	IdleTimeout time.Duration
	// CacheDir holds compiled code (<dir>/wazero) and pulled artifacts (<dir>/oci) across restarts. Empty keeps
	// both in memory only, which makes every controller restart compile every plugin from scratch.
	CacheDir string
	// Precompiled is a compilation cache the build filled with the default plugins' machine code (make
	// plugins: plugins/compiled; the image: next to the controller), which seeds the hosts' cache, so that
	// they never compile a default plugin (pluginhost.SeedCache). Without CacheDir the hosts get a private
	// temporary cache for it. Empty: none.
	Precompiled string
	// Registry holds the settings for pulling plugin images; credentials come per resolution.
	Registry RegistryConfig
	// NoSnapshot makes every plugin instance initialise itself (runtime.Config.NoSnapshot): for comparisons.
	NoSnapshot bool
	// Host bounds the plugin host process.
	Host HostConfig
}

// HostConfig is how the plugin host process is started and bounded; zero fields take pluginhost's defaults.
type HostConfig struct {
	// Executable is the binary started as the plugin host; default this process's own.
	Executable string
	// Grace is how long past Timeout a call may run before the host is killed.
	Grace time.Duration
	// LoadTimeout bounds loading one module (check, compile, initialise, metadata).
	LoadTimeout time.Duration
	// MaxRSS kills the host when its resident memory exceeds it, in bytes.
	MaxRSS uint64
	// AddressSpace is the host's RLIMIT_AS in bytes; 0 sets none.
	AddressSpace uint64
	// Quarantine is how long a module whose host died twice within pluginhost.DefaultQuarantineWindow is
	// refused (doubling each time); zero: pluginhost.DefaultQuarantine.
	Quarantine time.Duration
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
	// PullTimeout bounds one pull, from its first request to its last byte. Default DefaultPullTimeout.
	PullTimeout time.Duration
	// MaxConcurrentPulls bounds pulls running at once. Default DefaultMaxConcurrentPulls.
	MaxConcurrentPulls int
	// PendingAfter is how long Resolve waits for a pull before returning a PendingError, unless its context
	// comes from WaitForPulls. Default DefaultPendingAfter.
	PendingAfter time.Duration
}

func (c Config) withDefaults() Config {
	if c.MaxLoadedModules <= 0 {
		c.MaxLoadedModules = DefaultMaxLoadedModules
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.Registry.PullTimeout <= 0 {
		c.Registry.PullTimeout = DefaultPullTimeout
	}
	if c.Registry.MaxConcurrentPulls <= 0 {
		c.Registry.MaxConcurrentPulls = DefaultMaxConcurrentPulls
	}
	if c.Registry.PendingAfter <= 0 {
		c.Registry.PendingAfter = DefaultPendingAfter
	}
	return c
}

// supervisorConfig configures the plugin host and its supervisor.
func (c Config) supervisorConfig(hooks runtime.Hooks, reg prometheus.Registerer, log logr.Logger) pluginhost.Config {
	hc := pluginhost.HostConfig{MemoryLimit: c.MemoryLimit, Timeout: c.Timeout, MemoryBudget: c.MemoryBudget, NoSnapshot: c.NoSnapshot,
		AddressSpace: c.Host.AddressSpace}
	if c.CacheDir != "" {
		hc.CacheDir = filepath.Join(c.CacheDir, "wazero")
	}
	return pluginhost.Config{Host: hc, Executable: c.Host.Executable, Grace: c.Host.Grace, LoadTimeout: c.Host.LoadTimeout,
		MaxRSS: c.Host.MaxRSS, IdleTimeout: c.IdleTimeout, MaxHosts: c.MaxLoadedModules, MaxBuiltinModules: c.MaxBuiltinModules, Quarantine: c.Host.Quarantine,
		Permanent: func(err error) bool { return !mayPass(err) }, Hooks: hooks, Registerer: reg, Log: log}
}

func (c Config) ociOptions(dockerConfig []byte) oci.Options {
	o := oci.Options{
		DockerConfig:          dockerConfig,
		CABundle:              c.Registry.CABundle,
		InsecureSkipTLSVerify: c.Registry.InsecureSkipTLSVerify,
		PlainHTTP:             c.Registry.PlainHTTP,
		MaxModuleSize:         c.Registry.MaxModuleSize,
		PullTimeout:           c.Registry.PullTimeout,
		UserAgent:             "osm-controller",
	}
	if c.CacheDir != "" {
		o.CacheDir = filepath.Join(c.CacheDir, "oci")
	}
	return o
}
