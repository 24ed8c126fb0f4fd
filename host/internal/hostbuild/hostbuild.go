// Package hostbuild builds cmd/osm-plugin-host for tests whose plugin hosts must not be the test binary
// itself (one built with -race runs wazero's compiler instrumented, several times slower).
package hostbuild

import (
	"fmt"
	"os/exec"
	"path/filepath"
)

// LikeTestBinaries are the linker flags that give a host the code directories a test binary has: go test
// records no module versions, so its wazero names its compilation cache "dev" and the runtime its snapshots
// "unknown" (hack/build-plugins.sh precompiles the default plugins for them under the same flags). A host
// built without them is refused by its supervisor (pluginhost's checkBuild).
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
