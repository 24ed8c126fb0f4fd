package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPluginInitIgnition scaffolds an Ignition OS the way a Fedora CoreOS vendor would, runs its stage tests
// (plugintest.Check's boot contract and Ignition's own parser), renders it as Ignition, then serves a registry
// with `osmctl registry serve`'s server, pushes the module with --pin-profile and lints the pinned profile
// without --plugin-file: the module comes from the registry by the digest push wrote into osp.yaml.
func TestPluginInitIgnition(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fcos")
	mustSucceed(t, osmctl(t, "plugin", "init", "fcos", "--dir", dir, "--sdk-dir", "../../sdk", "--family", "ignition",
		"--os-version", "42", "--cloud-providers", "openstack,aws"))
	scaffoldHas(t, dir, map[string][]string{
		"plugin.go":      {"ignition.OS(ignition.FedoraCoreOS)", "provisioned by ignition"},
		"plugin_test.go": {"const utility = abi.UtilityIgnition", "plugintest.ValidateUserData(t, req, cfg)"},
		"osp.yaml":       {"provisioningUtility: ignition"},
		"Makefile":       {"plugin push --pin-profile osp.yaml"},
	})
	if data, _ := os.ReadFile(filepath.Join(dir, ".github/workflows/plugin.yaml")); strings.Contains(string(data), "cloud-init") {
		t.Errorf("the workflow of an Ignition plugin installs cloud-init:\n%s", data)
	}
	goCmd := goIn(t, dir)
	goCmd(nil, "vet", ".")
	goCmd(nil, "test", "-count=1", "-run", "TestGolden", "-update", ".")
	out := goCmd(nil, "test", "-count=1", "-v", "-run", "TestGolden|TestStages", ".")
	if !strings.Contains(out, "--- PASS: TestStages/aws/bootstrap") {
		t.Errorf("the stage tests did not run:\n%s", out)
	}
	golden, _ := os.ReadFile(filepath.Join(dir, "testdata", "bootstrap.txt"))
	for _, w := range []string{"/boot/ignition/config.ign", "touch /boot/ignition.firstboot", "touch /var/lib/osm/bootstrap.done", "osm-ignition-enable.service"} {
		if !strings.Contains(string(golden), w) {
			t.Errorf("the bootstrap lacks %q", w)
		}
	}
	wasm := filepath.Join(dir, "fcos.wasm")
	goCmd([]string{"GOOS=wasip1", "GOARCH=wasm"}, "build", "-buildmode=c-shared", "-trimpath", "-ldflags=-s -w", "-o", wasm, ".")
	osp := filepath.Join(dir, "osp.yaml")
	r := mustSucceed(t, osmctl(t, "render", "-f", filepath.Join(dir, "machinedeployment.yaml"), "--osp", osp, "--plugin-file", wasm, "--stage", "both"))
	for _, want := range []string{`"version":"3.3.0"`, "osm-bootstrap.service", "osm-setup.service"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("rendered Ignition lacks %q:\n%.2000s", want, r.stdout)
		}
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveRegistry(ctx, ln, t.TempDir(), nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("registry serve: %v", err)
		}
	})
	repo := ln.Addr().String() + "/osm/fcos"
	r = mustSucceed(t, osmctl(t, "plugin", "push", "-q", "--pin-profile", osp, wasm, repo+":0.1.0"))
	ref := strings.TrimSpace(r.stdout)
	data, _ := os.ReadFile(osp)
	if !strings.Contains(string(data), "    image: "+ref+"\n") || !strings.Contains(ref, "@sha256:") || !strings.Contains(string(data), "# The profile that runs this plugin") {
		t.Fatalf("--pin-profile did not pin %s into osp.yaml, keeping the rest:\n%s", ref, data)
	}
	mustSucceed(t, osmctl(t, "lint", "-f", osp))
	if r := osmctl(t, "plugin", "push", "--pin-profile", filepath.Join(dir, "machinedeployment.yaml"), wasm, repo+":0.1.0"); r.code == 0 ||
		!strings.Contains(r.stderr, "not an OperatingSystemProfile with spec.plugin.image") {
		t.Errorf("--pin-profile with a MachineDeployment: %s", r)
	}
}
