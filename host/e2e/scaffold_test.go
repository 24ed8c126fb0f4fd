//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/testenv"
)

// testScaffoldedPluginJoins proves the public SDK makes a node join, the way an OS vendor would use it, outside
// plugins/: `osmctl plugin init` scaffolds a Debian (apt family) plugin module against the repository's sdk/
// (a replace directive, --sdk-dir), the scaffold's own `make build` builds it, and the vendor conformance run
// (conformance_test.go: `osmctl plugin push` to an OCI registry in this process, a copy of the air-gapped
// Debian profile pinned to the pushed digest, the Debian image) boots a node that passes every step, with
// every download from the binary mirror.
func testScaffoldedPluginJoins(t *testing.T, c *cluster, base *osmv1alpha1.OperatingSystemProfile) {
	var providers []string
	for _, p := range base.Spec.SupportedCloudProviders {
		providers = append(providers, p.Name)
	}
	module := scaffold(t, "debian", "apt", base.Spec.OSVersion, providers)
	res := c.conformance(t, conformanceRun{Name: "e2e-scaffolded", Profile: base, Plugin: filepath.Join(module, "debian.wasm")})
	if res.MD == nil {
		return
	}
	t.Run("binaries came from the local mirror, checksums verified", func(t *testing.T) { checkMirror(t, c) })
	var osc osmv1alpha1.OperatingSystemConfig
	if err := c.c.Get(context.Background(), client.ObjectKey{Namespace: osmNamespace, Name: render.OSCName(res.MD)}, &osc); err != nil {
		t.Fatal(err)
	}
	if osc.Status.Plugin == nil || osc.Status.Plugin.Source != res.Ref || osc.Status.Plugin.Version != "v0.1.0" {
		t.Errorf("OSC %s was not rendered by the pushed plugin %s: %+v", osc.Name, res.Ref, osc.Status.Plugin)
	}
}

// testScaffoldedIgnitionPluginConforms is the conformance run on a second kind of root file system: a plugin
// scaffolded with `osmctl plugin init --family ignition` (the Fedora CoreOS shape of sdk/node/ignition, as
// generated) and its own osp.yaml, booted on the Ignition-shaped image of hack/e2e-node/rootfs-ignition.sh
// (no cloud-init; /boot a file system of its own). The harness plays the initramfs: Ignition applies the
// bootstrap config at the first boot; the bootstrap fetches the provisioning config, stores it as Ignition's
// user config, flags a first boot and reboots; Ignition applies it; nothing but the plugin's
// osm-ignition-enable.service enables the units of that second run; osm-setup provisions the node and its
// kubelet joins.
func testScaffoldedIgnitionPluginConforms(t *testing.T, c *cluster) {
	rootfs, err := script(filepath.Join(testenv.RepoRoot(), "hack", "e2e-node", "rootfs-ignition.sh"))
	if err != nil {
		t.Fatal(err)
	}
	module := scaffold(t, "fcos", "ignition", "42", []string{"edge"})
	osp := readProfile(t, filepath.Join(module, "osp.yaml"))
	c.conformance(t, conformanceRun{Name: "e2e-fcos", Profile: osp, Plugin: filepath.Join(module, "fcos.wasm"), Rootfs: strings.TrimSpace(rootfs)})
}

// scaffold runs `osmctl plugin init` for a plugin module against the repository's sdk/ and builds it with the
// scaffold's own `make build`; it returns the module's directory, which holds <name>.wasm and osp.yaml.
func scaffold(t *testing.T, name, family, osVersion string, providers []string) string {
	t.Helper()
	start := time.Now()
	root, dir := testenv.RepoRoot(), t.TempDir()
	run(t, dir, osmctlBinary(t), "plugin", "init", name, "--family", family, "--os-version", osVersion,
		"--cloud-providers", strings.Join(providers, ","), "--module", "example.com/osm-e2e/"+name,
		"--sdk-dir", filepath.Join(root, "sdk"), "--dir", name)
	module := filepath.Join(dir, name)
	run(t, module, "make", "build")
	t.Logf("scaffolded (--family %s) and built %s in %s", family, filepath.Join(module, name+".wasm"), time.Since(start).Round(time.Second))
	return module
}

// run runs a command in dir and returns its standard output, failing the test with its output on an error.
func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}
