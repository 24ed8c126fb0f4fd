package runtime_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	osmruntime "github.com/osmhq/osm/sdk/runtime"
)

// TestAReadOnlyCacheThatCannotBeWritten: a runtime with ReadOnlyCache over a directory where wazero cannot
// create its cache (a file stands where its directory goes) still loads a module, compiled in memory, and
// touches nothing; over the cache a Compile filled (which runs none of the module's code), it loads from it.
// The refused write itself is the plugin host's Landlock, tested in host/pluginhost.
func TestAReadOnlyCacheThatCannotBeWritten(t *testing.T) {
	ctx := context.Background()
	wasm := testPlugin(t, "healthy")
	load := func(dir string) {
		t.Helper()
		rt, err := osmruntime.New(osmruntime.Config{CacheDir: dir, ReadOnlyCache: true, NoSnapshot: true})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = rt.Close(ctx) }()
		if _, err := rt.Load(ctx, "m", wasm); err != nil {
			t.Fatal(err)
		}
	}
	blocked := t.TempDir()
	for _, name := range []string{"wazero-dev-" + runtime.GOARCH + "-" + runtime.GOOS, "wazero-unknown-" + runtime.GOARCH + "-" + runtime.GOOS} {
		if err := os.WriteFile(filepath.Join(blocked, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	load(blocked)
	if entries, _ := os.ReadDir(blocked); len(entries) != 2 {
		t.Errorf("the read-only runtime wrote into %s: %v", blocked, entries)
	}
	filled := t.TempDir()
	rt, err := osmruntime.New(osmruntime.Config{CacheDir: filled, NoSnapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Compile(ctx, "m", wasm); err != nil {
		t.Fatal(err)
	}
	_ = rt.Close(ctx)
	load(filled)
}
