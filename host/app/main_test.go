package app_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/osmhq/osm/host/testenv"
)

// TestMain removes the plugin host built for the package's tests (pluginHost).
func TestMain(m *testing.M) {
	code := m.Run()
	if hostDir != "" {
		_ = os.RemoveAll(hostDir)
	}
	os.Exit(code)
}

var (
	hostOnce sync.Once
	hostDir  string
	hostExe  string
	hostErr  error
)

// pluginHost is the plugin host the package's controllers start when the test binary is built with -race:
// cmd/osm-plugin-host built without it, as the image ships it. The race detector watches the controller,
// whose goroutines these tests exercise; a host is one goroutine per call in a process of its own (tested
// under -race in host/pluginhost), and an instrumented one compiled a test plugin in close to the minute
// the tests wait for a render (cold CI failed TestSignedPlugins so). The host names its compiled code as
// the test binary does (wazero version "dev", snapshots "unknown"; the same flags hack/build-plugins.sh gives
// the test binaries' precompiled default plugins), which the host checks at start (pluginhost's checkBuild).
// Empty without -race: the test binary serves as its own host.
func pluginHost(t testing.TB) string {
	t.Helper()
	if !raceEnabled {
		return ""
	}
	hostOnce.Do(func() {
		if hostDir, hostErr = os.MkdirTemp("", "osm-app-test-host-"); hostErr != nil {
			return
		}
		hostExe = filepath.Join(hostDir, "osm-plugin-host")
		cmd := exec.Command("go", "build", "-o", hostExe, "-ldflags",
			"-X github.com/tetratelabs/wazero/internal/version.version=dev -X github.com/osmhq/osm/sdk/runtime.linkedWazeroVersion=unknown",
			"./cmd/osm-plugin-host")
		cmd.Dir = testenv.RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			hostErr = fmt.Errorf("building osm-plugin-host: %w\n%s", err, out)
		}
	})
	if hostErr != nil {
		t.Fatal(hostErr)
	}
	return hostExe
}
