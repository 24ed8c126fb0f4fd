package plugin

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/osmhq/osm/host/oci"
	"github.com/osmhq/osm/sdk/runtime"
)

// Reference is an OSP's spec.plugin: exactly one of Builtin and Image.
type Reference struct {
	// Builtin names a plugin embedded in the controller, e.g. "ubuntu".
	Builtin string
	// Image is an OCI reference pinned by digest, "registry/repository@sha256:<hex>". Tags are refused: what
	// runs must not change under a profile without the profile changing.
	Image string
	// Config is the profile's spec.plugin.config; it is checked against the plugin's schema and defaulted.
	Config map[string]string
	// PullSecret is the content of a kubernetes.io/dockerconfigjson Secret (its .dockerconfigjson key) for a
	// private registry, or nil.
	PullSecret []byte
}

func (r Reference) String() string {
	if r.Builtin != "" {
		return "builtin:" + r.Builtin
	}
	return r.Image
}

// Manager loads plugins and keeps them loaded. It is safe for concurrent use.
type Manager struct {
	cfg      Config
	rt       *runtime.Runtime
	builtins fs.FS
	metrics  *metrics
	log      logr.Logger

	mu      sync.Mutex
	byName  map[string]*runtime.Module // builtin name -> module
	byImage map[string]*runtime.Module // pinned image reference -> module
	clients map[[sha256.Size]byte]*oci.Client
}

// New creates a Manager. builtins holds the embedded plugins as <name>.wasm files at its root (the
// controller passes the plugins package's embedded dist directory; nil means none). Metrics are registered on
// reg (controller-runtime's metrics.Registry in the controller).
func New(cfg Config, builtins fs.FS, reg prometheus.Registerer, log logr.Logger) (*Manager, error) {
	met, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("registering plugin metrics: %w", err)
	}
	m := &Manager{cfg: cfg, builtins: builtins, metrics: met, log: log,
		byName: map[string]*runtime.Module{}, byImage: map[string]*runtime.Module{}, clients: map[[sha256.Size]byte]*oci.Client{}}
	m.rt, err = runtime.New(cfg.runtimeConfig(met.hooks(m.logOutput, m.logCompile)))
	if err != nil {
		return nil, err
	}
	return m, nil
}

// logOutput puts guest stdout/stderr into the controller's log, where a plugin's panics and diagnostics go.
func (m *Manager) logOutput(e runtime.OutputEvent) {
	m.log.Info("plugin output", "plugin", e.Plugin, "digest", e.Digest, "export", e.Export, "stream", e.Stream,
		"output", strings.TrimRight(e.Text, "\n"), "truncated", e.Truncated)
}

func (m *Manager) logCompile(e runtime.CompileEvent) {
	if e.Err != nil {
		m.log.Error(e.Err, "compiling plugin failed", "plugin", e.Plugin, "digest", e.Digest)
		return
	}
	m.log.V(1).Info("compiled plugin", "plugin", e.Plugin, "digest", e.Digest, "seconds", e.Duration.Seconds(), "cache", e.Layer)
}

// Resolve returns the plugin for ref, loading it on first use, with ref.Config checked against its schema.
// Errors are one line naming the plugin; load failures of a module are remembered by digest, so a broken
// plugin costs one compile, not one per reconcile.
func (m *Manager) Resolve(ctx context.Context, ref Reference) (*Plugin, error) {
	var (
		mod    *runtime.Module
		source Source
		err    error
	)
	switch {
	case ref.Builtin != "" && ref.Image != "":
		return nil, errors.New("plugin reference sets both builtin and image; set one")
	case ref.Builtin != "":
		mod, err = m.Builtin(ctx, ref.Builtin)
		source = Source{Builtin: ref.Builtin}
	case ref.Image != "":
		mod, source, err = m.image(ctx, ref.Image, ref.PullSecret)
	default:
		return nil, errors.New("plugin reference sets neither builtin nor image")
	}
	if err != nil {
		return nil, err
	}
	source.ModuleDigest = mod.Digest()
	md := mod.Metadata()
	config, err := md.ApplyConfig(ref.Config)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", ref, err)
	}
	return &Plugin{Module: mod, Source: source, Config: config}, nil
}

// Builtin loads the embedded plugin name.
func (m *Manager) Builtin(ctx context.Context, name string) (*runtime.Module, error) {
	m.mu.Lock()
	mod, ok := m.byName[name]
	m.mu.Unlock()
	if ok {
		m.metrics.cacheHits.WithLabelValues(string(runtime.LayerMemory)).Inc()
		return mod, nil
	}
	if m.builtins == nil || !fs.ValidPath(name) || strings.Contains(name, "/") {
		return nil, m.unknownBuiltin(name)
	}
	wasm, err := fs.ReadFile(m.builtins, name+".wasm")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, m.unknownBuiltin(name)
	}
	if err != nil {
		return nil, fmt.Errorf("reading built-in plugin %q: %w", name, err)
	}
	mod, err = m.rt.Load(ctx, name, wasm)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.byName[name] = mod
	m.mu.Unlock()
	return mod, nil
}

func (m *Manager) unknownBuiltin(name string) error {
	names, _ := m.BuiltinNames()
	return fmt.Errorf("no built-in plugin %q (built-in plugins: %s)", name, strings.Join(names, ", "))
}

// BuiltinNames lists the embedded plugins, sorted.
func (m *Manager) BuiltinNames() ([]string, error) {
	if m.builtins == nil {
		return nil, nil
	}
	entries, err := fs.ReadDir(m.builtins, ".")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && path.Ext(e.Name()) == ".wasm" {
			names = append(names, strings.TrimSuffix(e.Name(), ".wasm"))
		}
	}
	sort.Strings(names)
	return names, nil
}

// image loads a plugin image pinned by digest.
func (m *Manager) image(ctx context.Context, ref string, pullSecret []byte) (*runtime.Module, Source, error) {
	at := strings.LastIndex(ref, "@sha256:")
	if at < 0 {
		return nil, Source{}, fmt.Errorf("plugin image %q is not pinned by digest: use %s@sha256:<digest> (osmctl resolves a tag to its digest)", ref, ref)
	}
	source := Source{Image: ref, ManifestDigest: ref[at+1:]}
	name := ref[:at]
	m.mu.Lock()
	mod, ok := m.byImage[ref]
	m.mu.Unlock()
	if ok {
		m.metrics.cacheHits.WithLabelValues(string(runtime.LayerMemory)).Inc()
		return mod, source, nil
	}
	client, err := m.client(pullSecret)
	if err != nil {
		m.metrics.failures.WithLabelValues(name, string(ReasonPullError)).Inc()
		return nil, source, fmt.Errorf("plugin image %s: %w", ref, err)
	}
	art, err := client.Pull(ctx, ref)
	if err != nil {
		m.metrics.failures.WithLabelValues(name, string(ReasonPullError)).Inc()
		return nil, source, err
	}
	if art.FromCache {
		m.metrics.cacheHits.WithLabelValues("oci").Inc()
	}
	mod, err = m.rt.Load(ctx, name, art.Module)
	if err != nil {
		return nil, source, err
	}
	m.mu.Lock()
	m.byImage[ref] = mod
	m.mu.Unlock()
	return mod, source, nil
}

// client returns an OCI client for the pull secret, reusing clients so their token caches survive.
func (m *Manager) client(pullSecret []byte) (*oci.Client, error) {
	key := sha256.Sum256(pullSecret)
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.clients[key]; ok {
		return c, nil
	}
	c, err := oci.NewClient(m.cfg.ociOptions(pullSecret))
	if err != nil {
		return nil, err
	}
	m.clients[key] = c
	return c, nil
}

// Close unloads every plugin.
func (m *Manager) Close(ctx context.Context) error { return m.rt.Close(ctx) }
