// Package testenv starts a real kube-apiserver and etcd for integration tests, with OSM's CRDs and
// machine-controller's MachineDeployment CRD installed.
//
// The binaries are built from the Go module proxy by hack/control-plane.sh and cached outside the repository.
// When KUBEBUILDER_ASSETS is not set, the script is run (it returns at once when the cache is warm), so a plain
// `go test ./...` works as well as `make test`.
package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/osmhq/osm/crds"
	osmscheme "github.com/osmhq/osm/host/scheme"
)

// Scheme knows the core Kubernetes kinds, OSM's kinds and MachineDeployments.
var Scheme = osmscheme.Scheme

// Codecs decodes objects of the kinds in Scheme.
var Codecs = serializer.NewCodecFactory(Scheme)

// Env is a running control plane.
type Env struct {
	Config *rest.Config
	Client client.Client
	// Kubeconfig is the path of a kubeconfig file for the cluster admin, for kubectl and controllers run as
	// separate processes.
	Kubeconfig string
	// Webhook holds where envtest expects the test's webhook server (host, port, certificates).
	Webhook *envtest.WebhookInstallOptions
	env     *envtest.Environment
}

// Options change how the control plane starts.
type Options struct {
	// WebhookInstallOptions are passed to envtest so webhooks served by the test process are registered with
	// the API server.
	WebhookInstallOptions envtest.WebhookInstallOptions
	// SkipExternalCRDs leaves machine-controller's CRDs out, to model a management cluster.
	SkipExternalCRDs bool
	// APIServerFlags are extra kube-apiserver flags, e.g. audit-log-path.
	APIServerFlags map[string]string
}

// Start starts a control plane for the test and stops it when the test ends.
func Start(t testing.TB, opts Options) *Env {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a kube-apiserver and etcd: make test runs it, make unit (-short) does not")
	}
	assets, err := AssetsDir()
	if err != nil {
		t.Fatalf("control plane binaries: %v", err)
	}
	defs, err := crds.OSMDefinitions()
	if err != nil {
		t.Fatalf("loading CRDs: %v", err)
	}
	if !opts.SkipExternalCRDs {
		ext, err := crds.ExternalDefinitions()
		if err != nil {
			t.Fatalf("loading external CRDs: %v", err)
		}
		defs = append(defs, ext...)
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDs:                  defs,
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: opts.WebhookInstallOptions,
		Scheme:                Scheme,
	}
	// envtest gives each process 20 s to become ready, then starts it again (5 times). On a busy machine, a
	// kube-apiserver that starts at a low CPU priority beside other test processes needs longer, and each new
	// attempt starts from scratch: one attempt with more room serves better. KUBEBUILDER_CONTROLPLANE_START_TIMEOUT
	// still overrides it.
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
		env.ControlPlaneStartTimeout = 2 * time.Minute
	}
	// Nodes authenticate with bootstrap tokens (their provisioning fetch and the kubelet's TLS bootstrap), as on
	// every cluster machine-controller runs on.
	args := env.ControlPlane.GetAPIServer().Configure()
	args.Set("enable-bootstrap-token-auth", "true")
	for k, v := range opts.APIServerFlags {
		args.Set(k, v)
	}
	cfg, err := env.Start()
	if err != nil {
		// Start may fail after the processes are up (installing CRDs, say); stop them or they outlive the test.
		_ = env.Stop()
		t.Fatalf("starting kube-apiserver and etcd from %s: %v", assets, err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Logf("stopping control plane: %v", err)
		}
	})
	c, err := client.New(cfg, client.Options{Scheme: Scheme})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	e := &Env{Config: cfg, Client: c, env: env, Webhook: &env.WebhookInstallOptions}
	e.Kubeconfig = writeKubeconfig(t, env)
	return e
}

// AssetsDir returns the directory holding kube-apiserver, etcd and kubectl, building them if needed.
func AssetsDir() (string, error) {
	assetsOnce.Do(func() {
		if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
			assetsDir = dir
			return
		}
		script := filepath.Join(RepoRoot(), "hack", "control-plane.sh")
		var stderr bytes.Buffer
		cmd := exec.Command(script)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			assetsErr = fmt.Errorf("%s failed: %w\n%s", script, err, stderr.String())
			return
		}
		assetsDir = strings.TrimSpace(string(out))
	})
	return assetsDir, assetsErr
}

var (
	assetsOnce sync.Once
	assetsDir  string
	assetsErr  error
)

// Kubectl returns the path of the kubectl built with the control plane. Under -short the test is skipped, as
// with Start: on a cold cache, getting kubectl means building the whole control plane, which make unit never does.
func Kubectl(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs kubectl, built with the control plane: make test runs it, make unit (-short) does not")
	}
	dir, err := AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "kubectl")
}

// RepoRoot is the root of this repository, found from this source file's location.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

func writeKubeconfig(t testing.TB, env *envtest.Environment) string {
	t.Helper()
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "osm-test-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatalf("adding admin user: %v", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Namespace creates a namespace for the test.
func (e *Env) Namespace(t testing.TB, name string) string {
	t.Helper()
	ns := &corev1.Namespace{}
	ns.Name = name
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	return name
}
