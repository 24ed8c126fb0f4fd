package plugintest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// BuildFlags are the `go build` flags of a plugin build besides GOOS=wasip1 GOARCH=wasm. -buildmode=c-shared
// makes a reactor module whose exports can be called repeatedly (without it the first export call crashes);
// -trimpath keeps local paths out of the module so the same source gives the same digest on every machine;
// -s -w drop symbol tables the host never reads. These are the flags of hack/build-plugins.sh.
var BuildFlags = []string{"-buildmode=c-shared", "-trimpath", "-ldflags=-s -w"}

// CacheDirEnv overrides where built modules are cached (default: <user cache dir>/osm/plugintest).
const CacheDirEnv = "OSM_PLUGINTEST_CACHE"

// buildMu serialises builds inside one test binary: they are CPU bound and the machines are small.
var buildMu sync.Mutex

// Build compiles the plugin's main package in dir to a wasip1 module and returns the module's path. Modules
// are cached by a hash of every non-standard-library source file the package depends on and of the Go
// version, so repeated test runs skip the ≈1–2 s link.
func Build(t testing.TB, dir string) string {
	t.Helper()
	path, err := BuildWasm(dir)
	if err != nil {
		t.Fatalf("building plugin %s: %v", dir, err)
	}
	return path
}

// BuildWasm is Build for callers without a testing.TB (benchmarks' setup, tools).
func BuildWasm(dir string) (string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()

	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	key, err := sourceHash(abs)
	if err != nil {
		return "", err
	}
	cache, err := cacheDir()
	if err != nil {
		return "", err
	}
	out := filepath.Join(cache, filepath.Base(abs)+"-"+key[:32]+".wasm")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	tmp, err := os.CreateTemp(cache, ".build-*.wasm")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer func() { _ = os.Remove(tmp.Name()) }()

	args := append([]string{"build"}, BuildFlags...)
	args = append(args, "-o", tmp.Name(), ".")
	cmd := exec.Command("go", args...)
	cmd.Dir = abs
	cmd.Env = wasmEnv()
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %v: %w\n%s", args, err, b)
	}
	// Rename is atomic, so parallel test binaries building the same plugin never see a partial module.
	if err := os.Rename(tmp.Name(), out); err != nil {
		return "", err
	}
	return out, nil
}

func wasmEnv() []string { return append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm") }

func cacheDir() (string, error) {
	dir := os.Getenv(CacheDirEnv)
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("no cache directory (set %s): %w", CacheDirEnv, err)
		}
		dir = filepath.Join(base, "osm", "plugintest")
	}
	return dir, os.MkdirAll(dir, 0o755)
}

// listedPackage is the part of `go list -json` output the hash needs.
type listedPackage struct {
	Dir        string
	Standard   bool
	GoFiles    []string
	CgoFiles   []string
	EmbedFiles []string
	Module     *struct{ GoMod string }
}

// sourceHash hashes the Go version, the build flags and every file that goes into the module except the
// standard library (which the Go version pins).
func sourceHash(dir string) (string, error) {
	cmd := exec.Command("go", "list", "-deps", "-json=Dir,Standard,GoFiles,CgoFiles,EmbedFiles,Module", ".")
	cmd.Dir = dir
	cmd.Env = wasmEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list in %s: %w\n%s", dir, err, stderr.Bytes())
	}
	ver, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOVERSION: %w", err)
	}
	h := sha256.New()
	_, _ = fmt.Fprintf(h, "go=%s flags=%q\n", bytes.TrimSpace(ver), BuildFlags)
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return "", err
		}
		if p.Standard {
			continue
		}
		files := append(append(append([]string{}, p.GoFiles...), p.CgoFiles...), p.EmbedFiles...)
		if p.Module != nil && p.Module.GoMod != "" {
			files = append(files, p.Module.GoMod)
		}
		for _, f := range files {
			if !filepath.IsAbs(f) {
				f = filepath.Join(p.Dir, f)
			}
			if err := hashFile(h, f); err != nil {
				return "", err
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func hashFile(h io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, _ = fmt.Fprintf(h, "file %s\n", path)
	_, err = io.Copy(h, f)
	return err
}
