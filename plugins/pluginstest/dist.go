// Package pluginstest gives tests the default plugins as built by hack/build-plugins.sh, so a plain
// `go test ./...` works on a fresh clone without `make plugins` first (the build is skipped when up to date).
package pluginstest

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/osmhq/osm/host/testenv"
)

var (
	once   sync.Once
	errOut string
	failed error
)

// Dist builds the default plugins if needed and returns plugins/dist.
func Dist(t testing.TB) fs.FS {
	t.Helper()
	root := testenv.RepoRoot()
	once.Do(func() {
		out, err := exec.Command(filepath.Join(root, "hack", "build-plugins.sh")).CombinedOutput()
		failed, errOut = err, string(out)
	})
	if failed != nil {
		t.Fatalf("building the default plugins: %v\n%s", failed, errOut)
	}
	return os.DirFS(filepath.Join(root, "plugins", "dist"))
}

// CacheDir is where tests keep compiled plugins between runs and packages: compiling a plugin takes seconds
// (far more under the race detector), loading it from this cache a tenth of one.
func CacheDir(t testing.TB) string {
	t.Helper()
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "osm", "test-plugin-cache")
}
