package plugin_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/plugin"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/sdk/plugintest"
	"github.com/osmhq/osm/sdk/runtime"
)

func newResolver(t *testing.T) (*plugin.Resolver, []byte) {
	t.Helper()
	path, err := plugintest.BuildWasm(filepath.Join("..", "..", "sdk", "runtime", "testdata", "plugins", "healthy"))
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	m, err := plugin.New(plugin.Config{CacheDir: filepath.Join(cache, "osm", "host-plugin-test")}, fstest.MapFS{"healthy.wasm": {Data: wasm}}, prometheus.NewRegistry(), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return &plugin.Resolver{Manager: m}, wasm
}

// TestIdentify: the identity for status and render hashes, without loading; Name and Version from the
// metadata once the plugin was loaded.
func TestIdentify(t *testing.T) {
	s, wasm := newResolver(t)
	ctx := context.Background()
	ref := &osmv1alpha1.PluginReference{Builtin: "healthy"}
	id, md, err := s.Identify(ctx, "ns", ref)
	if err != nil || md != nil || id != (osmv1alpha1.ResolvedPlugin{Name: "healthy", Source: "builtin", Digest: runtime.Digest(wasm)}) {
		t.Fatalf("Identify() = %+v, %v, %v", id, md, err)
	}
	if n := s.Manager.Loaded(); n != 0 {
		t.Fatalf("Identify loaded %d modules", n)
	}
	p, err := s.Resolve(ctx, "ns", ref)
	if err != nil {
		t.Fatal(err)
	}
	id, md, err = s.Identify(ctx, "ns", ref)
	if err != nil || md == nil || id.Version != p.Metadata().Version || id.Digest != p.Identity().Digest {
		t.Errorf("after a load: Identify() = %+v, %v, %v; loaded identity %+v", id, md, err, p.Identity())
	}
	const image = "registry.invalid/osm/myos@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	id, _, err = s.Identify(ctx, "ns", &osmv1alpha1.PluginReference{Image: image, PullSecret: "creds"})
	if err != nil || id.Name != "myos" || id.Source != image || id.Digest != image[strings.Index(image, "@")+1:] {
		t.Errorf("Identify(image) = %+v, %v", id, err)
	}
	_, _, err = s.Identify(ctx, "ns", &osmv1alpha1.PluginReference{Builtin: "nope"})
	if render.Reason(err) != osmv1alpha1.ReasonPluginNotFound {
		t.Errorf("Identify(unknown) reason = %s (%v)", render.Reason(err), err)
	}
}

// TestResolveChecksCheapThingsFirst: a malformed reference is refused before its pull Secret is read (and
// long before anything is pulled or compiled).
func TestResolveChecksCheapThingsFirst(t *testing.T) {
	s, _ := newResolver(t)
	read := false
	s.PullSecret = func(context.Context, string, string) ([]byte, error) {
		read = true
		return nil, errors.New("unreachable")
	}
	_, err := s.Resolve(context.Background(), "ns", &osmv1alpha1.PluginReference{Image: "registry.invalid/osm/myos:1.0", PullSecret: "creds"})
	if err == nil || !strings.Contains(err.Error(), "not pinned by digest") || read {
		t.Errorf("Resolve(tag) = %v, pull Secret read: %v", err, read)
	}
	if render.Reason(err) != osmv1alpha1.ReasonPluginPullFailed {
		t.Errorf("reason = %s", render.Reason(err))
	}
}
