package app_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/testenv"
	"github.com/osmhq/osm/host/webhooks"
)

// upstreamControllerArgs is the osm-controller command of upstream OSM's deploy/operating-system-manager.yaml
// (v1.11.2), with the two listen ports replaced by free ones (the machine is shared). The Deployment has no
// -kubeconfig: in-cluster config, here KUBECONFIG.
func upstreamControllerArgs(metrics, probes int) []string {
	return []string{
		"-log-debug=false",
		"-log-format=json",
		"-worker-count=5",
		"-cluster-dns=10.10.10.10",
		fmt.Sprintf("-metrics-address=0.0.0.0:%d", metrics),
		fmt.Sprintf("-health-probe-address=0.0.0.0:%d", probes),
		"-namespace=kube-system",
	}
}

// kkpControllerArgs is the argument list Kubermatic KKP gives upstream's osm-controller for a user cluster
// (space-separated values, mirrors as repeated -flag=registry=mirror), with every optional node setting set.
func kkpControllerArgs(metrics, probes int, workerKubeconfig, namespace string) []string {
	return []string{
		"-worker-cluster-kubeconfig", workerKubeconfig,
		"-cluster-dns", "10.240.16.10",
		"-health-probe-address", fmt.Sprintf("0.0.0.0:%d", probes),
		"-metrics-address", fmt.Sprintf("0.0.0.0:%d", metrics),
		"-namespace", namespace,
		"-external-cloud-provider",
		"-node-insecure-registries", "10.0.0.1:5000,insecure.example.com",
		"-node-containerd-registry-mirrors=docker.io=https://harbor.example.com/v2/proxy-docker-io?kubermatic=override_path%3Dtrue",
		"-node-containerd-registry-mirrors=*=https://mirror.example.com",
		"-node-registry-mirrors", "https://dockerhub-mirror.example.com,quay.io=quay-mirror.example.com",
		"-node-http-proxy", "http://proxy.example.com:3128",
		"-node-no-proxy", ".svc,.cluster.local,localhost",
		"-pause-image", "registry.k8s.io/pause:3.10",
		"-node-kubelet-feature-gates", "RotateKubeletServerCertificate=true,GracefulNodeShutdown=true",
		"-node-registry-credentials-secret", "kube-system/registry-credentials",
		"-container-runtime", "containerd",
		"-device-ownership-from-security-context",
		"-ca-bundle", "/etc/kubernetes/pki/ca-bundle/ca-bundle.pem",
	}
}

// upstreamWebhookArgs is the webhook command of upstream's deploy/operating-system-manager-webhook.yaml plus
// the flags of upstream's webhook binary pointed at the test's certificate and free ports; -webhook-port is
// OSM's (upstream's port is fixed at 9443, which a shared machine cannot promise).
func upstreamWebhookArgs(certDir string, port, metrics, probes int) []string {
	return []string{
		"-log-debug=false",
		"-log-format=json",
		"-namespace=kube-system",
		"-cert-dir=" + certDir,
		fmt.Sprintf("-metrics-bind-address=127.0.0.1:%d", metrics),
		fmt.Sprintf("-health-probe-bind-address=127.0.0.1:%d", probes),
		"-leader-elect=false",
		fmt.Sprintf("-webhook-port=%d", port),
	}
}

// TestUpstreamControllerArgsStartAndReconcile starts the real osm-controller binary with upstream's Deployment
// arguments, then with KKP's, against a real API server: it starts without a serving certificate, says the
// webhooks are off, installs the default profiles, turns a MachineDeployment into its Secrets, and with KKP's
// registry flags writes the hosts.toml files upstream writes.
func TestUpstreamControllerArgsStartAndReconcile(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	c := env.Client
	ensureNamespace(t, env, userDataNS)
	clusterInfo(t, env)

	t.Run("upstream deploy/", func(t *testing.T) {
		metrics, probes := freeTCPPort(t), freeTCPPort(t)
		p := startBinary(t, bin, []string{"KUBECONFIG=" + env.Kubeconfig}, upstreamControllerArgs(metrics, probes)...)
		p.waitForLog(t, `"admission webhooks off: no tls.crt and tls.key in -webhook-cert-dir`)
		waitReady(t, p, probes)
		eventually(t, wait, "default profiles installed", func() error {
			return c.Get(ctx, client.ObjectKey{Namespace: osmNamespace, Name: "osp-ubuntu"}, &osmv1alpha1.OperatingSystemProfile{})
		})
		md := newMD(t, "upstream-args", "ubuntu", "aws", "osp-ubuntu")
		if err := c.Create(ctx, md); err != nil {
			t.Fatal(err)
		}
		waitForSecret(t, c, "upstream-args-kube-system-bootstrap-config", "1")
		waitForSecret(t, c, "upstream-args-kube-system-provisioning-config", "1")
		p.stop(t)
	})

	t.Run("KKP", func(t *testing.T) {
		const mgmtNS = "cluster-test"
		ensureNamespace(t, env, mgmtNS)
		creds := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "registry-credentials"},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"quay.io":{"username":"robot","password":"s3cr3t"}}}`)},
		}
		if err := c.Create(ctx, creds); err != nil {
			t.Fatal(err)
		}
		metrics, probes := freeTCPPort(t), freeTCPPort(t)
		p := startBinary(t, bin, []string{"KUBECONFIG=" + env.Kubeconfig}, kkpControllerArgs(metrics, probes, env.Kubeconfig, mgmtNS)...)
		p.waitForLog(t, `"admission webhooks off: no tls.crt and tls.key in -webhook-cert-dir`)
		waitReady(t, p, probes)
		eventually(t, wait, "default profiles installed in "+mgmtNS, func() error {
			return c.Get(ctx, client.ObjectKey{Namespace: mgmtNS, Name: "osp-ubuntu"}, &osmv1alpha1.OperatingSystemProfile{})
		})
		md := newMD(t, "kkp-args", "ubuntu", "aws", "osp-ubuntu")
		if err := c.Create(ctx, md); err != nil {
			t.Fatal(err)
		}
		waitForSecret(t, c, "kkp-args-kube-system-bootstrap-config", "1")
		files := userDataFiles(t, waitForSecret(t, c, "kkp-args-kube-system-provisioning-config", "1"))
		// What upstream v1.11.2 writes for these flags (host/containerd/testdata/upstream/mixed.golden has the
		// same forms).
		for path, want := range map[string]string{
			"/etc/containerd/certs.d/docker.io/hosts.toml": "server = \"https://registry-1.docker.io\"\n\n" +
				"[host.\"https://dockerhub-mirror.example.com\"]\ncapabilities = [\"pull\", \"resolve\"]\n" +
				"[host.\"https://harbor.example.com/v2/proxy-docker-io\"]\ncapabilities = [\"pull\", \"resolve\"]\noverride_path = true\n",
			"/etc/containerd/certs.d/_default/hosts.toml": "[host.\"https://mirror.example.com\"]\ncapabilities = [\"pull\", \"resolve\"]\n",
			"/etc/containerd/certs.d/quay.io/hosts.toml":  "server = \"quay.io\"\n\n[host.\"https://quay-mirror.example.com\"]\ncapabilities = [\"pull\", \"resolve\"]\n",
			"/etc/containerd/certs.d/insecure.example.com/hosts.toml": "server = \"insecure.example.com\"\n\n" +
				"[host.\"insecure.example.com\"]\ncapabilities = [\"pull\", \"resolve\"]\nskip_verify = true\n",
		} {
			if got, ok := files[path]; !ok || got != want {
				t.Errorf("%s:\n%s\nwant:\n%s", path, got, want)
			}
		}
		config := files["/etc/containerd/config.toml"]
		for _, want := range []string{`sandbox = "registry.k8s.io/pause:3.10"`, "device_ownership_from_security_context = true",
			`[plugins."io.containerd.cri.v1.images".registry.configs."quay.io".auth]`} {
			if !strings.Contains(config, want) {
				t.Errorf("config.toml lacks %s:\n%s", want, config)
			}
		}
		if strings.Contains(p.output(), "s3cr3t") {
			t.Error("the registry password is in the controller's log")
		}
		p.stop(t)
	})
}

// TestUpstreamWebhookArgsServeAdmission runs the binary the way upstream's webhook Deployment runs its webhook
// binary (invoked as "webhook", upstream's flags, as upstream's webhook ServiceAccount with upstream's RBAC:
// read profiles, nothing else), registered with the API server on upstream's webhook paths: it serves
// admission on those paths, probes answer, and the log says the webhooks are on.
func TestUpstreamWebhookArgsServeAdmission(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	env := testenv.Start(t, testenv.Options{WebhookInstallOptions: upstreamWebhookConfigurations()})
	ctx := context.Background()
	c := env.Client
	kubeconfig := upstreamWebhookIdentity(t, env)

	// Upstream's image runs /usr/local/bin/webhook; a link with that name to osm-controller is the same.
	link := filepath.Join(t.TempDir(), "webhook")
	if err := os.Symlink(bin, link); err != nil {
		t.Fatal(err)
	}
	metrics, probes := freeTCPPort(t), freeTCPPort(t)
	p := startBinary(t, link, []string{"KUBECONFIG=" + kubeconfig},
		upstreamWebhookArgs(env.Webhook.LocalServingCertDir, env.Webhook.LocalServingPort, metrics, probes)...)
	p.waitForLog(t, `"admission webhooks on (webhook server only, no controllers)"`)
	waitReady(t, p, probes)

	bad := testOSP("osp-broken", "v1.0.0")
	bad.Spec.Plugin = nil
	bad.Spec.ProvisioningConfig.Files[0].Content.Inline.Data = "{{ .NoSuchField }}"
	var err error
	eventually(t, wait, "a broken profile refused on upstream's path", func() error {
		err = c.Create(ctx, bad.DeepCopy())
		if apierrors.IsInvalid(err) {
			return nil
		}
		return fmt.Errorf("got %w", err)
	})
	if !strings.Contains(err.Error(), "spec.provisioningConfig.files[0].content.inline.data") {
		t.Errorf("the refusal does not name the field: %v", err)
	}

	md := newMD(t, "defaulted", "flatcar", "aws", "")
	if err := c.Create(ctx, md); err != nil {
		t.Fatal(err)
	}
	if got := md.Annotations[clusterv1alpha1.AnnotationOSP]; got != "osp-flatcar" {
		t.Errorf("MachineDeployment created without a profile has %q, want osp-flatcar from the mutating webhook", got)
	}

	osc := &osmv1alpha1.OperatingSystemConfig{ObjectMeta: metav1.ObjectMeta{Namespace: osmNamespace, Name: "immutable"},
		Spec: osmv1alpha1.OperatingSystemConfigSpec{OSName: "ubuntu", OSVersion: "24.04", CloudProvider: osmv1alpha1.CloudProviderSpec{Name: "aws"}}}
	if err := c.Create(ctx, osc); err != nil {
		t.Fatal(err)
	}
	osc.Spec.OSVersion = "22.04"
	if err := c.Update(ctx, osc); err == nil || !strings.Contains(err.Error(), "immutable") {
		t.Errorf("OSC spec change: want the webhook's refusal, got %v", err)
	}
	p.stop(t)
}

// upstreamWebhookIdentity grants upstream's webhook ServiceAccount what upstream's deploy/rbac-webhook.yaml
// grants it (get, list and watch OperatingSystemProfiles) and returns a kubeconfig that acts as it.
func upstreamWebhookIdentity(t *testing.T, env *testenv.Env) string {
	t.Helper()
	const sa = "operating-system-manager-webhook"
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: sa}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"operatingsystemmanager.k8c.io"}, Resources: []string{"operatingsystemprofiles"}, Verbs: []string{"get", "list", "watch"},
	}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: sa},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: osmNamespace}}}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, user := range cfg.AuthInfos {
		user.Impersonate = "system:serviceaccount:" + osmNamespace + ":" + sa
	}
	path := filepath.Join(t.TempDir(), "webhook.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	// The identity is as narrow as upstream's: it reads profiles and no Secret.
	restCfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	as, err := client.New(restCfg, client.Options{Scheme: testenv.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := as.List(ctx, &corev1.SecretList{}, client.InNamespace(osmNamespace)); !apierrors.IsForbidden(err) {
		t.Fatalf("the webhook identity can list Secrets (%v); the test would not show upstream's RBAC is enough", err)
	}
	if err := as.List(ctx, &osmv1alpha1.OperatingSystemProfileList{}, client.InNamespace(osmNamespace)); err != nil {
		t.Fatalf("the webhook identity cannot list profiles: %v", err)
	}
	return path
}

// upstreamWebhookConfigurations are OSM's webhook configurations routed to upstream's paths, as upstream's
// deploy/operating-system-manager-webhook.yaml routes them.
func upstreamWebhookConfigurations() envtest.WebhookInstallOptions {
	v, m := webhooks.Configurations(osmNamespace, "operating-system-manager-webhook")
	upstream := map[string]string{
		webhooks.PathValidateProfile:          webhooks.UpstreamPathValidateProfile,
		webhooks.PathValidateConfig:           webhooks.UpstreamPathValidateConfig,
		webhooks.PathDefaultMachineDeployment: webhooks.UpstreamPathDefaultMachineDeployment,
	}
	for i := range v.Webhooks {
		path := upstream[*v.Webhooks[i].ClientConfig.Service.Path]
		v.Webhooks[i].ClientConfig.Service.Path = &path
	}
	for i := range m.Webhooks {
		path := upstream[*m.Webhooks[i].ClientConfig.Service.Path]
		m.Webhooks[i].ClientConfig.Service.Path = &path
	}
	return envtest.WebhookInstallOptions{
		ValidatingWebhooks: []*admissionregistrationv1.ValidatingWebhookConfiguration{v},
		MutatingWebhooks:   []*admissionregistrationv1.MutatingWebhookConfiguration{m},
	}
}

// process is a running osm-controller binary and its combined output.
type process struct {
	cmd    *exec.Cmd
	out    testenv.SyncBuffer
	exited chan error
	done   bool
}

func (p *process) output() string { return p.out.String() }

func startBinary(t *testing.T, bin string, env []string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(bin, args...), exited: make(chan error, 1)}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() { p.stop(t) })
	return p
}

// stop sends SIGTERM and waits for a clean exit.
func (p *process) stop(t *testing.T) {
	t.Helper()
	if p.done {
		return
	}
	p.done = true
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		if err != nil {
			t.Errorf("%s exited with %v:\n%s", p.cmd.Path, err, tail(p.output(), 4000))
		}
	case <-time.After(40 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		t.Errorf("%s still running 40s after SIGTERM:\n%s", p.cmd.Path, tail(p.output(), 4000))
	}
}

// waitForLog waits for a log line containing s; the process exiting first fails the test with its output.
func (p *process) waitForLog(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		if strings.Contains(p.output(), s) {
			return
		}
		select {
		case err := <-p.exited:
			p.done = true
			t.Fatalf("%s exited (%v) before logging %s:\n%s", p.cmd.Path, err, s, tail(p.output(), 4000))
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatalf("no log line with %s after %s:\n%s", s, wait, tail(p.output(), 4000))
}

// waitReady waits until the process's readiness probe answers 200.
func waitReady(t *testing.T, p *process, port int) {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second}
	eventually(t, wait, "readyz", func() error {
		resp, err := hc.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/readyz")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d; log:\n%s", resp.StatusCode, tail(p.output(), 2000))
		}
		return nil
	})
}

// controllerBinary is cmd/osm-controller as buildBinary built it, once for the package: the tests only run it
// (each in processes, with flags and a cluster of its own), so a build per test would link the same binary
// again. TestMain removes it.
var controllerBinary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// buildBinary returns the path of the osm-controller binary, building it on the first call.
func buildBinary(t *testing.T) string {
	t.Helper()
	b := &controllerBinary
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "osm-controller-"); b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, "osm-controller")
		cmd := exec.Command("go", "build", "-o", b.path, "./cmd/osm-controller")
		cmd.Dir = testenv.RepoRoot()
		if data, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("%w\n%s", err, data)
		}
	})
	if b.err != nil {
		t.Fatalf("building osm-controller: %v", b.err)
	}
	return b.path
}

// removeControllerBinary removes what buildBinary built, if anything.
func removeControllerBinary() {
	if controllerBinary.dir != "" {
		_ = os.RemoveAll(controllerBinary.dir)
	}
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
