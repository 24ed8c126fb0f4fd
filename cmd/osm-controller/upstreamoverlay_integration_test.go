package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/testenv"
)

// upstreamNodeArgs are node settings an operator gave upstream's controller, in each form Go's flag package
// reads (-name=value, -name value, a boolean alone, a repeated flag), split between the container's command and
// its args as installers do; plus an argument upstream accepts and OSM ignores, and one OSM does not know.
var (
	upstreamCommandExtra = []string{
		"-node-registry-mirrors=https://mirror.example.com",
		"-node-containerd-registry-mirrors=docker.io=https://harbor.example.com",
		"-node-containerd-registry-mirrors=quay.io=https://quay-mirror.example.com",
		"-external-cloud-provider",
		"-pause-image", "registry.k8s.io/pause:3.10",
		"-ca-bundle=/etc/kubernetes/pki/ca-bundle.pem",
	}
	upstreamArgsExtra = []string{
		"-node-http-proxy", "http://proxy.example.com:3128",
		"-node-no-proxy=.svc,.cluster.local,localhost",
		"-osm-test-not-a-flag=1",
	}
)

// TestInstallOverUpstreamKeepsFlags runs the documented install over upstream's Deployment (docs/migration.md
// step 2) against a real API server with kubectl: upstream v1.11.2's Deployment with non-default node settings
// (its cluster DNS 10.10.10.10, registry mirrors, an HTTP proxy), osmctl upstream-overlay over the live
// object, kubectl apply -k. The resulting Deployment has one container running OSM's image, and its arguments,
// parsed with the controller's own flag set, give the controller upstream's settings; then the webhooks
// component added after it keeps them too.
func TestInstallOverUpstreamKeepsFlags(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	kubectl := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(testenv.Kubectl(t), append([]string{"--kubeconfig", env.Kubeconfig}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	dir := t.TempDir()
	upstream := upstreamDeployment(t)
	writeYAML(t, filepath.Join(dir, "upstream.yaml"), upstream)
	kubectl("apply", "-f", filepath.Join(dir, "upstream.yaml"))

	live := kubectl("-n", "kube-system", "get", "deployment", "operating-system-manager", "-o", "yaml")
	if err := os.WriteFile(filepath.Join(dir, "live.yaml"), []byte(live), 0o600); err != nil {
		t.Fatal(err)
	}
	overlay := filepath.Join(dir, "osm-over-upstream")
	osmctl := buildOsmctl(t)
	report, err := exec.Command(osmctl, "upstream-overlay", "-f", filepath.Join(dir, "live.yaml"),
		"--deploy", filepath.Join(testenv.RepoRoot(), "deploy"), "-o", overlay).CombinedOutput()
	if err != nil {
		t.Fatalf("osmctl upstream-overlay: %v\n%s", err, report)
	}
	t.Logf("osmctl upstream-overlay:\n%s", report)
	for _, want := range []string{"left out:  -osm-test-not-a-flag=1", "kept:      -ca-bundle=/etc/kubernetes/pki/ca-bundle.pem (accepted and ignored",
		"kept:      -node-http-proxy http://proxy.example.com:3128", "added:     -plugin-cache-dir=/var/cache/osm (from deploy/)"} {
		if !strings.Contains(string(report), want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	kubectl("apply", "-k", overlay)

	got := liveDeployment(t, env)
	c := got.Spec.Template.Spec.Containers
	if len(c) != 1 {
		t.Fatalf("the Deployment has %d containers after the install, want 1 (upstream's updated in place)", len(c))
	}
	if !strings.HasPrefix(c[0].Image, "ghcr.io/osmhq/osm-controller:") || !slices.Equal(c[0].Command, []string{"/usr/local/bin/osm-controller"}) {
		t.Errorf("image %s, command %q: want OSM's", c[0].Image, c[0].Command)
	}
	f := effectiveFlags(t, c[0].Args)
	checkUpstreamSettings(t, f)
	if f.workerCount != 5 || f.namespace != "kube-system" || f.metricsAddress != "0.0.0.0:8080" || f.healthProbeAddress != "0.0.0.0:8085" {
		t.Errorf("controller flags: worker-count %d, namespace %q, metrics %q, probes %q: want upstream's 5, kube-system, 0.0.0.0:8080, 0.0.0.0:8085",
			f.workerCount, f.namespace, f.metricsAddress, f.healthProbeAddress)
	}
	if f.plugins.cacheDir.dir != "/var/cache/osm" || f.caBundle != "/etc/kubernetes/pki/ca-bundle.pem" {
		t.Errorf("plugin cache %q (want deploy/'s /var/cache/osm), -ca-bundle %q (kept)", f.plugins.cacheDir.dir, f.caBundle)
	}

	// Step 5: the webhooks component after upstream-flags.
	k := filepath.Join(overlay, "kustomization.yaml")
	data, err := os.ReadFile(k)
	if err != nil {
		t.Fatal(err)
	}
	component, err := filepath.Rel(overlay, filepath.Join(testenv.RepoRoot(), "deploy", "webhooks"))
	if err != nil {
		t.Fatal(err)
	}
	webhooks := strings.Replace(string(data), "- upstream-flags\n", "- upstream-flags\n- "+component+"\n", 1)
	if webhooks == string(data) {
		t.Fatalf("no components list in %s:\n%s", k, data)
	}
	if err := os.WriteFile(k, []byte(webhooks), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl("apply", "-k", overlay)
	f = effectiveFlags(t, liveDeployment(t, env).Spec.Template.Spec.Containers[0].Args)
	checkUpstreamSettings(t, f)
	if f.webhooks != "true" {
		t.Errorf("-webhooks %q after adding deploy/webhooks, want true", f.webhooks)
	}
}

func upstreamDeployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "host", "app", "testdata", "upstream-v1.11.2", "operating-system-manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{}
	if err := yaml.Unmarshal(data, d); err != nil {
		t.Fatal(err)
	}
	c := &d.Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Command, "-cluster-dns=10.10.10.10") {
		t.Fatalf("upstream's Deployment no longer sets -cluster-dns=10.10.10.10: %q", c.Command)
	}
	c.Command = append(c.Command, upstreamCommandExtra...)
	c.Args = append(c.Args, upstreamArgsExtra...)
	return d
}

func writeYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func liveDeployment(t *testing.T, env *testenv.Env) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: "kube-system", Name: "operating-system-manager"}, d); err != nil {
		t.Fatal(err)
	}
	return d
}

// effectiveFlags parses args with the controller's flag set, as the container would start, and fails on a
// flag given twice: which one counts would then hang on the order.
func effectiveFlags(t *testing.T, args []string) *flags {
	t.Helper()
	f := &flags{}
	fs := flag.NewFlagSet("osm-controller", flag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("the controller would not start with %q: %v", args, err)
	}
	if fs.NArg() != 0 {
		t.Errorf("arguments after the flags: %q", fs.Args())
	}
	seen := map[string]int{}
	for _, a := range args {
		if name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); strings.HasPrefix(a, "-") {
			seen[name]++
		}
	}
	for name, n := range seen {
		if n > 1 && name != "node-containerd-registry-mirrors" {
			t.Errorf("-%s given %d times in %q", name, n, args)
		}
	}
	return f
}

// checkUpstreamSettings checks the node settings the controller renders with are upstream's.
func checkUpstreamSettings(t *testing.T, f *flags) {
	t.Helper()
	s, err := f.node.Settings(render.DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{
		"cluster DNS":                fmt.Sprint(s.ClusterDNSIPs),
		"registry mirrors":           s.RegistryMirrors,
		"containerd registry mirror": s.ContainerdRegistryMirrors,
		"HTTP proxy":                 s.HTTPProxy,
		"no proxy":                   s.NoProxy,
		"pause image":                s.PauseImage,
		"external cloud provider":    s.ExternalCloudProvider,
	}
	want := map[string]any{
		"cluster DNS":      "[10.10.10.10]",
		"registry mirrors": []string{"https://mirror.example.com"},
		"containerd registry mirror": map[string][]string{"docker.io": {"https://harbor.example.com"},
			"quay.io": {"https://quay-mirror.example.com"}},
		"HTTP proxy":              "http://proxy.example.com:3128",
		"no proxy":                ".svc,.cluster.local,localhost",
		"pause image":             "registry.k8s.io/pause:3.10",
		"external cloud provider": true,
	}
	for k, w := range want {
		if !reflect.DeepEqual(got[k], w) {
			t.Errorf("%s: the controller runs with %v, upstream's Deployment had %v", k, got[k], w)
		}
	}
}

func buildOsmctl(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "osmctl")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/osmctl")
	cmd.Dir = testenv.RepoRoot()
	if data, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building osmctl: %v\n%s", err, data)
	}
	return out
}
