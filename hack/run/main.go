// Command run is `make run`: OSM's first hour without a cluster. It starts the kube-apiserver and etcd the
// integration tests use (envtest, binaries from hack/control-plane.sh), installs OSM's and machine-controller's
// CRDs and the webhook configurations the controller registers in a cluster, pointed at 127.0.0.1, and runs the controller in this
// process, webhooks included, with a serving certificate envtest generates: no cert-manager, no image, no
// kind cluster. It writes a kubeconfig and prints how to use it; Ctrl-C or SIGTERM stops everything, and etcd's
// data, kept in a temporary directory, goes with it.
//
//	make run          # KUBEBUILDER_ASSETS="$(hack/control-plane.sh)" go run ./hack/run
//	go run ./hack/run -help
//
// Run it from the repository root after hack/build-plugins.sh (make run does both): the controller embeds the
// default plugins, and the example is read from deploy/.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	uberzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/yaml"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"

	"github.com/osmhq/osm/crds"
	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/buildinfo"
	"github.com/osmhq/osm/host/credentials"
	"github.com/osmhq/osm/host/plugin"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/scheme"
	"github.com/osmhq/osm/host/testenv"
	osmwebhooks "github.com/osmhq/osm/host/webhooks"
	"github.com/osmhq/osm/plugins"
)

// exampleMD is the MachineDeployment the printed instructions apply, relative to the repository root.
const exampleMD = "deploy/examples/machinedeployment-ubuntu.yaml"

// options configure a local run; main fills them from flags.
type options struct {
	// Repo is the repository root, where the example MachineDeployment is read from.
	Repo string
	// StateDir receives the kubeconfig, at a path that stays the same from one run to the next so a shell's
	// KUBECONFIG keeps working across restarts.
	StateDir string
	// PluginCacheDir keeps compiled plugins across runs (osmctl's default directory, so either warms the other).
	PluginCacheDir string
	// MetricsAddress and HealthProbeAddress are where the controller serves them; empty picks a free port on
	// 127.0.0.1, so a second checkout's `make run`, or a controller already on 8080, is no obstacle.
	MetricsAddress, HealthProbeAddress string
	// Settings are the node settings (the controller's -node-* flags).
	Settings render.Settings
	// Logger receives the control plane's and the controller's logs; Out the instructions.
	Logger logr.Logger
	Out    io.Writer
}

// endpoints are what the instructions point at.
type endpoints struct {
	Kubeconfig string
	// APIServer is the control plane's URL.
	APIServer string
	// Kubectl is the kubectl built with the control plane (the user's own may be far older or newer).
	Kubectl string
	// WebhookURL is where the API server sends admission reviews; Metrics the controller's metrics address.
	WebhookURL, Metrics string
}

func main() {
	app.SetGCDefaults()
	o := options{Repo: ".", Out: os.Stdout}
	cache := cacheRoot()
	var debug bool
	var node render.NodeFlags
	// A FlagSet of our own, as cmd/osm-controller has: controller-runtime registers -kubeconfig on
	// flag.CommandLine.
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	fs.StringVar(&o.Repo, "repo", o.Repo, "Repository root (deploy/examples is read from it).")
	fs.StringVar(&o.StateDir, "state-dir", filepath.Join(cache, "run"), "Directory the kubeconfig is written to (removed again on exit).")
	fs.StringVar(&o.PluginCacheDir, "plugin-cache-dir", filepath.Join(cache, "plugins"), "Directory for compiled plugins, kept across runs (osmctl's default).")
	fs.StringVar(&o.MetricsAddress, "metrics-address", "", "Address of the controller's metrics; a free port on 127.0.0.1 when empty.")
	fs.StringVar(&o.HealthProbeAddress, "health-probe-address", "", "Address of the controller's probes; a free port on 127.0.0.1 when empty.")
	fs.BoolVar(&debug, "log-debug", false, "Log at debug level.")
	node.AddFlags(fs)
	_ = fs.Parse(os.Args[1:])
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "run: unexpected arguments %q; see go run ./hack/run -help\n", fs.Args())
		os.Exit(2)
	}
	o.Logger = newLogger(debug)
	base := render.DefaultSettings()
	settings, err := node.Settings(base)
	if err != nil {
		fmt.Fprintln(os.Stderr, "run:", err)
		os.Exit(2)
	}
	o.Settings = settings

	// The first signal stops everything in order; stop() hands a second one back to the default handler, for
	// when a shutdown hangs.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
		o.Logger.Info("stopping the controller, kube-apiserver and etcd (a second Ctrl-C kills this process and may leave them running)")
	}()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "run:", err)
		os.Exit(1)
	}
}

// cacheRoot is the cache directory hack/control-plane.sh and hack/tools.sh use.
func cacheRoot() string {
	if dir := os.Getenv("OSM_CACHE_DIR"); dir != "" {
		return dir
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "osm")
}

func newLogger(debug bool) logr.Logger {
	logger := zap.New(func(o *zap.Options) {
		o.Encoder = zapcore.NewConsoleEncoder(uberzap.NewDevelopmentEncoderConfig())
		o.DestWriter = os.Stderr
		if debug {
			lvl := zapcore.DebugLevel
			o.Level = &lvl
		}
	})
	ctrl.SetLogger(logger)
	return logger
}

// run starts the control plane and the controller, prints the instructions once the controller is ready, and
// stops both when ctx ends. It returns an error when anything fails to start, or the controller stops on its
// own; ctx ending during the start is no error.
func run(ctx context.Context, o options) (err error) {
	log := o.Logger.WithName("run")
	// The configurations the controller registers in a cluster (deploy/webhooks ships them empty).
	validating, mutating := osmwebhooks.Configurations(o.Settings.Namespace, app.DefaultWebhookService)
	example, err := readExample(filepath.Join(o.Repo, exampleMD))
	if err != nil {
		return fmt.Errorf("%w (run from the repository root, or pass -repo)", err)
	}
	assets, err := testenv.AssetsDir()
	if err != nil {
		return err
	}
	defs, err := crds.OSMDefinitions()
	if err != nil {
		return err
	}
	ext, err := crds.ExternalDefinitions()
	if err != nil {
		return err
	}
	defaults, err := plugins.DefaultProfiles()
	if err != nil {
		return err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDs:                  append(defs, ext...),
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme.Scheme,
		// envtest generates a CA and a serving certificate for 127.0.0.1, and rewrites each configuration's
		// service reference into a URL on LocalServingHost with that CA: what cert-manager and the Service do in
		// a cluster.
		WebhookInstallOptions: envtest.WebhookInstallOptions{LocalServingHost: "127.0.0.1",
			ValidatingWebhooks: []*admissionregistrationv1.ValidatingWebhookConfiguration{validating},
			MutatingWebhooks:   []*admissionregistrationv1.MutatingWebhookConfiguration{mutating}},
	}
	// Nodes authenticate with bootstrap tokens, as on every cluster machine-controller runs on; the controller
	// issues them.
	env.ControlPlane.GetAPIServer().Configure().Set("enable-bootstrap-token-auth", "true")
	log.Info("starting kube-apiserver and etcd", "binaries", assets)
	cfg, err := env.Start()
	defer func() {
		// envtest started its processes in their own process group, out of reach of the terminal's Ctrl-C:
		// they stop here or not at all.
		if stopErr := env.Stop(); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("stopping the control plane: %w", stopErr))
		}
	}()
	if err != nil {
		return fmt.Errorf("starting the control plane from %s: %w", assets, err)
	}
	// A Ctrl-C while the control plane started fails what follows with context.Canceled: that is a stop.
	unlessStopped := func(err error) error {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if err := seedCluster(ctx, cfg, o.Settings.CloudInitSettingsNamespace); err != nil {
		return unlessStopped(err)
	}
	kubeconfig, written, err := writeKubeconfig(env, o.StateDir)
	if err != nil {
		return err
	}
	defer func() {
		// Unless a second `make run` has written its own since: a stale kubeconfig points at nothing, another's
		// still works.
		if now, err := os.ReadFile(kubeconfig); err == nil && bytes.Equal(now, written) {
			_ = os.Remove(kubeconfig)
		}
	}()

	metrics, probes := o.MetricsAddress, o.HealthProbeAddress
	for _, addr := range []*string{&metrics, &probes} {
		if *addr == "" {
			if *addr, err = freeAddress(); err != nil {
				return err
			}
		}
	}
	hook := env.WebhookInstallOptions
	mctx, cancel := context.WithCancel(ctx)
	defer cancel()
	mgr, err := app.New(mctx, app.Options{
		Mgmt: cfg, Settings: o.Settings, WorkerCount: 10,
		Defaults: defaults, Builtins: plugins.Builtin(), Plugins: plugin.Config{CacheDir: o.PluginCacheDir},
		BootstrapTokenTTL:  credentials.DefaultBootstrapTokenTTL,
		MetricsAddress:     metrics,
		HealthProbeAddress: probes,
		Webhook:            webhook.Options{Host: hook.LocalServingHost, Port: hook.LocalServingPort, CertDir: hook.LocalServingCertDir},
		Build:              buildinfo.Get().Short(), Logger: o.Logger.WithName("osm"),
		Preflight: true,
	})
	if err != nil {
		return unlessStopped(err)
	}
	var mgrErr error
	ended := make(chan struct{})
	go func() {
		mgrErr = mgr.Start(mctx)
		close(ended)
	}()
	// stopped waits for the manager, which stops its webhook server, reconcilers and plugin host, before the
	// deferred env.Stop takes the API server away from under them.
	stopped := func() error {
		cancel()
		<-ended
		if mgrErr != nil {
			return fmt.Errorf("controller: %w", mgrErr)
		}
		return nil
	}

	log.Info("waiting for the controller to be ready (the first run compiles the default plugins, a minute or two)")
	if err := waitReady(ctx, probes, ended); err != nil {
		if errors.Is(err, errStopped) {
			return stopped()
		}
		return errors.Join(err, stopped())
	}
	printInstructions(o.Out, endpoints{Kubeconfig: kubeconfig, APIServer: strings.TrimSuffix(cfg.Host, "/"), Kubectl: filepath.Join(assets, "kubectl"),
		WebhookURL: "https://" + net.JoinHostPort(hook.LocalServingHost, fmt.Sprint(hook.LocalServingPort)), Metrics: "http://" + metrics + "/metrics"},
		example, o.Settings.CloudInitSettingsNamespace)
	select {
	case <-ctx.Done():
		return stopped()
	case <-ended:
		if mgrErr == nil {
			mgrErr = errors.New("stopped on its own")
		}
		return fmt.Errorf("controller: %w", mgrErr)
	}
}

// readExample reads the MachineDeployment the instructions apply, so the names they print are its.
func readExample(path string) (*clusterv1alpha1.MachineDeployment, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	md := &clusterv1alpha1.MachineDeployment{}
	if err := yaml.Unmarshal(data, md); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return md, nil
}

// seedCluster creates what a cluster machine-controller runs on has and a fresh API server lacks: the
// namespace of the user-data Secrets, and kube-public/cluster-info as kubeadm publishes it, which the
// controller reads the API server URL and CA nodes use from.
func seedCluster(ctx context.Context, cfg *rest.Config, userDataNS string) error {
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return err
	}
	for _, name := range []string{userDataNS, metav1.NamespacePublic} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := c.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
			return fmt.Errorf("creating namespace %s: %w", name, err)
		}
	}
	info, err := yaml.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Config",
		"clusters": []any{map[string]any{"name": "", "cluster": map[string]any{"server": cfg.Host, "certificate-authority-data": cfg.CAData}}},
	})
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespacePublic, Name: "cluster-info"}, Data: map[string]string{"kubeconfig": string(info)}}
	if err := c.Create(ctx, cm); err != nil {
		return fmt.Errorf("publishing kube-public/cluster-info: %w", err)
	}
	return nil
}

// writeKubeconfig writes a cluster admin's kubeconfig into dir and returns its path and content.
func writeKubeconfig(env *envtest.Environment, dir string) (string, []byte, error) {
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "osm-run-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", nil, fmt.Errorf("adding the admin user: %w", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	path, err := filepath.Abs(filepath.Join(dir, "kubeconfig"))
	if err != nil {
		return "", nil, err
	}
	return path, data, os.WriteFile(path, data, 0o600)
}

func freeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// errStopped is waitReady's answer when ctx ended first: a Ctrl-C during start-up, not a failure.
var errStopped = errors.New("stopped before the controller was ready")

// errEnded is waitReady's answer when the manager returned before it was ready (its error says why).
var errEnded = errors.New("the controller ended before it was ready")

// waitReady polls the controller's readiness endpoint, which turns ready once its caches are synced, the
// webhook server listens and the default profiles' plugins are loaded (or webhooks.WarmWait passed): the
// moment a Service would route admission to it. Until then a MachineDeployment write would be refused, as the
// webhook configurations are failurePolicy: Fail.
func waitReady(ctx context.Context, probes string, ended <-chan struct{}) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return errStopped
		case <-ended:
			return errEnded
		case <-tick.C:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+probes+"/readyz", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			continue
		}
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil
		}
	}
}

// printInstructions says how to reach the cluster and what to try first.
func printInstructions(w io.Writer, e endpoints, md *clusterv1alpha1.MachineDeployment, userDataNS string) {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("")
	p("OSM is running: kube-apiserver %s, admission webhooks %s, metrics %s.", e.APIServer, e.WebhookURL, e.Metrics)
	p("Ctrl-C stops it all; the cluster's data is temporary. In another shell, from the repository root:")
	p("")
	p("  export KUBECONFIG=%s", e.Kubeconfig)
	p("  export PATH=%s:$PATH    # the kubectl built with the control plane", filepath.Dir(e.Kubectl))
	p("  kubectl apply -f %s", exampleMD)
	p("  kubectl -n %s get osc,osp                         # the rendered configuration and the default profiles", md.Namespace)
	p("  kubectl -n %s get secret %s -o jsonpath='{.data.cloud-config}' | base64 -d",
		userDataNS, render.BootstrapSecretName(md))
	p("  go run ./cmd/osmctl render -f %s --stage both   # the same render offline, credentials as placeholders", exampleMD)
	p("  go run ./cmd/osmctl profile export osp-ubuntu > my-osp.yaml  # a profile of your own to start from")
	p("  go run ./cmd/osmctl lint -f my-osp.yaml                 # the admission checks, offline")
	p("")
	p("Without the %s annotation the defaulting webhook names osp-<os>; a profile or extension the", clusterv1alpha1.AnnotationOSP)
	p("validating webhook refuses is refused by kubectl apply. docs/operations.md has more.")
	_, _ = io.WriteString(w, b.String())
}
