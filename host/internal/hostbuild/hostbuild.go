// Package hostbuild builds cmd/osm-plugin-host for tests whose plugin hosts must not be the test binary
// itself: one built with -race runs wazero's compiler instrumented, several times slower (a test plugin's
// cold compile took close to the minute a test waits for a render). The race detector still watches the
// test binary, the supervisor's side; host/pluginhost tests the host's own code under -race.
package hostbuild

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// LikeTestBinaries are the linker flags that give a host the code directories a test binary has: go test
// records no module versions, so its wazero names its compilation cache "dev" and the runtime its snapshots
// "unknown" (hack/build-plugins.sh precompiles the default plugins for them under the same flags). A host
// built without them works too, but reads the release build's copy of the precompiled plugins, which the
// supervisor has not stamped (it stamps its own build's), so each of its starts hashes them all again.
const LikeTestBinaries = "-X github.com/tetratelabs/wazero/internal/version.version=dev -X github.com/osmhq/osm/sdk/runtime.linkedWazeroVersion=unknown"

// Build builds cmd/osm-plugin-host, without -race, into dir and returns its path. ldflags: LikeTestBinaries
// for a host that test binaries supervise, "" for one built as the image ships it.
func Build(dir, ldflags string) (string, error) {
	out := filepath.Join(dir, "osm-plugin-host")
	cmd := exec.Command("go", "build", "-o", out, "-ldflags", ldflags, "github.com/osmhq/osm/cmd/osm-plugin-host")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building osm-plugin-host: %w\n%s", err, b)
	}
	return out, nil
}

// BesideTestBinary, in a test binary built with -race, builds the host next to it, where every supervisor
// the tests start looks first (pluginhost's hostExecutable, as in the image), and returns what removes it
// again. Without -race it does nothing: the test binary serves as host, as fast as the image's.
func BesideTestBinary() (remove func(), err error) {
	if !Race {
		return func() {}, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	path, err := Build(filepath.Dir(exe), LikeTestBinaries)
	if err != nil {
		return nil, err
	}
	return func() { _ = os.Remove(path) }, nil
}

// Main runs a test binary's tests with BesideTestBinary's host: the body of a package's TestMain.
func Main(run func() int) int {
	remove, err := BesideTestBinary()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer remove()
	return run()
}
