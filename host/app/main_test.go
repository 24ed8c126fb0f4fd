package app_test

import (
	"os"
	"sync"
	"testing"

	"github.com/osmhq/osm/host/internal/hostbuild"
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
// the test binary does (hostbuild.LikeTestBinaries), which the host checks at start (pluginhost's checkBuild).
// Empty without -race: the test binary serves as its own host.
func pluginHost(t testing.TB) string {
	t.Helper()
	if !raceEnabled {
		return ""
	}
	hostOnce.Do(func() {
		if hostDir, hostErr = os.MkdirTemp("", "osm-app-test-host-"); hostErr == nil {
			hostExe, hostErr = hostbuild.Build(hostDir, hostbuild.LikeTestBinaries)
		}
	})
	if hostErr != nil {
		t.Fatal(hostErr)
	}
	return hostExe
}
