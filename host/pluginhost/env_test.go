package pluginhost

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHostEnvironmentHoldsNoControllerSecrets: a plugin host gets its configuration and the Go runtime's
// variables, nothing else of the controller's environment, which may hold credentials.
func TestHostEnvironmentHoldsNoControllerSecrets(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "do-not-pass")
	t.Setenv("KUBECONFIG", "/etc/kubernetes/admin.conf")
	t.Setenv("GOMAXPROCS", "2")
	env := hostEnv(`{"timeout":1}`)
	for _, kv := range env {
		if strings.Contains(kv, "do-not-pass") || strings.HasPrefix(kv, "KUBECONFIG=") {
			t.Errorf("the host's environment holds %q", kv)
		}
	}
	if !strings.HasPrefix(env[0], envConfig+"=") || !containsKV(env, "GOMAXPROCS=2") {
		t.Errorf("environment = %q, want the configuration and GOMAXPROCS", env)
	}
}

func containsKV(env []string, kv string) bool {
	for _, e := range env {
		if e == kv {
			return true
		}
	}
	return false
}

// TestTheDedicatedHostIsPreferred: the controller starts osm-plugin-host when it lies next to its executable
// (the image ships both), and itself otherwise.
func TestTheDedicatedHostIsPreferred(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "osm-controller")
	if got := hostExecutable(exe); got != exe {
		t.Errorf("without a dedicated host: %s, want %s", got, exe)
	}
	host := filepath.Join(dir, HostExecutable)
	if err := os.WriteFile(host, []byte("#!/bin/true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := hostExecutable(exe); got != exe {
		t.Errorf("with a host that is not executable: %s, want %s", got, exe)
	}
	if err := os.Chmod(host, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := hostExecutable(exe); got != host {
		t.Errorf("with the dedicated host: %s, want %s", got, host)
	}
}
