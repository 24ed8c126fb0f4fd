//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/osmhq/osm/host/testenv"
)

// testMicroOSPluginConforms is the conformance run of sdk/examples/microos (the openSUSE MicroOS / SLE Micro
// shape of the SDK's Ignition family, node.MicroOSIgnition) with its own osp.yaml, on the MicroOS-shaped image
// of hack/e2e-node/rootfs-microos.sh. The harness plays that image (ignitionShapes): Ignition runs while
// /boot/writable/firstboot_happened is missing and reads its user config from ignition/config.ign on the file
// system labelled "ignition", which the node gets as a loop device (labelDevice). Ignition applies the
// bootstrap config at the first boot and creates the flag; the bootstrap fetches the provisioning config,
// stores it on the labelled file system, removes the flag and reboots; Ignition applies the stored config and
// creates the flag again; osm-ignition-enable.service enables the units of that second run and removes the
// stored config (it holds credentials); osm-setup provisions the node and its kubelet joins.
func testMicroOSPluginConforms(t *testing.T, c *cluster) {
	rootfs, err := script(filepath.Join(testenv.RepoRoot(), "hack", "e2e-node", "rootfs-microos.sh"))
	if err != nil {
		t.Fatal(err)
	}
	example := filepath.Join(testenv.RepoRoot(), "sdk", "examples", "microos")
	wasm := buildExample(t, example, "microos")
	osp := readProfile(t, filepath.Join(example, "osp.yaml"))
	res := c.conformance(t, conformanceRun{Name: "e2e-microos", Profile: osp, Plugin: wasm, Rootfs: strings.TrimSpace(rootfs)})
	n := res.Node
	if n == nil {
		return
	}
	t.Run("the node had a file system labelled ignition; the stored config is gone from it", func(t *testing.T) {
		if n.label == nil {
			t.Fatal("the harness gave the node no labelled file system: it did not recognise the MicroOS-shaped image")
		}
		names, exists, err := n.label.entries("/ignition")
		if err != nil {
			t.Fatal(err)
		}
		// The directory shows the bootstrap stored the config there; osm-ignition-enable removed the file.
		if !exists {
			t.Fatal("no /ignition directory on the labelled file system: the bootstrap never stored a config there")
		}
		if slices.Contains(names, "config.ign") {
			t.Errorf("ignition/config.ign is still on the labelled file system (%v): osm-ignition-enable did not remove the stored config, which holds credentials", names)
		}
		log, _ := os.ReadFile(filepath.Join(n.dir, "initramfs.log"))
		if !regexp.MustCompile(`\(boot ([2-9]|\d\d+)\): Ignition applies the stored LABEL=ignition:/ignition/config\.ign \(image shape microos`).Match(log) {
			t.Errorf("Ignition never applied ignition/config.ign of the labelled file system:\n%s", log)
		}
	})
	t.Run("the first-boot flag was removed for the second Ignition run and exists after it", func(t *testing.T) {
		log, _ := os.ReadFile(filepath.Join(n.dir, "initramfs.log"))
		// Boot 1 and the boot after the handoff ran Ignition because the flag was missing, and each created it.
		runs := regexp.MustCompile(`\(boot (\d+)\): Ignition applies .*image shape microos; first boot: remove /boot/writable/firstboot_happened\)`).FindAllSubmatch(log, -1)
		created := regexp.MustCompile(`\(boot (\d+)\): created /boot/writable/firstboot_happened`).FindAllSubmatch(log, -1)
		if len(runs) != 2 || len(created) != 2 {
			t.Errorf("want Ignition run twice on a missing flag and the flag created after each, got %d runs and %d creations:\n%s", len(runs), len(created), log)
		}
		listing, err := os.ReadFile(filepath.Join(n.dir, "boot-at-stop.txt"))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(strings.Split(string(listing), "\n"), "f writable/firstboot_happened") {
			t.Errorf("/boot/writable/firstboot_happened is missing when the node stopped; /boot held:\n%s", listing)
		}
	})
}

// buildExample builds the plugin of an SDK example (a package of the sdk module) to a .wasm module, as its
// README says, and returns the module's path.
func buildExample(t *testing.T, dir, name string) string {
	t.Helper()
	start := time.Now()
	out := filepath.Join(t.TempDir(), name+".wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-ldflags=-s -w", "-o", out, ".")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if res, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", dir, err, res)
	}
	t.Logf("built %s in %s", out, time.Since(start).Round(time.Second))
	return out
}
