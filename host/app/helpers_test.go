package app_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	yamlv3 "go.yaml.in/yaml/v3"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/yaml"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/credentials"
	"github.com/osmhq/osm/host/encode/cloudinit"
	"github.com/osmhq/osm/host/plugin"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/testenv"
	"github.com/osmhq/osm/host/webhooks"
	"github.com/osmhq/osm/plugins/pluginstest"
	"github.com/osmhq/osm/sdk/plugintest"
)

const (
	osmNamespace = "kube-system"
	userDataNS   = "cloud-init-settings"
)

// webhookOptions installs OSM's webhook configurations into envtest, pointed at the test process.
func webhookOptions() envtest.WebhookInstallOptions {
	v, m := webhooks.Configurations(osmNamespace, "osm-webhook")
	return envtest.WebhookInstallOptions{ValidatingWebhooks: []*admissionregistrationv1.ValidatingWebhookConfiguration{v}, MutatingWebhooks: []*admissionregistrationv1.MutatingWebhookConfiguration{m}}
}

// builtins returns a directory of built-in plugins for the test: the selective test plugin, plus what the caller
// adds.
func builtins(t testing.TB, extra map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{"selective": plugintest.Build(t, filepath.Join("testdata", "plugins", "selective"))}
	for k, v := range extra {
		files[k] = v
	}
	for name, src := range files {
		copyFile(t, src, filepath.Join(dir, name+".wasm"))
	}
	return dir
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// startOSM runs the controller in the test process against env, as cmd/osm-controller would, until the test ends.
func startOSM(t *testing.T, env *testenv.Env, worker *testenv.Env, opts app.Options) {
	t.Helper()
	t.Cleanup(startStoppable(t, env, worker, opts))
}

// startStoppable starts a controller and returns a function that stops it and waits until it is gone.
func startStoppable(t *testing.T, env *testenv.Env, worker *testenv.Env, opts app.Options) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	opts.Mgmt = env.Config
	if worker != nil {
		opts.Worker = worker.Config
	}
	probe := opts.HealthProbeAddress == "" && env.Webhook != nil && env.Webhook.LocalServingPort != 0
	if probe {
		opts.HealthProbeAddress = testenv.FreeAddress(t)
	}
	fillDefaults(t, env, &opts)
	mgr, err := app.New(ctx, opts)
	if err != nil {
		cancel()
		t.Fatalf("building the controller: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if probe {
		// As a Service routes admission to a ready replica only: caches synced, webhook server up, the default
		// profiles' plugins loaded (or webhooks.WarmWait passed).
		eventually(t, webhooks.WarmWait+wait, "the controller ready", func() error { return ready(opts.HealthProbeAddress) })
	}
	return func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("controller stopped with: %v", err)
			}
		case <-time.After(20 * time.Second):
			// The manager gives up at 30s; what still runs now is what blocks shutdown.
			t.Errorf("controller still stopping after 20s; goroutines:\n%s", osmGoroutines())
			if err := <-done; err != nil {
				t.Errorf("controller stopped with: %v", err)
			}
		}
	}
}

// osmGoroutines returns the stacks of the goroutines that run OSM code, to find what holds a shutdown up.
func osmGoroutines() string {
	buf := make([]byte, 8<<20)
	buf = buf[:goruntime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "github.com/osmhq/osm/") || strings.Contains(g, "sigs.k8s.io/controller-runtime") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// fillDefaults completes opts the way the tests run the controller.
func fillDefaults(t *testing.T, env *testenv.Env, opts *app.Options) {
	t.Helper()
	opts.InProcessRestart = true
	if opts.Settings.Namespace == "" {
		opts.Settings = render.DefaultSettings()
		opts.Settings.Namespace = osmNamespace
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = testr.NewWithOptions(t, testr.Options{Verbosity: 0})
	}
	if opts.MetricsAddress == "" {
		opts.MetricsAddress = "0"
	}
	if opts.HealthProbeAddress == "" {
		opts.HealthProbeAddress = "0"
	}
	cacheDir := opts.Plugins.CacheDir // a test may start from an empty plugin cache
	if cacheDir == "" {
		cacheDir = pluginstest.CacheDir(t)
	}
	host := opts.Plugins.Host
	if host.LoadTimeout == 0 {
		host.LoadTimeout = 5 * time.Minute // a cold compile in the plugin host, on two busy cores
	}
	timeout := opts.Plugins.Timeout
	if timeout == 0 {
		timeout = 2 * time.Second
	}
	opts.Plugins = plugin.Config{CacheDir: cacheDir, Timeout: timeout, MemoryLimit: 64 << 20, Host: host, Precompiled: opts.Plugins.Precompiled,
		Registry: opts.Plugins.Registry}
	if env.Webhook != nil && env.Webhook.LocalServingPort != 0 {
		opts.Webhook = webhook.Options{Host: env.Webhook.LocalServingHost, Port: env.Webhook.LocalServingPort, CertDir: env.Webhook.LocalServingCertDir}
	}
}

// clusterInfo publishes kube-public/cluster-info the way kubeadm does, pointing at env's API server.
func clusterInfo(t testing.TB, env *testenv.Env) {
	t.Helper()
	kubeconfig := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: \"\"\n  cluster:\n    server: %s\n    certificate-authority-data: %s\n",
		env.Config.Host, b64(env.Config.CAData))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-public", Name: "cluster-info"}, Data: map[string]string{"kubeconfig": kubeconfig}}
	ensureNamespace(t, env, "kube-public")
	if err := env.Client.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
}

func ensureNamespace(t testing.TB, env *testenv.Env, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Create(context.Background(), ns); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
}

func newMD(t testing.TB, name, os, provider, osp string) *clusterv1alpha1.MachineDeployment {
	t.Helper()
	pc, err := json.Marshal(map[string]any{
		"cloudProvider": provider, "cloudProviderSpec": map[string]any{"region": "test"},
		"operatingSystem": os, "operatingSystemSpec": map[string]any{},
		"sshPublicKeys": []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOsmTestKey test@osm"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ann := map[string]string{clusterv1alpha1.AnnotationRevision: "1"}
	if osp != "" {
		ann[clusterv1alpha1.AnnotationOSP] = osp
	}
	return &clusterv1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", Annotations: ann},
		Spec: clusterv1alpha1.MachineDeploymentSpec{Template: clusterv1alpha1.MachineTemplateSpec{Spec: clusterv1alpha1.MachineSpec{
			ProviderSpec: clusterv1alpha1.ProviderSpec{Value: &runtime.RawExtension{Raw: pc}},
			Versions:     clusterv1alpha1.MachineVersionInfo{Kubelet: "1.33.2"},
		}}},
	}
}

// testOSP is a templates-and-plugin profile for the test OS "testos", rendered by the selective plugin.
func testOSP(name, version string) *osmv1alpha1.OperatingSystemProfile {
	return &osmv1alpha1.OperatingSystemProfile{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: osmNamespace},
		Spec: osmv1alpha1.OperatingSystemProfileSpec{
			OSName: "testos", OSVersion: "1.0", Version: version,
			SupportedCloudProviders: []osmv1alpha1.CloudProviderSpec{{Name: "aws"}, {Name: "openstack"}},
			BootstrapConfig: osmv1alpha1.OSPConfig{Files: []osmv1alpha1.File{{Path: "/opt/bin/fetch",
				Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{Data: "#!/bin/sh\ncurl -H 'Authorization: Bearer {{ .Token }}' {{ .ServerURL }}/api/v1/namespaces/cloud-init-settings/secrets/{{ .SecretName }}\n"}}}}},
			ProvisioningConfig: osmv1alpha1.OSPConfig{Files: []osmv1alpha1.File{{Path: "/etc/kubernetes/bootstrap-kubelet.conf",
				Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{Data: "{{ .BootstrapKubeconfig }}"}}}}},
			Plugin: &osmv1alpha1.PluginReference{Builtin: "selective"},
		},
	}
}

func readYAMLFile(t testing.TB, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatal(err)
	}
}

// waitForNotReady waits until the OSC named oscName is Ready=False with reason, its message containing each of
// wants, and returns that condition.
func waitForNotReady(t *testing.T, c client.Client, oscName, reason string, wants ...string) *metav1.Condition {
	t.Helper()
	var cond *metav1.Condition
	eventually(t, wait, oscName+" reports "+reason, func() error {
		got := &osmv1alpha1.OperatingSystemConfig{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: osmNamespace, Name: oscName}, got); err != nil {
			return err
		}
		cond = meta.FindStatusCondition(got.Status.Conditions, osmv1alpha1.ConditionReady)
		if cond == nil {
			return errors.New("no Ready condition")
		}
		if cond.Status != metav1.ConditionFalse || cond.Reason != reason {
			return fmt.Errorf("Ready condition: %s %s: %s", cond.Status, cond.Reason, cond.Message)
		}
		for _, want := range wants {
			if !strings.Contains(cond.Message, want) {
				return fmt.Errorf("Ready message does not contain %q: %s", want, cond.Message)
			}
		}
		return nil
	})
	return cond
}

// eventually is testenv.Eventually.
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	testenv.Eventually(t, timeout, what, check)
}

// absenceWindow gives the controller d to act where the test then asserts that it did not (no write, no
// rollout). It orders nothing: a window too short for the controller only lets a bug pass, and never fails a
// correct controller.
func absenceWindow(d time.Duration) { time.Sleep(d) }

func b64(data []byte) string { return base64.StdEncoding.EncodeToString(data) }

func asJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// userDataFiles parses cloud-config user-data and returns its files' decoded contents by path.
func userDataFiles(t *testing.T, s *corev1.Secret) map[string]string {
	t.Helper()
	var doc cloudinit.Document
	if err := yamlv3.Unmarshal(s.Data[render.CloudConfigKey], &doc); err != nil {
		t.Fatalf("%s: %v", s.Name, err)
	}
	out := map[string]string{}
	for _, f := range doc.WriteFiles {
		content := f.Content
		switch f.Encoding {
		case "b64":
			raw, err := base64.StdEncoding.DecodeString(content)
			if err != nil {
				t.Fatal(err)
			}
			content = string(raw)
		case "gz+b64":
			raw, err := base64.StdEncoding.DecodeString(content)
			if err != nil {
				t.Fatal(err)
			}
			zr, err := gzip.NewReader(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(zr)
			content = string(data)
		}
		out[f.Path] = content
	}
	return out
}

func decodeBootstrapScript(t *testing.T, s *corev1.Secret) string {
	t.Helper()
	return userDataFiles(t, s)["/opt/bin/bootstrap"]
}

func decodedFiles(t *testing.T, s *corev1.Secret) string {
	t.Helper()
	var b strings.Builder
	for _, c := range userDataFiles(t, s) {
		b.WriteString(c)
	}
	return b.String()
}

// bootstrapTokenOf returns md's bootstrap token as "<id>.<secret>".
func bootstrapTokenOf(t *testing.T, c client.Client, md *clusterv1alpha1.MachineDeployment) string {
	t.Helper()
	list := &corev1.SecretList{}
	if err := c.List(context.Background(), list, client.InNamespace("kube-system"), client.MatchingLabels(credentials.Labels(md))); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("want one bootstrap token for %s, found %d", md.Name, len(list.Items))
	}
	return string(list.Items[0].Data["token-id"]) + "." + string(list.Items[0].Data["token-secret"])
}

// nodeClient is a client that authenticates like a booting node: with only a bearer token and the cluster CA.
func nodeClient(t *testing.T, env *testenv.Env, token string) client.Client {
	t.Helper()
	cfg := &rest.Config{Host: env.Config.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}}
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ready asks the controller's readiness endpoint at addr.
func ready(addr string) error {
	resp, err := http.Get("http://" + addr + "/readyz?verbose")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("readyz: %s: %s", resp.Status, body)
	}
	return nil
}

// warnings collects the admission warnings the API server returns.
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.seen
	w.seen = nil
	return out
}

// warningClient returns a client of env whose requests' admission warnings land in the returned collector.
func warningClient(t testing.TB, env *testenv.Env) (client.Client, *warnings) {
	t.Helper()
	w := &warnings{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = w
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}

// createFullyChecked creates obj through admission; if admission answered without its plugin, which was still
// loading (an admission warning says so), it deletes obj again and fails, so that an eventually retries until
// the webhook ran every check.
func createFullyChecked(ctx context.Context, t testing.TB, env *testenv.Env, obj client.Object) error {
	t.Helper()
	c, w := warningClient(t, env)
	if err := c.Create(ctx, obj.DeepCopyObject().(client.Object)); err != nil {
		return err
	}
	for _, text := range w.take() {
		if strings.Contains(text, "still loading") {
			if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				t.Fatalf("deleting %s again: %v", obj.GetName(), err)
			}
			return fmt.Errorf("admitted while the plugin was still loading: %s", text)
		}
	}
	return nil
}
