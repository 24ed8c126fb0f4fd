package main

import (
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/osmhq/osm/plugins"
	"github.com/osmhq/osm/sdk/plugintest"
)

// Plugins the tests build from the SDK module (cached by plugintest across runs).
const (
	templatePluginDir = "../../sdk/examples/template"
	abiV2PluginDir    = "../../sdk/runtime/testdata/plugins/abiv2"
	panicPluginDir    = "../../sdk/runtime/testdata/plugins/panic"
)

// sharedWazeroCache keeps compiled plugins across tests and test runs: compiling a Go plugin takes a second or
// two, and the compilation cache is keyed by module digest, so sharing it cannot change what a test sees.
func sharedWazeroCache(t *testing.T) string {
	t.Helper()
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "osm", "osmctl-test", "wazero")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// newCacheDir returns a --cache-dir with an empty OCI cache (so registry tests really talk to registries) and
// the shared compilation cache.
func newCacheDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(sharedWazeroCache(t), filepath.Join(dir, "wazero")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// result is one osmctl run.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// osmctl runs the CLI in-process with a fresh cache directory unless args set one.
func osmctl(t *testing.T, args ...string) result {
	t.Helper()
	return osmctlIn(t, nil, args...)
}

func osmctlIn(t *testing.T, stdin io.Reader, args ...string) result {
	t.Helper()
	if !hasFlag(args, "--cache-dir") {
		args = append([]string{"--cache-dir", newCacheDir(t)}, args...)
	}
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, stdin, &stdout, &stderr)
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

// mustSucceed fails the test unless the run exited 0.
func mustSucceed(t *testing.T, r result) result {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("osmctl failed: %s", r)
	}
	return r
}

// testRegistry is an in-process OCI registry over plain HTTP.
type testRegistry struct {
	host     string
	srv      *httptest.Server
	requests atomic.Int64
}

func newRegistry(t *testing.T, wrap func(http.Handler) http.Handler) *testRegistry {
	t.Helper()
	r := &testRegistry{}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		inner = wrap(inner)
	}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.requests.Add(1)
		inner.ServeHTTP(w, req)
	}))
	t.Cleanup(r.srv.Close)
	r.host = strings.TrimPrefix(r.srv.URL, "http://")
	return r
}

// buildPlugin builds a plugin of the SDK module to wasm and copies it into a test directory under name.
func buildPlugin(t *testing.T, dir, name string) string {
	t.Helper()
	wasm, err := os.ReadFile(plugintest.Build(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(out, wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

var pinnedRefPattern = regexp.MustCompile(`\S+@sha256:[0-9a-f]{64}`)

// pinnedRef returns the first digest-pinned reference in s.
func pinnedRef(t *testing.T, s string) string {
	t.Helper()
	ref := pinnedRefPattern.FindString(s)
	if ref == "" {
		t.Fatalf("no pinned reference in %q", s)
	}
	return ref
}

// profileWithImage writes testdata/osp-exampleos.yaml with its plugin image set to ref and returns its path.
func profileWithImage(t *testing.T, ref string) string {
	t.Helper()
	data, err := os.ReadFile("testdata/osp-exampleos.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "osp.yaml")
	if err := os.WriteFile(p, bytes.ReplaceAll(data, []byte("PLUGIN_IMAGE"), []byte(ref)), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// pushTemplate pushes the template plugin to reg and returns its pinned reference.
func pushTemplate(t *testing.T, reg *testRegistry, repo string) string {
	t.Helper()
	wasm := buildPlugin(t, templatePluginDir, "template.wasm")
	r := mustSucceed(t, osmctl(t, "plugin", "push", "--plain-http", "-q", wasm, reg.host+"/"+repo))
	return strings.TrimSpace(r.stdout)
}

// newTLSRegistry starts a registry over TLS with a certificate no system trusts, and writes its CA to a file.
func newTLSRegistry(t *testing.T) (*testRegistry, string) {
	t.Helper()
	r := &testRegistry{srv: httptest.NewUnstartedServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))}
	r.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	r.srv.StartTLS()
	t.Cleanup(r.srv.Close)
	r.host = strings.TrimPrefix(r.srv.URL, "https://")
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	return r, ca
}

// requireBuiltin skips a test that needs an embedded default plugin when the plugins are not built (make plugins).
func requireBuiltin(t *testing.T, name string) {
	t.Helper()
	names, err := plugins.Names(plugins.Builtin())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(names, name) {
		t.Fatalf("the built-in plugin %s is not embedded: run make plugins before go test (make test does)", name)
	}
}

// goIn returns a runner of the go command in dir, offline (GOPROXY=off, -mod=readonly), that fails t on error
// and returns the command's output.
func goIn(t *testing.T, dir string) func(env []string, args ...string) string {
	return func(env []string, args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=readonly"), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
}

// scaffoldHas fails t for each file of dir (by its path in dir) that lacks one of the strings wanted of it.
func scaffoldHas(t *testing.T, dir string, want map[string][]string) {
	t.Helper()
	for name, ws := range want {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range ws {
			if !strings.Contains(string(data), w) {
				t.Errorf("%s lacks %q:\n%s", name, w, data)
			}
		}
	}
}
