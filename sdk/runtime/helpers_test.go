package runtime_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/osmhq/osm/sdk/internal/sample"
	"github.com/osmhq/osm/sdk/plugintest"
	"github.com/osmhq/osm/sdk/runtime"
)

// pristine is what the "healthy" plugin's state file says in a fresh instance. Instances start from a snapshot
// taken after osm_warmup rendered the SDK's sample for both stages: that is all a fresh instance has seen,
// never anything of another call.
var pristine = fmt.Sprintf("renders=2 previous=%q", sample.Request("", "", "", "", "").Context.MachineDeployment.Name)

var (
	wasmMu    sync.Mutex
	wasmCache = map[string][]byte{}
)

// testPlugin builds testdata/plugins/<name> (cached by source hash across runs) and returns its bytes.
func testPlugin(t testing.TB, name string) []byte {
	t.Helper()
	wasmMu.Lock()
	defer wasmMu.Unlock()
	if b, ok := wasmCache[name]; ok {
		return b
	}
	path := plugintest.Build(t, filepath.Join("testdata", "plugins", name))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	wasmCache[name] = b
	return b
}

// sharedCacheDir keeps compiled code across test runs, so that `go test -race`, whose compiler runs an order
// of magnitude slower, does not recompile every plugin each time. Tests about the cache use their own dirs.
func sharedCacheDir(t testing.TB) string {
	t.Helper()
	dir, err := sharedCachePath()
	if err != nil {
		return t.TempDir()
	}
	return dir
}

func sharedCachePath() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "osm", "runtime-test-wazero"), nil
}

func newRuntime(t testing.TB, cfg runtime.Config) *runtime.Runtime {
	t.Helper()
	if cfg.CacheDir == "" {
		cfg.CacheDir = sharedCacheDir(t)
	}
	rt, err := runtime.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Close(context.Background()); err != nil {
			t.Errorf("closing runtime: %v", err)
		}
	})
	return rt
}

func load(t testing.TB, rt *runtime.Runtime, name string) *runtime.Module {
	t.Helper()
	m, err := rt.Load(context.Background(), name, testPlugin(t, name))
	if err != nil {
		t.Fatalf("loading %s: %v", name, err)
	}
	return m
}
