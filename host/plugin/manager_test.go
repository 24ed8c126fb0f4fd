package plugin

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/osmhq/osm/host/oci"
	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/plugintest"
	"github.com/osmhq/osm/sdk/runtime"
)

// testPlugin builds one of the runtime's test plugins (cached by source hash) and returns its bytes.
func testPlugin(t testing.TB, name string) []byte {
	t.Helper()
	path, err := plugintest.BuildWasm(filepath.Join("..", "..", "sdk", "runtime", "testdata", "plugins", name))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sharedCache keeps compiled code across test runs (a race-enabled compile is slow).
func sharedCache(t testing.TB) string {
	base, err := os.UserCacheDir()
	if err != nil {
		return t.TempDir()
	}
	return filepath.Join(base, "osm", "host-plugin-test")
}

func builtinFS(healthy []byte) fstest.MapFS { return fstest.MapFS{"healthy.wasm": {Data: healthy}} }

type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func newManager(t *testing.T, cfg Config, builtins fstest.MapFS) (*Manager, *prometheus.Registry, *logLines) {
	t.Helper()
	reg := prometheus.NewRegistry()
	logs := &logLines{}
	log := funcr.New(func(prefix, args string) {
		logs.mu.Lock()
		logs.lines = append(logs.lines, args)
		logs.mu.Unlock()
	}, funcr.Options{Verbosity: 1})
	if cfg.CacheDir == "" {
		cfg.CacheDir = sharedCache(t)
	}
	m, err := New(cfg, builtins, reg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m, reg, logs
}

func renderRequest() *abi.RenderRequest {
	return &abi.RenderRequest{Stage: abi.StageProvisioning, ProvisioningUtility: abi.UtilityCloudInit,
		Context: abi.RenderContext{MachineDeployment: abi.ObjectRef{Name: "md", Namespace: "ns"}}}
}

func TestResolveBuiltin(t *testing.T) {
	builtins := fstest.MapFS{"healthy.wasm": {Data: testPlugin(t, "healthy")}, "README.md": {Data: []byte("not a plugin")}}
	m, reg, logs := newManager(t, Config{}, builtins)
	ctx := context.Background()

	p, err := m.Resolve(ctx, Reference{Builtin: "healthy", Config: map[string]string{"mirror": "m"}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Source.Builtin != "healthy" || p.Source.ModuleDigest != runtime.Digest(builtins["healthy.wasm"].Data) {
		t.Errorf("source = %+v", p.Source)
	}
	resp, err := p.Render(ctx, renderRequest())
	if err != nil {
		t.Fatal(err)
	}
	if f := resp.Config.File("/etc/osm/config"); f == nil || f.Content.Inline.Data != "mirror=m\n" {
		t.Errorf("the profile's config did not reach the plugin: %+v", f)
	}
	if _, err := m.Resolve(ctx, Reference{Builtin: "healthy"}); err != nil {
		t.Fatal(err)
	}

	// The render and the second resolution found the module loaded (the plugin host counts its own hits too).
	if got := testutil.ToFloat64(m.metrics.cacheHits.WithLabelValues("memory")); got < 2 {
		t.Errorf("memory cache hits = %v, want at least 2", got)
	}
	if n := testutil.CollectAndCount(m.metrics.calls, "osm_plugin_call_duration_seconds"); n < 2 {
		t.Errorf("call duration series = %d, want osm_metadata and osm_render", n)
	}
	if n, err := testutil.GatherAndCount(reg, "osm_plugin_compile_seconds"); err != nil || n != 1 {
		t.Errorf("compile series = %d (%v), want 1", n, err)
	}
	if l := logs.String(); !strings.Contains(l, `"plugin"="healthy"`) || !strings.Contains(l, `"digest"="sha256:`) || !strings.Contains(l, "rendering provisioning for md") {
		t.Errorf("plugin stderr not logged with plugin and digest:\n%s", l)
	}
	if names, _ := m.BuiltinNames(); strings.Join(names, ",") != "healthy" {
		t.Errorf("BuiltinNames() = %v", names)
	}
}

func TestResolveErrors(t *testing.T) {
	builtins := fstest.MapFS{"healthy.wasm": {Data: testPlugin(t, "healthy")}, "abiv2.wasm": {Data: testPlugin(t, "abiv2")}}
	m, _, _ := newManager(t, Config{}, builtins)
	tests := []struct {
		name       string
		ref        Reference
		wantErr    string
		wantReason runtime.Reason
	}{
		{name: "unknown builtin", ref: Reference{Builtin: "plan9"}, wantErr: `no built-in plugin "plan9" (built-in plugins: abiv2, healthy)`},
		{name: "path in builtin name", ref: Reference{Builtin: "../healthy"}, wantErr: "no built-in plugin"},
		{name: "both", ref: Reference{Builtin: "healthy", Image: "r/x@sha256:00"}, wantErr: "sets both"},
		{name: "neither", ref: Reference{}, wantErr: "sets neither"},
		{name: "tag", ref: Reference{Image: "registry.example.com/osm/ubuntu:1.0"}, wantErr: "is not pinned by digest"},
		{name: "wrong ABI", ref: Reference{Builtin: "abiv2"}, wantErr: `plugin "abiv2"`, wantReason: runtime.ReasonABIMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := m.Resolve(context.Background(), tt.ref)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Resolve() error = %v, want it to contain %q", err, tt.wantErr)
			}
			if tt.wantReason != "" && !errors.Is(err, &runtime.Error{Reason: tt.wantReason}) {
				t.Errorf("reason = %s, want %s", runtime.ReasonOf(err), tt.wantReason)
			}
		})
	}
	if got := testutil.ToFloat64(m.metrics.failures.WithLabelValues("abiv2", "ABIMismatch")); got != 1 {
		t.Errorf("ABIMismatch failures = %v, want 1", got)
	}
}

func TestResolveImage(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()

	pusher, err := oci.NewClient(oci.Options{PlainHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	wasm := testPlugin(t, "healthy")
	art, err := pusher.Push(ctx, host+"/osm/healthy:1.0.0", wasm, nil)
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	m, _, _ := newManager(t, Config{CacheDir: dir, Registry: RegistryConfig{PlainHTTP: true}}, nil)
	ctx = WaitForPulls(ctx)
	p, err := m.Resolve(ctx, Reference{Image: art.Reference})
	if err != nil {
		t.Fatal(err)
	}
	if loaded := m.Loaded(); loaded != 1 || p.Source.ManifestDigest != art.ManifestDigest.String() || p.Source.ModuleDigest != runtime.Digest(wasm) {
		t.Errorf("source = %+v, %d modules loaded", p.Source, loaded)
	}
	if _, err := p.Render(ctx, renderRequest()); err != nil {
		t.Fatal(err)
	}

	// A restarted controller with the same cache directory needs neither the registry nor a compile.
	srv.Close()
	restarted, _, _ := newManager(t, Config{CacheDir: dir, Registry: RegistryConfig{PlainHTTP: true}}, nil)
	if _, err := restarted.Resolve(ctx, Reference{Image: art.Reference}); err != nil {
		t.Fatalf("resolve after restart with the registry down: %v", err)
	}
	for layer, want := range map[string]float64{"oci": 1, "disk": 1} {
		if got := testutil.ToFloat64(restarted.metrics.cacheHits.WithLabelValues(layer)); got != want {
			t.Errorf("%s cache hits = %v, want %v", layer, got, want)
		}
	}
	_, err = restarted.Resolve(ctx, Reference{Image: host + "/osm/other@" + art.ManifestDigest.String()[:20]})
	if err == nil {
		t.Error("resolving an unreachable image succeeded")
	}
	if got := testutil.ToFloat64(restarted.metrics.failures.WithLabelValues(host+"/osm/other", "PullError")); got != 1 {
		t.Errorf("PullError failures = %v, want 1", got)
	}
}

func TestConfigSchemaIsApplied(t *testing.T) {
	// The template example declares a schema; resolving with an unknown key must fail at resolution, before
	// any render.
	path, err := plugintest.BuildWasm(filepath.Join("..", "..", "sdk", "examples", "template"))
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, _, _ := newManager(t, Config{}, fstest.MapFS{"template.wasm": {Data: wasm}})
	p, err := m.Resolve(context.Background(), Reference{Builtin: "template"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Config["maxMapCount"] != "262144" {
		t.Errorf("default not applied: %v", p.Config)
	}
	if _, err := m.Resolve(context.Background(), Reference{Builtin: "template", Config: map[string]string{"ntpSever": "x"}}); err == nil ||
		!strings.Contains(err.Error(), "ntpSever is not a setting of plugin template") {
		t.Errorf("misspelt config key: err = %v", err)
	}
}

func TestMetricsShareARegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	for range 2 {
		m, err := New(Config{}, nil, reg, logr.Discard())
		if err != nil {
			t.Fatalf("second manager on one registry: %v", err)
		}
		_ = m.Close(context.Background())
	}
}
