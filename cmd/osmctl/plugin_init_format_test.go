package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPluginInitFormat scaffolds a format plugin (--family format): its tests pass plugintest.Check against
// the join-from-settings contract it declares, -short skips the wasm build, and the controller's code renders
// its own user-data format through osm_encode and lints its profile.
func TestPluginInitFormat(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rocket")
	mustSucceed(t, osmctl(t, "plugin", "init", "rocket", "--dir", dir, "--sdk-dir", "../../sdk", "--family", "format", "--cloud-providers", "aws,vsphere"))
	scaffoldHas(t, dir, map[string][]string{
		"plugin.go":      {"BootContract: abi.BootContractJoinFromSettings", `const Utility = "rocket-settings"`, "[[settings.container-registry.credentials]]"},
		"main.go":        {"guest.Register(Plugin{})"},
		"osp.yaml":       {"provisioningUtility: rocket-settings"},
		"Makefile":       {"GOLDEN := testdata/bootstrap.txt testdata/provisioning.txt", "test: $(GOLDEN)"},
		"plugin_test.go": {"t.Skip(\"builds the plugin to wasm\")"},
	})
	if data, _ := os.ReadFile(filepath.Join(dir, ".github/workflows/plugin.yaml")); strings.Contains(string(data), "cloud-init") {
		t.Errorf("the workflow of a format plugin installs cloud-init:\n%s", data)
	}
	goCmd := goIn(t, dir)
	goCmd(nil, "vet", ".")
	goCmd(nil, "test", "-count=1", "-run", "TestGolden", "-update", ".")
	out := goCmd(nil, "test", "-short", "-count=1", "-v", ".")
	for _, w := range []string{"--- PASS: TestStages/vsphere/bootstrap", "--- SKIP: TestWasm"} {
		if !strings.Contains(out, w) {
			t.Errorf("go test -short lacks %q:\n%s", w, out)
		}
	}
	wasm := filepath.Join(dir, "rocket.wasm")
	goCmd([]string{"GOOS=wasip1", "GOARCH=wasm"}, "build", "-buildmode=c-shared", "-trimpath", "-ldflags=-s -w", "-o", wasm, ".")
	osp := filepath.Join(dir, "osp.yaml")
	r := mustSucceed(t, osmctl(t, "render", "-f", filepath.Join(dir, "machinedeployment.yaml"), "--osp", osp, "--plugin-file", wasm, "--stage", "both"))
	for _, want := range []string{"[settings.kubernetes]", "api-server = ", "bootstrap-token = "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("rendered settings lack %q:\n%.2000s", want, r.stdout)
		}
	}
	mustSucceed(t, osmctl(t, "lint", "-f", osp, "--plugin-file", wasm))
}
