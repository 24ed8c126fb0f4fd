package plugintest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osmhq/osm/sdk/runtime"
)

// Load loads a built module into a runtime with the controller's production limits (memory cap, timeout,
// sandbox) and returns it; everything is closed when the test ends. Guest stderr is logged through t.Log.
// Compiled code is cached on disk next to the build cache, so repeated runs skip compilation.
func Load(t testing.TB, wasmPath string) *runtime.Module {
	t.Helper()
	wasm, err := os.ReadFile(wasmPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := runtime.Config{Hooks: runtime.Hooks{Output: func(e runtime.OutputEvent) {
		t.Logf("plugin %s %s %s: %s", e.Plugin, e.Export, e.Stream, strings.TrimRight(e.Text, "\n"))
	}}}
	if dir, err := cacheDir(); err == nil {
		cfg.CacheDir = filepath.Join(dir, "wazero")
	}
	rt, err := runtime.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	name := strings.TrimSuffix(filepath.Base(wasmPath), ".wasm")
	m, err := rt.Load(context.Background(), name, wasm)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
