package pluginhost

import (
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
