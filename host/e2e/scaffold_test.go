//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/testenv"
)

// testScaffoldedPluginJoins proves the public SDK makes a node join, the way an OS vendor would use it, outside
// plugins/: `osmctl plugin init` scaffolds a Debian (apt family) plugin module against the repository's sdk/
// (a replace directive, --sdk-dir), the scaffold's own `make build` builds it, `osmctl plugin push` publishes
// it to an OCI registry (in this process), and a copy of the air-gapped Debian profile whose spec.plugin is
// that image, pinned by digest, boots a node that joins with every check of DebianJoins.
func testScaffoldedPluginJoins(t *testing.T, c *cluster, base *osmv1alpha1.OperatingSystemProfile) {
	start := time.Now()
	root, dir := testenv.RepoRoot(), t.TempDir()
	osmctl := filepath.Join(dir, "osmctl")
	run(t, root, "go", "build", "-o", osmctl, "./cmd/osmctl")
	var providers []string
	for _, p := range base.Spec.SupportedCloudProviders {
		providers = append(providers, p.Name)
	}
	run(t, dir, osmctl, "plugin", "init", "debian", "--family", "apt", "--os-version", base.Spec.OSVersion,
		"--cloud-providers", strings.Join(providers, ","), "--module", "example.com/osm-e2e/debian",
		"--sdk-dir", filepath.Join(root, "sdk"), "--dir", "debian")
	module := filepath.Join(dir, "debian")
	run(t, module, "make", "build")

	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	ref := strings.TrimSpace(run(t, module, osmctl, "plugin", "push", "-q", "debian.wasm",
		strings.TrimPrefix(reg.URL, "http://")+"/osm/debian:0.1.0"))
	if !strings.Contains(ref, "@sha256:") {
		t.Fatalf("osmctl plugin push printed %q, want a reference pinned by digest", ref)
	}
	t.Logf("scaffolded, built and pushed %s in %s", ref, time.Since(start).Round(time.Second))

	osp := base.DeepCopy()
	osp.ObjectMeta = metav1.ObjectMeta{Name: "osp-debian-scaffolded", Namespace: osmNamespace}
	osp.Spec.Plugin = &osmv1alpha1.PluginReference{Image: ref, Config: base.Spec.Plugin.Config}
	if err := c.c.Create(context.Background(), osp); err != nil {
		t.Fatalf("creating profile %s: %v", osp.Name, err)
	}
	bootAndJoin(t, c, osp, "e2e-scaffolded", nil)

	var got osmv1alpha1.OperatingSystemConfigList
	if err := c.c.List(context.Background(), &got); err != nil {
		t.Fatal(err)
	}
	for _, o := range got.Items {
		if o.Status.Profile != "" && strings.HasPrefix(o.Status.Profile, osmNamespace+"/"+osp.Name+"@") {
			if o.Status.Plugin == nil || o.Status.Plugin.Source != ref || o.Status.Plugin.Version != "v0.1.0" {
				t.Errorf("OSC %s was not rendered by the pushed plugin: %+v", o.Name, o.Status.Plugin)
			}
			return
		}
	}
	t.Errorf("no OSC was rendered from %s", osp.Name)
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
