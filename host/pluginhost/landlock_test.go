package pluginhost

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// envLandlockProbe runs the test binary as a process that confines itself as a host or a compile process
// does (the HostConfig in the variable, with the other module's cache after a "|") and reports which writes
// the kernel let through.
const envLandlockProbe = "OSM_TEST_LANDLOCK_PROBE"

func init() {
	spec, ok := os.LookupEnv(envLandlockProbe)
	if !ok {
		return
	}
	var probe struct {
		Host  HostConfig
		Other string
	}
	if err := json.Unmarshal([]byte(spec), &probe); err != nil {
		fmt.Println("probe:", err)
		os.Exit(2)
	}
	own, other := probe.Host.CacheDir, probe.Other
	if err := confine(probe.Host); err != nil {
		fmt.Println("confine:", err)
		os.Exit(2)
	}
	for _, path := range []string{filepath.Join(own, "entry"), filepath.Join(other, "entry"), filepath.Join(os.TempDir(), "osm-landlock-probe")} {
		err := os.WriteFile(path, []byte("tampered"), 0o644)
		fmt.Printf("%s %t\n", filepath.Base(filepath.Dir(path))+"/"+filepath.Base(path), err == nil)
	}
	// Replacing an existing file of another cache by rename, as an attacker would.
	err := os.Rename(filepath.Join(own, "existing"), filepath.Join(other, "victim"))
	fmt.Printf("rename %t\n", err == nil)
	os.Exit(0)
}

// TestWhoMayWriteTheCache: a process that runs guest code (a host: ReadOnlyCache) can write nothing at all,
// not even its own module's cache; a compile process, which runs none, its own module's cache and nothing
// else: not another module's cache, not /tmp, and it cannot move a file into another cache. Enforced by
// Landlock, so this test fails on a kernel without it (before Linux 5.13, or disabled): there restrictWrites
// confines nothing (best effort), and what still holds is the digests a host checks (verifyArtifacts) and the
// supervisor's check before it starts a host.
func TestWhoMayWriteTheCache(t *testing.T) {
	for _, tt := range []struct {
		name   string
		host   func(own string) HostConfig
		ownAll bool
	}{
		{"host of guest code", func(own string) HostConfig {
			return HostConfig{CacheDir: own, Landlock: true, ReadOnlyCache: true, Role: roleTenant}
		}, false},
		{"compile process", func(own string) HostConfig { return HostConfig{CacheDir: own, Landlock: true, Role: roleCompile} }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			own, other := filepath.Join(base, "tenants", "aaaa"), filepath.Join(base, "wazero")
			for _, f := range []string{filepath.Join(other, "victim"), filepath.Join(own, "existing")} {
				if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(f, []byte("compiled code"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			spec, err := json.Marshal(map[string]any{"Host": tt.host(own), "Other": other})
			if err != nil {
				t.Fatal(err)
			}
			exe, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(exe)
			cmd.Env = append(os.Environ(), envLandlockProbe+"="+string(spec))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("probe: %v\n%s", err, out)
			}
			want := fmt.Sprintf("aaaa/entry %t\nwazero/entry false\n%s/osm-landlock-probe false\nrename false\n", tt.ownAll, filepath.Base(os.TempDir()))
			if string(out) != want {
				t.Errorf("writes the kernel let through (path allowed):\n%s\nwant:\n%s", out, want)
			}
			for _, f := range []string{filepath.Join(other, "victim"), filepath.Join(own, "existing")} {
				if b, err := os.ReadFile(f); err != nil || string(b) != "compiled code" {
					t.Errorf("%s: %q, %v", f, b, err)
				}
			}
		})
	}
}
