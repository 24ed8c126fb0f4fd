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

// TestInstallOverUpstreamKeepsFlags runs the commands of docs/migration.md's step 2 as written (kubectl get,
// osmctl upstream-overlay, kubectl apply -k) against a real API server over upstream v1.11.2's Deployment with
// non-default node settings (its cluster DNS 10.10.10.10, registry mirrors, an HTTP proxy, ...). The resulting
// Deployment has one container running OSM's image, and its arguments, parsed with the controller's own flag
// set, give the controller upstream's settings; after step 5 (the guide's components list, its command) they
// still do, with the webhooks on.
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

	// The guide's step 2, command by command, in a directory with deploy/ (and the CRDs it refers to) as in
	// the repository.
	work := filepath.Join(dir, "work")
	for _, d := range []string{"deploy", filepath.Join("crds", "bases")} {
		if err := os.CopyFS(filepath.Join(work, d), os.DirFS(filepath.Join(testenv.RepoRoot(), d))); err != nil {
			t.Fatal(err)
		}
	}
	osmctl := buildOsmctl(t)
	guide := migrationGuide(t)
	step2 := guideBlock(t, guide, "## 2.", "sh")
	if len(step2) != 3 || !strings.HasPrefix(step2[1], "osmctl upstream-overlay ") {
		t.Fatalf("step 2 of docs/migration.md is not the three commands this test runs: %q", step2)
	}
	var report string
	for i, line := range step2 {
		if out := runGuideLine(t, work, env.Kubeconfig, osmctl, line); i == 1 {
			report = out
		}
	}
	t.Logf("osmctl upstream-overlay:\n%s", report)
	for _, want := range []string{"left out:  -osm-test-not-a-flag=1", "kept:      -ca-bundle=/etc/kubernetes/pki/ca-bundle.pem (accepted and ignored",
		"kept:      -node-http-proxy http://proxy.example.com:3128", "added:     -plugin-cache-dir=/var/cache/osm (from deploy/)"} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	overlay := filepath.Join(work, "osm-over-upstream")

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

	// Step 5: the guide's components list, then its command.
	k := filepath.Join(overlay, "kustomization.yaml")
	kustomization := map[string]any{}
	readYAML(t, k, &kustomization)
	components := map[string]any{}
	if err := yaml.Unmarshal([]byte(strings.Join(guideBlock(t, guide, "## 5.", "yaml"), "\n")), &components); err != nil {
		t.Fatal(err)
	}
	kustomization["components"] = components["components"]
	writeYAML(t, k, kustomization)
	for _, line := range guideBlock(t, guide, "## 5.", "sh") {
		runGuideLine(t, work, env.Kubeconfig, osmctl, line)
	}
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

func migrationGuide(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "migration.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// guideBlock returns the lines of the first ```lang block of the guide's section that starts with heading.
func guideBlock(t *testing.T, guide, heading, lang string) []string {
	t.Helper()
	i := strings.Index(guide, "\n"+heading)
	if i < 0 {
		t.Fatalf("docs/migration.md has no section %q", heading)
	}
	section := guide[i+1:]
	if end := strings.Index(section[1:], "\n## "); end >= 0 {
		section = section[:end+1]
	}
	_, block, ok := strings.Cut(section, "```"+lang+"\n")
	if !ok {
		t.Fatalf("section %q of docs/migration.md has no %s block", heading, lang)
	}
	block, _, _ = strings.Cut(block, "```")
	return strings.Split(strings.TrimSpace(block), "\n")
}

// runGuideLine runs a command line of the guide with bash in dir, with the kubectl built with the control
// plane and the osmctl built from this tree first on PATH, and returns its output.
func runGuideLine(t *testing.T, dir, kubeconfig, osmctl, line string) string {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", line)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig,
		"PATH="+filepath.Dir(testenv.Kubectl(t))+string(os.PathListSeparator)+filepath.Dir(osmctl)+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	return string(out)
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatal(err)
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
