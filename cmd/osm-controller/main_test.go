package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBinary builds the real binary and runs it: its flags must register (controller-runtime's own flags live on
// flag.CommandLine and must not collide with ours), -help must list upstream's flag names, and a missing
// -namespace must be a clear error.
func TestBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "osm-controller")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, _ := exec.Command(bin, "-help").CombinedOutput()
	for _, flag := range []string{"-kubeconfig", "-worker-cluster-kubeconfig", "-namespace", "-worker-count", "-cluster-dns",
		"-container-runtime", "-external-cloud-provider", "-pause-image", "-initial-taints", "-disable-default-osps",
		"-node-http-proxy", "-node-no-proxy", "-node-insecure-registries", "-node-registry-mirrors",
		"-node-containerd-registry-mirrors", "-node-registry-credentials-secret", "-node-kubelet-feature-gates",
		"-kubernetes-ca-bundle", "-host-ca-bundle", "-override-bootstrap-kubelet-apiserver",
		"-bootstrap-token-service-account-name", "-health-probe-address", "-metrics-address", "-leader-elect",
		"-log-format", "-log-debug", "-node-binary-base-url", "-plugin-cache-dir", "-device-ownership-from-security-context",
		"-ca-bundle", "-worker-health-probe-address", "-worker-metrics-address", "-webhooks"} {
		if !strings.Contains(string(out), "  "+flag+" ") && !strings.Contains(string(out), "  "+flag+"\n") {
			t.Errorf("-help does not list %s", flag)
		}
	}
	// Upstream's webhook binary's flags, as a subcommand and as a binary named "webhook".
	link := filepath.Join(filepath.Dir(bin), "webhook")
	if err := os.Symlink(bin, link); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []*exec.Cmd{exec.Command(bin, "webhook", "-help"), exec.Command(link, "-help")} {
		out, _ := cmd.CombinedOutput()
		for _, flag := range []string{"-namespace", "-cert-dir", "-metrics-bind-address", "-health-probe-bind-address", "-leader-elect",
			"-log-format", "-log-debug", "-kubeconfig"} {
			if !strings.Contains(string(out), "  "+flag+" ") && !strings.Contains(string(out), "  "+flag+"\n") {
				t.Errorf("%v does not list %s:\n%s", cmd.Args, flag, out)
			}
		}
	}
	out, err := exec.Command(link, "-log-format=console").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "-namespace is required") {
		t.Errorf("webhook without -namespace: err=%v output:\n%s", err, out)
	}
	out, err = exec.Command(bin).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "-namespace is required") {
		t.Errorf("without -namespace: err=%v output:\n%s", err, out)
	}
	out, err = exec.Command(bin, "-namespace", "kube-system", "-cluster-dns", "not-an-ip").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `-cluster-dns: \"not-an-ip\" is not an IP address`) {
		t.Errorf("bad -cluster-dns: err=%v output:\n%s", err, out)
	}
}
