package pluginhost

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// envLandlockProbe runs the test binary as a process that confines itself as a host does and reports which
// writes the kernel let through.
const envLandlockProbe = "OSM_TEST_LANDLOCK_PROBE"

func init() {
	spec, ok := os.LookupEnv(envLandlockProbe)
	if !ok {
		return
	}
	own, other, _ := strings.Cut(spec, "|")
	if err := confine(HostConfig{CacheDir: own, Landlock: true}); err != nil {
		fmt.Println("confine:", err)
		os.Exit(2)
	}
	for _, path := range []string{filepath.Join(own, "entry"), filepath.Join(other, "entry"), filepath.Join(os.TempDir(), "osm-landlock-probe")} {
		err := os.WriteFile(path, []byte("tampered"), 0o644)
		fmt.Printf("%s %t\n", path, err == nil)
	}
	// Replacing an existing file of another cache by rename, as an attacker would.
	err := os.Rename(filepath.Join(own, "entry"), filepath.Join(other, "victim"))
	fmt.Printf("rename %t\n", err == nil)
	os.Exit(0)
}

// TestAHostWritesOnlyItsOwnCache: a process confined as a plugin host is (Landlock, on this kernel) can write
// its own cache directory and nothing else: not another module's cache, not /tmp, and it cannot move a file
// into another cache. This is what stops a guest that escaped wazero from replacing another module's compiled
// code.
func TestAHostWritesOnlyItsOwnCache(t *testing.T) {
	base := t.TempDir()
	own, other := filepath.Join(base, "tenants", "aaaa"), filepath.Join(base, "wazero")
	if err := os.MkdirAll(other, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "victim"), []byte("compiled code"), 0o600); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envLandlockProbe+"="+own+"|"+other)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("probe: %v\n%s", err, out)
	}
	want := fmt.Sprintf("%s true\n%s false\n%s false\nrename false\n", filepath.Join(own, "entry"), filepath.Join(other, "entry"),
		filepath.Join(os.TempDir(), "osm-landlock-probe"))
	if string(out) != want {
		t.Errorf("writes the kernel let through (path allowed):\n%s\nwant:\n%s", out, want)
	}
	if b, err := os.ReadFile(filepath.Join(other, "victim")); err != nil || string(b) != "compiled code" {
		t.Errorf("another module's cache entry: %q, %v", b, err)
	}
}
