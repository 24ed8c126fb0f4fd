package plugin

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/osmhq/osm/host/oci"
	"github.com/osmhq/osm/host/pluginhost"
	"github.com/osmhq/osm/sdk/abi"
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
	// Label names a built-in module in errors, logs and metrics instead of Builtin: for tools that serve a file
	// or an image as a built-in (osmctl names it by its path or reference).
	Label string
	// PullSecret is the content of a kubernetes.io/dockerconfigjson Secret (its .dockerconfigjson key) for a
	// private registry, or nil.
	PullSecret []byte
	// Verify, if set, checks an image after its pull and before its module is loaded (see Verifier).
	Verify Verifier
	// Namespace is the namespace of the profile that names the plugin: a tenant's module's plugin host counts
	// against that namespace's bound (pluginhost.Config.MaxHostsPerNamespace).
	Namespace string
}

func (r Reference) String() string {
	if r.Builtin != "" {
		return "builtin:" + r.Builtin
	}
	return r.Image
}

// Manager resolves plugin references and runs their calls in the plugin hosts. It is safe for concurrent use.
// What is loaded where, for how long, and within which bound is the supervisor's (package pluginhost): the
// Manager keeps no record of loaded modules, only what they declared (meta) and which module an image holds.
//
// It separates knowing which module a reference names (Identify: no compile, no pull) from having it ready
// to call (Resolve, and every call through the returned Plugin), because the first is what status and render
// hashes need on every reconcile, and the second costs tens of megabytes per module.
type Manager struct {
	cfg      Config
	hooks    runtime.Hooks
	builtins fs.FS
	metrics  *metrics
	log      logr.Logger

	// ctx ends at Close; background pulls run under it.
	ctx    context.Context
	cancel context.CancelFunc

	host *pluginhost.Supervisor
	// scratch is the hosts' temporary cache directory, removed at Close, when Config.Precompiled is set
	// without Config.CacheDir.
	scratch string
	// memo remembers plugin outputs (memo.go); nil when off.
	memo atomic.Pointer[Memo]

	mu      sync.Mutex
	digests map[string]string   // built-in name -> module digest, computed once from the embedded bytes
	meta    map[string]declared // by module digest, kept after the module is unloaded
	pulls   pulls
	clients map[[sha256.Size]byte]*oci.Client
}

// maxRememberedMetadata bounds the metadata kept for modules no longer loaded.
const maxRememberedMetadata = 1024

// New creates a Manager. builtins holds the embedded plugins as <name>.wasm files at its root (the
// controller passes the plugins package's embedded dist directory; nil means none). Metrics are registered on
// reg (controller-runtime's metrics.Registry in the controller). Nothing is compiled until a plugin is called,
// and then in the plugin host process (package pluginhost), never in this one.
func New(cfg Config, builtins fs.FS, reg prometheus.Registerer, log logr.Logger) (*Manager, error) {
	cfg = cfg.withDefaults()
	met, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("registering plugin metrics: %w", err)
	}
	m := &Manager{cfg: cfg, builtins: builtins, metrics: met, log: log,
		digests: map[string]string{}, meta: map[string]declared{}, clients: map[[sha256.Size]byte]*oci.Client{}}
	m.memo.Store(newManagerMemo())
	m.pulls.init(cfg.Registry.MaxConcurrentPulls)
	m.hooks = met.hooks(m.logOutput, m.logCompile)
	scfg := cfg.supervisorConfig(m.hooks, reg, log.WithName("host"))
	if cfg.Precompiled != "" {
		if scfg.Host.CacheDir == "" {
			if m.scratch, err = os.MkdirTemp("", "osm-plugin-cache-"); err != nil {
				return nil, fmt.Errorf("a cache directory for the precompiled plugins: %w", err)
			}
			scfg.Host.CacheDir = m.scratch
		}
		// The digests the build recorded come with it: the built-in host checks the seeded cache against them.
		if scfg.Host.Artifacts, err = pluginhost.SeedBuiltins(scfg.Host.CacheDir, cfg.Precompiled); err != nil {
			// Only costs compiles, in the built-in host's memory.
			log.Error(err, "seeding the plugin cache with the precompiled plugins failed", "precompiled", cfg.Precompiled)
		}
	}
	if m.host, err = pluginhost.New(scfg); err != nil {
		return nil, err
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	return m, nil
}

// maxLoggedOutput bounds the guest output put into one log line.
const maxLoggedOutput = 512

// logOutput puts guest stdout/stderr into the controller's log at debug verbosity, as one truncated line:
// a plugin decides what it writes, so at the default level it must not be able to fill the log.
func (m *Manager) logOutput(e runtime.OutputEvent) {
	log := m.log.V(1)
	if !log.Enabled() {
		return
	}
	text := strings.ReplaceAll(strings.TrimRight(e.Text, "\n"), "\n", " ⏎ ")
	truncated := e.Truncated
	if len(text) > maxLoggedOutput {
		cut := maxLoggedOutput
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text, truncated = text[:cut], true
	}
	log.Info("plugin output", "plugin", e.Plugin, "digest", e.Digest, "export", e.Export, "stream", e.Stream,
		"output", text, "truncated", truncated)
}

func (m *Manager) logCompile(e runtime.CompileEvent) {
	if e.Err != nil {
		m.log.Error(e.Err, "compiling plugin failed", "plugin", e.Plugin, "digest", e.Digest)
		return
	}
	m.log.V(1).Info("compiled plugin", "plugin", e.Plugin, "digest", e.Digest, "seconds", e.Duration.Seconds(), "cache", e.Layer,
		"snapshot", cmp.Or(e.NotSnapshotted, "instances start initialised"))
}

// Identify checks ref and says which module it names, without compiling or pulling anything: a built-in's
// digest is the hash of its embedded bytes, an image's identity its pinned manifest digest (ModuleDigest is
// left empty for images). Status conditions and render hashes use it on every reconcile.
func (m *Manager) Identify(ref Reference) (Source, error) {
	switch {
	case ref.Builtin != "" && ref.Image != "":
		return Source{}, errors.New("plugin reference sets both builtin and image; set one")
	case ref.Builtin != "":
		d, err := m.builtinDigest(ref.Builtin)
		return Source{Builtin: ref.Builtin, ModuleDigest: d}, err
	case ref.Image != "":
		at := strings.LastIndex(ref.Image, "@sha256:")
		if at < 0 {
			return Source{}, fmt.Errorf("plugin image %q is not pinned by digest: use %s@sha256:<digest> (osmctl resolves a tag to its digest)", ref.Image, ref.Image)
		}
		return Source{Image: ref.Image, ManifestDigest: ref.Image[at+1:]}, nil
	default:
		return Source{}, errors.New("plugin reference sets neither builtin nor image")
	}
}

// Metadata returns the metadata of the module with the digest if it was loaded before in this process.
func (m *Manager) Metadata(moduleDigest string) (abi.Metadata, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.meta[moduleDigest]
	return d.meta, ok
}

// Resolve returns the plugin for ref, ready to call, with ref.Config checked against its schema. It checks
// the cheap things first (the reference, the digest), then pulls the image if needed (see PendingError) and
// loads the module. A module whose declarations this Manager has seen before is not loaded at all: the
// Plugin is built from them, and its first call that the output memo cannot answer loads the module. So a
// reconcile whose renders are all remembered never reaches the plugin host, which can then stay stopped
// (pluginhost's idle timeout) with none of its modules' machine code resident. Errors are one line naming the
// plugin; load failures of a module are remembered by digest, so a broken plugin costs one compile, not one
// per reconcile (the supervisor remembers them: pluginhost.Config.Permanent).
func (m *Manager) Resolve(ctx context.Context, ref Reference) (*Plugin, error) {
	source, err := m.Identify(ref)
	if err != nil {
		return nil, err
	}
	p := &Plugin{Source: source, m: m, ref: ref}
	if p.Source.ModuleDigest == "" && ref.Image != "" {
		p.Source.ModuleDigest = m.pulledDigest(ref)
	}
	d, known := m.declaredBy(p.Source.ModuleDigest)
	if !known {
		src, err := p.module(ctx)
		if err != nil {
			return nil, err
		}
		if source.ModuleDigest != "" && src.Digest != source.ModuleDigest {
			return nil, fmt.Errorf("plugin %s: module changed from %s to %s", ref, source.ModuleDigest, src.Digest)
		}
		if d, err = m.load(ctx, src); err != nil {
			return nil, err
		}
		p.Source.ModuleDigest, p.loaded = src.Digest, true
	}
	p.meta, p.validates, p.encodes = d.meta, d.validates, d.encodes
	if p.Config, err = p.meta.ApplyConfig(ref.Config); err != nil {
		return nil, fmt.Errorf("plugin %s: %w", ref, err)
	}
	return p, nil
}

// pulledDigest returns the module digest of an image this Manager pulled with ref's credentials, or "".
func (m *Manager) pulledDigest(ref Reference) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pulls.pulled[keyOf(ref)].Digest
}

// declaredBy returns what the module with the digest declared when it was last loaded, unless loading it
// failed since.
func (m *Manager) declaredBy(digest string) (declared, bool) {
	if digest == "" || m.host.Failed(digest) != nil {
		return declared{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.meta[digest]
	return d, ok
}

// builtinDigest returns the digest of the embedded plugin name, hashing its bytes on first use.
func (m *Manager) builtinDigest(name string) (string, error) {
	m.mu.Lock()
	d, ok := m.digests[name]
	m.mu.Unlock()
	if ok {
		return d, nil
	}
	d, err := m.hashBuiltin(name)
	if err != nil {
		return "", err
	}
	m.mu.Lock()
	m.digests[name] = d
	m.mu.Unlock()
	return d, nil
}

// hashBuiltin computes the digest runtime.Digest gives the embedded plugin name, streaming it: the six
// built-ins are 25 MiB, which a copy would put on the heap just to hash them.
func (m *Manager) hashBuiltin(name string) (string, error) {
	if err := m.checkBuiltin(name); err != nil {
		return "", err
	}
	// A digest recorded beside the module at build time saves reading it at all (the pages of the binary
	// that hold it then never become resident). A wrong one fails every call loudly (see call).
	if b, err := fs.ReadFile(m.builtins, name+".wasm.sha256"); err == nil {
		if hexDigest := strings.TrimSpace(string(b)); len(hexDigest) == 64 && strings.Trim(hexDigest, "0123456789abcdef") == "" {
			return "sha256:" + hexDigest, nil
		}
	}
	f, err := m.builtins.Open(name + ".wasm")
	if err != nil {
		return "", fmt.Errorf("reading built-in plugin %q: %w", name, err)
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("reading built-in plugin %q: %w", name, err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// checkBuiltin refuses names that are not a plugin file at the root of the built-ins.
func (m *Manager) checkBuiltin(name string) error {
	if m.builtins == nil || !fs.ValidPath(name) || strings.Contains(name, "/") {
		return m.unknownBuiltin(name)
	}
	if _, err := fs.Stat(m.builtins, name+".wasm"); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return m.unknownBuiltin(name)
		}
		return fmt.Errorf("reading built-in plugin %q: %w", name, err)
	}
	return nil
}

func (m *Manager) builtinBytes(name string) ([]byte, error) {
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
	return wasm, nil
}

// LocatedFS is implemented by built-ins embedded in the executable (plugins.BuiltinFS). Locate names the file
// range that holds a file's bytes; ok is false when it cannot.
type LocatedFS interface {
	Locate(name string) (path string, offset, length int64, ok bool)
}

// builtinSource is how the plugin host gets the embedded plugin name. A built-in the executable holds is read
// by the host from the executable file itself, so the controller never touches the module's 4.5 MB: neither
// its pages of the executable nor its heap hold them. Otherwise, and if the host cannot use the file, the
// bytes are sent over the pipe.
func (m *Manager) builtinSource(name, label, digest, namespace string) pluginhost.Module {
	src := pluginhost.Module{Name: cmp.Or(label, name), Digest: digest, Builtin: m.shipped(name, digest), Namespace: namespace, Bytes: func() ([]byte, func(), error) {
		wasm, err := m.builtinBytes(name)
		return wasm, func() {}, err
	}}
	if located, ok := m.builtins.(LocatedFS); ok && fs.ValidPath(name) && !strings.Contains(name, "/") {
		if path, off, n, ok := located.Locate(name + ".wasm"); ok {
			src.File = &pluginhost.File{Path: path, Offset: off, Length: n}
		}
	}
	return src
}

// shipped reports whether the built-in plugin name is one the build shipped: its digest was recorded beside
// it at build time (make plugins), and is digest. Only those share the built-in plugin host; the host
// loads them only if their bytes have that digest. Any other module in the built-ins (a test's, osmctl's
// file) runs in a host of its own, as a tenant's does.
func (m *Manager) shipped(name, digest string) bool {
	b, err := fs.ReadFile(m.builtins, name+".wasm.sha256")
	return err == nil && "sha256:"+strings.TrimSpace(string(b)) == digest
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

// remember keeps what a loaded module declared, so Resolve and Identify's callers have it after the module
// is unloaded.
func (m *Manager) remember(digest string, d declared) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.meta) >= maxRememberedMetadata {
		for k := range m.meta {
			delete(m.meta, k)
			break
		}
	}
	m.meta[digest] = d
}

// Loaded returns how many modules the plugin hosts have loaded or are loading.
func (m *Manager) Loaded() int { return m.host.Loaded() }

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

// Close stops the plugin hosts and pulls.
func (m *Manager) Close(ctx context.Context) error {
	m.cancel()
	// The hosts go first: loads and calls in flight then end at once (ReasonClosed) instead of holding the
	// shutdown for a compile.
	m.host.Close()
	m.pulls.wait()
	if m.scratch != "" {
		_ = os.RemoveAll(m.scratch)
	}
	return nil
}

// HostPIDs returns the process IDs of the running plugin hosts.
func (m *Manager) HostPIDs() []int { return m.host.PIDs() }
