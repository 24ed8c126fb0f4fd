package runtime_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osmhq/osm/sdk/runtime"
)

// TestSandbox checks what a plugin can see: a fake clock, deterministic randomness, no file system, no
// network and no environment — and that two calls, each on a fresh instance, therefore render byte for byte
// the same.
func TestSandbox(t *testing.T) {
	sandboxReport(t, load(t, newRuntime(t, runtime.Config{}), "sandbox"))
}

func sandboxReport(t *testing.T, m *runtime.Module) map[string]string {
	report := func() map[string]string {
		t.Helper()
		resp, err := m.Render(context.Background(), renderRequest())
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, f := range resp.Config.Files {
			out[strings.TrimPrefix(f.Path, "/sandbox/")] = f.Content.Inline.Data
		}
		return out
	}
	first, second := report(), report()
	for _, key := range []string{"time", "crand", "mathrand"} {
		if first[key] == "" || first[key] != second[key] {
			t.Errorf("%s differs between fresh instances: %q vs %q", key, first[key], second[key])
		}
	}
	if year := time.Now().UTC().Format("2006"); strings.HasPrefix(first["time"], year) {
		t.Errorf("guest clock %q looks real", first["time"])
	}
	for key, want := range map[string]string{"fs": "true", "net": "true", "env": ""} {
		if first[key] != want {
			t.Errorf("%s = %q, want %q (fs/net: whether access failed)", key, first[key], want)
		}
	}
	return first
}

// TestCacheLayers follows one module through a cold compile, a load from memory and, after a restart, a load
// from the disk cache.
func TestCacheLayers(t *testing.T) {
	dir := t.TempDir()
	var compiles []runtime.CompileEvent
	var hits []runtime.CacheLayer
	hooks := runtime.Hooks{
		Compiled: func(e runtime.CompileEvent) { compiles = append(compiles, e) },
		CacheHit: func(l runtime.CacheLayer) { hits = append(hits, l) },
	}
	wasm := testPlugin(t, "healthy")
	ctx := context.Background()

	rt, err := runtime.New(runtime.Config{CacheDir: dir, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	m1, err := rt.Load(ctx, "healthy", wasm)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := rt.Load(ctx, "other-name", wasm)
	if err != nil {
		t.Fatal(err)
	}
	if m1 != m2 || m2.Name() != "healthy" || m1.Digest() != runtime.Digest(wasm) {
		t.Errorf("second load of the same bytes: got module %q, want the first one", m2.Name())
	}
	if got, ok := rt.Get(runtime.Digest(wasm)); !ok || got != m1 {
		t.Errorf("Get(digest) = %v, %v", got, ok)
	}
	if err := rt.Close(ctx); err != nil {
		t.Fatal(err)
	}

	restarted, err := runtime.New(runtime.Config{CacheDir: dir, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	defer restarted.Close(ctx)
	m3, err := restarted.Load(ctx, "healthy", wasm)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m3.Render(ctx, renderRequest()); err != nil {
		t.Fatal(err)
	}

	if len(compiles) != 2 || compiles[0].Layer != runtime.LayerNone || compiles[1].Layer != runtime.LayerDisk {
		t.Errorf("compile events = %+v, want a cold compile, then one from disk", compiles)
	}
	if want := []runtime.CacheLayer{runtime.LayerMemory, runtime.LayerMemory, runtime.LayerDisk}; !equal(hits, want) {
		t.Errorf("cache hits = %v, want %v", hits, want)
	}
}

// TestLoadFailureIsRemembered: a module that fails validation is not compiled again for every reconcile.
func TestLoadFailureIsRemembered(t *testing.T) {
	var compiles int
	rt := newRuntime(t, runtime.Config{Hooks: runtime.Hooks{Compiled: func(runtime.CompileEvent) { compiles++ }}})
	wasm := testPlugin(t, "abiv2")
	for range 3 {
		_, err := rt.Load(context.Background(), "abiv2", wasm)
		checkError(t, "abiv2", err, runtime.ReasonABIMismatch)
	}
	if compiles != 1 {
		t.Errorf("compiled %d times, want 1", compiles)
	}
	if err := rt.Unload(context.Background(), runtime.Digest(wasm)); err != nil {
		t.Fatal(err)
	}
	_, _ = rt.Load(context.Background(), "abiv2", wasm)
	if compiles != 2 {
		t.Errorf("after Unload: compiled %d times, want 2", compiles)
	}
}

func TestConcurrentLoadsCompileOnce(t *testing.T) {
	var compiles, hits atomic.Int32
	rt := newRuntime(t, runtime.Config{Hooks: runtime.Hooks{
		Compiled: func(runtime.CompileEvent) { compiles.Add(1) },
		CacheHit: func(l runtime.CacheLayer) {
			if l == runtime.LayerMemory {
				hits.Add(1)
			}
		},
	}})
	wasm := testPlugin(t, "healthy")
	errs := make(chan error)
	for range 4 {
		go func() {
			_, err := rt.Load(context.Background(), "healthy", wasm)
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if compiles.Load() != 1 || hits.Load() != 3 {
		t.Errorf("compiles = %d, memory hits = %d; want 1 and 3", compiles.Load(), hits.Load())
	}
}

func TestClosedModule(t *testing.T) {
	rt := newRuntime(t, runtime.Config{})
	m := load(t, rt, "healthy")
	if err := rt.Unload(context.Background(), m.Digest()); err != nil {
		t.Fatal(err)
	}
	_, err := m.Render(context.Background(), renderRequest())
	checkError(t, "render on a closed module", err, runtime.ReasonClosed, "module is closed")
}

func TestCanceledContext(t *testing.T) {
	m := load(t, newRuntime(t, runtime.Config{}), "loop")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := m.Render(ctx, renderRequest())
		done <- err
	}()
	cancel()
	checkError(t, "canceled render", <-done, runtime.ReasonCanceled, `plugin "loop"`, "canceled")
}

func TestConfigValidation(t *testing.T) {
	tests := []struct {
		name string
		cfg  runtime.Config
	}{
		{name: "tiny memory", cfg: runtime.Config{MemoryLimit: 1024}},
		{name: "huge memory", cfg: runtime.Config{MemoryLimit: 8 << 30}},
		{name: "negative timeout", cfg: runtime.Config{Timeout: -time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := runtime.New(tt.cfg); err == nil {
				t.Error("New accepted an invalid config")
			}
		})
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
