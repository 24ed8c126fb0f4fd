package runtime_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestMain, under -race, first fills the shared compilation cache with a build of internal/testprecompile
// made without -race: the same machine code, compiled by an uninstrumented wazero several times faster.
// Failing to is only slower: each test then compiles what it needs itself.
func TestMain(m *testing.M) {
	if raceEnabled {
		if err := precompileWithoutRace(); err != nil {
			fmt.Fprintf(os.Stderr, "precompiling the test plugins without -race failed, the tests compile them: %v\n", err)
		}
	}
	os.Exit(m.Run())
}

// likeTestBinaries are the linker flags that give a program the code directories a test binary has: go test
// records no module versions, so wazero names its compilation cache "dev" and the runtime its snapshots
// "unknown".
const likeTestBinaries = "-X github.com/tetratelabs/wazero/internal/version.version=dev -X github.com/osmhq/osm/sdk/runtime.linkedWazeroVersion=unknown"

func precompileWithoutRace() error {
	cache, err := sharedCachePath()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "testprecompile-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	tool := filepath.Join(tmp, "testprecompile")
	if out, err := exec.Command("go", "build", "-o", tool, "-ldflags", likeTestBinaries, "./internal/testprecompile").CombinedOutput(); err != nil {
		return fmt.Errorf("building testprecompile: %w\n%s", err, out)
	}
	dirs, err := filepath.Glob(filepath.Join("testdata", "plugins", "*"))
	if err != nil {
		return err
	}
	if out, err := exec.Command(tool, append([]string{cache}, dirs...)...).CombinedOutput(); err != nil {
		return fmt.Errorf("%w\n%s", err, out)
	}
	return nil
}
