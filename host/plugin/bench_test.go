package plugin

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/osmhq/osm/host/oci"
)

// BenchmarkControllerRestart is a controller restart with a warm cache directory: a new Manager resolves a
// plugin image pinned by digest (served from the OCI cache; the registry is down), loads it (compiled code
// from the disk cache, metadata read and validated) and renders once.
//
//	go test -run '^$' -bench ControllerRestart -count 5 ./host/plugin
func BenchmarkControllerRestart(b *testing.B) {
	ctx := WaitForPulls(context.Background())
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	host := strings.TrimPrefix(srv.URL, "http://")
	pusher, err := oci.NewClient(oci.Options{PlainHTTP: true})
	if err != nil {
		b.Fatal(err)
	}
	art, err := pusher.Push(ctx, host+"/osm/healthy:1", testPlugin(b, "healthy"), nil)
	if err != nil {
		b.Fatal(err)
	}
	cfg := Config{CacheDir: b.TempDir(), Registry: RegistryConfig{PlainHTTP: true}}
	warm, err := New(cfg, nil, prometheus.NewRegistry(), logr.Discard())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := warm.Resolve(ctx, Reference{Image: art.Reference}); err != nil {
		b.Fatal(err)
	}
	_ = warm.Close(ctx)
	srv.Close()

	for b.Loop() {
		m, err := New(cfg, nil, prometheus.NewRegistry(), logr.Discard())
		if err != nil {
			b.Fatal(err)
		}
		p, err := m.Resolve(ctx, Reference{Image: art.Reference})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.Render(ctx, renderRequest()); err != nil {
			b.Fatal(err)
		}
		_ = m.Close(ctx)
	}
}

// BenchmarkResolveLoaded is the per-reconcile cost of resolving an already loaded plugin.
func BenchmarkResolveLoaded(b *testing.B) {
	m, err := New(Config{CacheDir: sharedCache(b)}, nil, prometheus.NewRegistry(), logr.Discard())
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close(context.Background())
	m.builtins = builtinFS(testPlugin(b, "healthy"))
	ref := Reference{Builtin: "healthy", Config: map[string]string{"a": "b"}}
	if _, err := m.Resolve(context.Background(), ref); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := m.Resolve(context.Background(), ref); err != nil {
			b.Fatal(err)
		}
	}
}
