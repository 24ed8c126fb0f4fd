package plugin

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/osmhq/osm/host/oci"
	"github.com/osmhq/osm/sdk/runtime"
)

// TestIdentifyLoadsNothing: what status and render hashes need on every reconcile costs no compile, no
// pull and no loaded module.
func TestIdentifyLoadsNothing(t *testing.T) {
	healthy := testPlugin(t, "healthy")
	m, reg, _ := newManager(t, Config{}, builtinFS(healthy))
	src, err := m.Identify(Reference{Builtin: "healthy"})
	if err != nil || src.ModuleDigest != runtime.Digest(healthy) || src.Builtin != "healthy" {
		t.Fatalf("Identify(builtin) = %+v, %v", src, err)
	}
	const image = "registry.invalid/osm/p@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	src, err = m.Identify(Reference{Image: image})
	if err != nil || src.ManifestDigest != image[strings.Index(image, "@")+1:] || src.ModuleDigest != "" {
		t.Fatalf("Identify(image) = %+v, %v", src, err)
	}
	// A digest recorded at build time is used as is; one that does not match the module fails its calls.
	recorded := fstest.MapFS{"healthy.wasm": {Data: healthy}, "healthy.wasm.sha256": {Data: []byte(strings.TrimPrefix(runtime.Digest(healthy), "sha256:") + "\n")},
		"stale.wasm": {Data: healthy}, "stale.wasm.sha256": {Data: []byte(strings.Repeat("0", 64))}}
	m2, _, _ := newManager(t, Config{}, recorded)
	if src, err := m2.Identify(Reference{Builtin: "healthy"}); err != nil || src.ModuleDigest != runtime.Digest(healthy) {
		t.Errorf("Identify with a recorded digest = %+v, %v", src, err)
	}
	if _, err := m2.Resolve(context.Background(), Reference{Builtin: "stale"}); err == nil || !strings.Contains(err.Error(), "not sha256:0000") {
		t.Errorf("Resolve with a stale recorded digest: err = %v", err)
	}
	if _, err := m.Identify(Reference{Image: "registry.invalid/osm/p:1"}); err == nil || !strings.Contains(err.Error(), "not pinned by digest") {
		t.Errorf("Identify(tag) error = %v", err)
	}
	if n := m.Loaded(); n != 0 {
		t.Errorf("%d modules loaded after Identify", n)
	}
	if n, _ := testutil.GatherAndCount(reg, "osm_plugin_compile_seconds"); n != 0 {
		t.Errorf("Identify compiled: %d compile series", n)
	}
	if _, ok := m.Metadata(runtime.Digest(healthy)); ok {
		t.Error("metadata known before any load")
	}
	if _, err := m.Resolve(context.Background(), Reference{Builtin: "healthy"}); err != nil {
		t.Fatal(err)
	}
	if md, ok := m.Metadata(runtime.Digest(healthy)); !ok || md.Name == "" {
		t.Errorf("metadata after a load = %+v, %v", md, ok)
	}
}

// TestAPulledModuleOutlivesItsHost: an image's module whose host stopped idle before anyone used it (the
// pull outlasted the idle timeout, as a cold compile under a CPU limit or a signature check can) resolves at
// once, without another pull, and renders in a new host, which loads it from the disk cache: the registry is
// gone by then. Asking the hosts whether one still had the module made every retry pull again, forever.
func TestAPulledModuleOutlivesItsHost(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ctx := context.Background()
	pusher, err := oci.NewClient(oci.Options{PlainHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	art, err := pusher.Push(ctx, strings.TrimPrefix(srv.URL, "http://")+"/osm/healthy:1.0.0", testPlugin(t, "healthy"), nil)
	if err != nil {
		t.Fatal(err)
	}
	// A reconcile waits for a pull no longer than PendingAfter: here, for none.
	m, _, _ := newManager(t, Config{CacheDir: t.TempDir(), IdleTimeout: 200 * time.Millisecond, Registry: RegistryConfig{PlainHTTP: true, PendingAfter: time.Nanosecond}}, nil)
	ref := Reference{Image: art.Reference}
	if _, err := m.Resolve(WaitForPulls(ctx), ref); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the idle host to stop", func() bool { return m.Loaded() == 0 })
	srv.Close()
	p, err := m.Resolve(ctx, ref) // as a reconcile resolves: waiting for no pull
	if err != nil {
		t.Fatalf("resolving the pulled image after its host stopped: %v", err)
	}
	if _, err := p.Render(ctx, renderRequest()); err != nil {
		t.Fatalf("rendering after its host stopped: %v", err)
	}
}

// TestIdleModulesAreUnloaded: a module no call used for the idle timeout is unloaded; the Plugin still works
// and loads it again.
func TestIdleModulesAreUnloaded(t *testing.T) {
	m, reg, _ := newManager(t, Config{IdleTimeout: 200 * time.Millisecond}, builtinFS(testPlugin(t, "healthy")))
	ctx := context.Background()
	p, err := m.Resolve(ctx, Reference{Builtin: "healthy"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Loaded() != 1 {
		t.Fatalf("loaded = %d after Resolve", m.Loaded())
	}
	waitFor(t, 20*time.Second, "the idle module to be unloaded", func() bool { return m.Loaded() == 0 })
	if _, err := p.Render(ctx, renderRequest()); err != nil {
		t.Fatalf("render after the idle unload: %v", err)
	}
	if got := gathered(t, reg, "osm_plugin_unloads_total"); got < 1 {
		t.Errorf("unloads = %v", got)
	}
}

// TestUnloadNeverBreaksACall: with room for one module, renders of two plugins from several goroutines
// keep pushing each other's module out; every render must still succeed, because a module is pinned for
// the duration of a call.
func TestUnloadNeverBreaksACall(t *testing.T) {
	healthy := testPlugin(t, "healthy")
	builtins := fstest.MapFS{"healthy.wasm": {Data: healthy}, "other.wasm": {Data: withCustomSection(healthy, "osm-test-other")}}
	m, reg, _ := newManager(t, Config{MaxLoadedModules: 1}, builtins)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5 {
				name := []string{"healthy", "other"}[(g+i)%2]
				p, err := m.Resolve(ctx, Reference{Builtin: name})
				if err == nil {
					_, err = p.Render(ctx, renderRequest())
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := m.Loaded(); n > 1 {
		t.Errorf("%d modules loaded once the calls ended, bound 1", n)
	}
	if got := gathered(t, reg, "osm_plugin_unloads_total"); got < 1 {
		t.Errorf("unloads = %v; the test did not exercise eviction", got)
	}
}

// TestDiscard: an admission review that loaded a plugin leaves nothing loaded behind, unless another user
// of the module appeared meanwhile.
func TestDiscard(t *testing.T) {
	m, _, _ := newManager(t, Config{}, builtinFS(testPlugin(t, "healthy")))
	ctx := context.Background()
	review, err := m.Resolve(ctx, Reference{Builtin: "healthy"})
	if err != nil {
		t.Fatal(err)
	}
	review.Discard()
	if n := m.Loaded(); n != 0 {
		t.Fatalf("%d modules loaded after the review discarded its plugin", n)
	}
	// Both resolve from the declarations the first load left: neither loads the module.
	review, err = m.Resolve(ctx, Reference{Builtin: "healthy"})
	if err != nil {
		t.Fatal(err)
	}
	render, err := m.Resolve(ctx, Reference{Builtin: "healthy"})
	if err != nil {
		t.Fatal(err)
	}
	if n := m.Loaded(); n != 0 {
		t.Fatalf("%d modules loaded by resolving a module whose declarations are known", n)
	}
	if _, err := render.Render(ctx, renderRequest()); err != nil {
		t.Fatal(err)
	}
	review.Discard()
	if n := m.Loaded(); n != 1 {
		t.Fatalf("%d modules loaded: the review discarded a module a render loaded", n)
	}
	if _, err := render.Render(ctx, renderRequest()); err != nil {
		t.Fatal(err)
	}
}

// TestPluginOutputIsDebugOnly: what a plugin writes to stderr reaches the log only at debug verbosity, as one
// line naming the plugin and digest, cut to a bounded length.
func TestPluginOutputIsDebugOnly(t *testing.T) {
	healthy := testPlugin(t, "healthy")
	for _, verbosity := range []int{0, 1} {
		var lines []string
		var mu sync.Mutex
		log := funcr.New(func(_, args string) {
			mu.Lock()
			lines = append(lines, args)
			mu.Unlock()
		}, funcr.Options{Verbosity: verbosity})
		m, err := New(Config{CacheDir: sharedCache(t)}, builtinFS(healthy), prometheus.NewRegistry(), log)
		if err != nil {
			t.Fatal(err)
		}
		p, err := m.Resolve(context.Background(), Reference{Builtin: "healthy"})
		if err == nil {
			_, err = p.Render(context.Background(), renderRequest())
		}
		_ = m.Close(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		var output []string
		for _, l := range lines {
			if strings.Contains(l, `"plugin output"`) {
				output = append(output, l)
			}
		}
		mu.Unlock()
		switch {
		case verbosity == 0 && len(output) > 0:
			t.Errorf("plugin output logged at the default verbosity: %v", output)
		case verbosity == 1 && len(output) == 0:
			t.Error("plugin output not logged at V(1)")
		}
		for _, l := range output {
			if !strings.Contains(l, `"plugin"="healthy"`) || !strings.Contains(l, `"digest"="sha256:`) || strings.Contains(l, "\n") ||
				len(l) > maxLoggedOutput+400 {
				t.Errorf("output line = %q", l)
			}
		}
	}
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRememberedRendersStartNoHost: once the module was unloaded and the plugin host stopped for idleness, a
// reconcile that resolves the plugin again and renders what the output memo remembers starts no host (and
// pulls nothing again), so none of the module's machine code comes back into memory; a render the memo has
// not seen starts one. Built-in and image plugins alike.
func TestRememberedRendersStartNoHost(t *testing.T) {
	healthy := testPlugin(t, "healthy")
	host, _ := testRegistry(t, nil)
	image := push(t, oci.Options{}, host+"/osm/healthy:1", healthy).Reference
	for name, ref := range map[string]Reference{"builtin": {Builtin: "healthy"}, "image": {Image: image}} {
		t.Run(name, func(t *testing.T) {
			// The image's pull goes to a cache of its own, as in TestPullSecretIsolation: pulled into the
			// shared one, it would answer TestSlowRegistry's pull of the same module at once.
			cache := sharedCache(t)
			if ref.Image != "" {
				cache = t.TempDir()
			}
			m, _, _ := newManager(t, Config{CacheDir: cache, IdleTimeout: 200 * time.Millisecond, Registry: RegistryConfig{PlainHTTP: true}},
				builtinFS(healthy))
			ctx := WaitForPulls(context.Background())
			p, err := m.Resolve(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.Render(ctx, renderRequest()); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 20*time.Second, "the idle module to be unloaded and the idle host to stop", func() bool { return m.Loaded() == 0 && len(m.HostPIDs()) == 0 })
			pulls := testutil.ToFloat64(m.metrics.cacheHits.WithLabelValues("oci"))

			again, err := m.Resolve(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := again.Render(ctx, renderRequest()); err != nil {
				t.Fatal(err)
			}
			if pids := m.HostPIDs(); len(pids) != 0 {
				t.Fatalf("plugin hosts %v after a resolution and a remembered render, want none", pids)
			}
			if got := testutil.ToFloat64(m.metrics.cacheHits.WithLabelValues("oci")); got != pulls {
				t.Errorf("the resolution pulled the image again (%v pulls from the cache, were %v)", got, pulls)
			}
			other := renderRequest()
			other.Context.MachineDeployment.Name = "other"
			if _, err := again.Render(ctx, other); err != nil {
				t.Fatal(err)
			}
			if pids := m.HostPIDs(); len(pids) != 1 {
				t.Fatalf("plugin hosts %v after a render the memo has not seen, want one", pids)
			}
		})
	}
}
