// Command osm-controller runs OSM: the OperatingSystemProfile and OperatingSystemConfig controllers, the
// admission webhooks and the metrics endpoint. Flags keep upstream OSM's names and defaults.
//
// `osm-controller webhook` (or the binary invoked as "webhook") serves only the admission webhooks and takes
// the flags of upstream's separate webhook binary; see webhook.go.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	uberzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/buildinfo"
	"github.com/osmhq/osm/host/credentials"
	"github.com/osmhq/osm/host/plugin"
	"github.com/osmhq/osm/host/pluginhost"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/signature/verifyproc"
	"github.com/osmhq/osm/plugins"
	"github.com/osmhq/osm/sdk/runtime"
)

// version, when set at build time with -ldflags "-X main.version=...", is the release version; the build
// scripts set buildinfo.Version instead, and without either the build's VCS revision identifies it.
var version = ""

// buildVersion identifies this build in logs and render hashes (a new build re-renders once).
func buildVersion() buildinfo.Info {
	if version != "" {
		buildinfo.Version = version
	}
	return buildinfo.Get()
}

type flags struct {
	// set holds the names of the flags given on the command line, so that a moot flag is reported even when
	// given its default value.
	set                             map[string]bool
	kubeconfig, workerKubeconfig    string
	namespace, cloudInitNamespace   string
	workerCount                     int
	disableDefaultOSPs              bool
	registryCredentialsSecret       string
	bootstrapTokenSA                string
	healthProbeAddress              string
	metricsAddress                  string
	pprofAddress                    string
	workerHealthProbe, workerMetric string
	leaderElect                     bool
	logFormat                       string
	logDebug                        bool
	webhookPort                     int
	webhookCertDir                  string
	webhooks                        string
	webhookCerts                    string
	webhookCertSecret               string
	webhookService                  string
	webhookURL                      string
	caBundle                        string
	plugins                         pluginFlags
	provisioningTokenTTL            time.Duration
	bootstrapTokenTTL               time.Duration
	nodeReports                     bool
	qps                             float64
	burst                           int
	node                            render.NodeFlags
	rolloutMaxConcurrent            int
	rolloutWindow                   string
}

func (f *flags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "Kubeconfig of the cluster holding OperatingSystemProfiles and OperatingSystemConfigs; in-cluster config when empty.")
	fs.StringVar(&f.workerKubeconfig, "worker-cluster-kubeconfig", "", "Kubeconfig of the cluster holding MachineDeployments and the user-data Secrets; the -kubeconfig cluster when empty.")
	fs.StringVar(&f.namespace, "namespace", "", "Namespace of the profiles and configs OSM manages (required).")
	fs.StringVar(&f.cloudInitNamespace, "cloud-init-settings-namespace", render.DefaultCloudInitSettingsNamespace, "Namespace of the user-data Secrets machine-controller reads.")
	fs.IntVar(&f.workerCount, "worker-count", 10, "MachineDeployments reconciled in parallel.")
	fs.BoolVar(&f.disableDefaultOSPs, "disable-default-osps", false, "Do not install the default OperatingSystemProfiles.")
	fs.StringVar(&f.registryCredentialsSecret, "node-registry-credentials-secret", "", "namespace/name of a kubernetes.io/dockerconfigjson Secret whose credentials nodes' containerd uses.")
	fs.StringVar(&f.bootstrapTokenSA, "bootstrap-token-service-account-name", "", "Accepted for compatibility with upstream OSM; OSM always issues a bootstrap token per MachineDeployment.")
	fs.StringVar(&f.healthProbeAddress, "health-probe-address", "127.0.0.1:8085", "Address of the health and readiness probes.")
	fs.StringVar(&f.metricsAddress, "metrics-address", "127.0.0.1:8080", "Address of the Prometheus metrics endpoint.")
	fs.StringVar(&f.pprofAddress, "pprof-address", "", "Address of a net/http/pprof endpoint with block and mutex profiling, for diagnosis; off when empty.")
	fs.StringVar(&f.workerHealthProbe, "worker-health-probe-address", "127.0.0.1:8086", "Accepted for compatibility; OSM serves one set of probes.")
	fs.StringVar(&f.workerMetric, "worker-metrics-address", "127.0.0.1:8081", "Accepted for compatibility; OSM serves one metrics endpoint.")
	fs.BoolVar(&f.leaderElect, "leader-elect", true, "Elect a leader so only one replica reconciles.")
	fs.StringVar(&f.logFormat, "log-format", "json", "Log format: json or console.")
	fs.BoolVar(&f.logDebug, "log-debug", false, "Log at debug level.")
	fs.IntVar(&f.webhookPort, "webhook-port", 9443, "Port of the admission webhooks; 0 disables them.")
	fs.StringVar(&f.webhookCertDir, "webhook-cert-dir", defaultCertDir, "Directory of the webhooks' tls.crt, tls.key and ca.crt: written there by the controller with -webhook-certs=self (it must be writable), read from there with -webhook-certs=dir.")
	fs.StringVar(&f.webhookCerts, "webhook-certs", "", "Where the webhooks' serving certificate comes from: self (the controller issues and rotates it in -webhook-cert-secret; the default with -webhooks=true) "+
		"or dir (another issuer, e.g. cert-manager, puts tls.crt, tls.key and ca.crt in -webhook-cert-dir; the default when -webhooks=auto finds them). "+
		"Either way the controller registers its webhook configurations once it serves the certificate.")
	fs.StringVar(&f.webhookCertSecret, "webhook-cert-secret", app.DefaultWebhookCertSecret, "Secret in -namespace holding the controller's own webhook certificate and CA (-webhook-certs=self).")
	fs.StringVar(&f.webhookService, "webhook-service", app.DefaultWebhookService, "Service in -namespace the webhook configurations route to; the certificate is issued for its DNS names.")
	fs.StringVar(&f.webhookURL, "webhook-url", "", "Route the webhook configurations to this https base URL instead of -webhook-service (a controller outside the cluster); the certificate is issued for its host name.")
	fs.StringVar(&f.webhooks, "webhooks", webhooksAuto, "Serve the admission webhooks: auto (when -webhook-cert-dir holds tls.crt and tls.key), true or false. "+
		"Upstream's layout serves them from a separate Deployment: `osm-controller webhook`.")
	fs.StringVar(&f.caBundle, "ca-bundle", "", "Accepted for compatibility with upstream OSM, where it is deprecated and has no effect; use -host-ca-bundle or -kubernetes-ca-bundle.")
	f.plugins.register(fs, "/var/cache/osm")
	fs.DurationVar(&f.provisioningTokenTTL, "provisioning-token-ttl", 0, "Accepted for compatibility with earlier OSM versions; has no effect: nodes fetch their provisioning data with their bootstrap token (-bootstrap-token-ttl).")
	fs.BoolVar(&f.nodeReports, "node-reports", true, "Let nodes report their bootstrap phases and failures into the OperatingSystemConfig's status (sdk/SPEC.md §11).")
	fs.DurationVar(&f.bootstrapTokenTTL, "bootstrap-token-ttl", credentials.DefaultBootstrapTokenTTL, "Lifetime of bootstrap tokens; extended while the MachineDeployment exists.")
	fs.Float64Var(&f.qps, "kube-api-qps", 0, "Client-side limit of queries per second to each API server; 0 or less: no client-side limit, as upstream OSM (controller-runtime's default). The workers bound the concurrent requests, and the API server's priority and fairness protects it.")
	fs.IntVar(&f.burst, "kube-api-burst", 200, "Burst of queries to each API server when -kube-api-qps is set.")
	fs.IntVar(&f.rolloutMaxConcurrent, "rollout-max-concurrent", 1, "At most this many MachineDeployments under the rollout policy (osm.k8c.io/rollout-policy: rollout) are rolled at once; the next starts when one has finished (docs/drift.md).")
	fs.StringVar(&f.rolloutWindow, "rollout-window", "", "Maintenance window in which rollouts start, e.g. \"Sat 02:00-06:00 UTC\" or \"Mon-Fri 22:00-04:00 Europe/Berlin\"; always when empty. The annotation osm.k8c.io/rollout-window on a MachineDeployment or its profile overrides it (docs/drift.md).")
	f.node.AddFlags(fs)
}

// pluginFlags configure the plugin runtime; the controller and the webhook server share them.
type pluginFlags struct {
	// set holds the names of the flags given on the command line (flags.set), for the deprecated
	// -plugin-host-idle-timeout.
	set              map[string]bool
	cacheDir         cacheDirFlag
	timeout          time.Duration
	memoryMiB        uint64
	budgetMiB        uint64
	registryCA       string
	insecure         bool
	plainHTTP        bool
	maxLoaded        int
	maxBuiltinLoaded int
	idle             time.Duration
	pull             time.Duration
	host             hostFlags
	// verificationPolicy is -plugin-verification-policy (package signature).
	verificationPolicy string
	// verifier is -plugin-verifier (package verifyproc).
	verifier string
}

// hostFlags bound the plugin host process (package pluginhost).
type hostFlags struct {
	memoryMiB       uint64
	addressSpaceMiB uint64
	grace           time.Duration
	loadTimeout     time.Duration
	idle            time.Duration
}

func (p *pluginFlags) register(fs *flag.FlagSet, cacheDir string) {
	p.cacheDir.dir = cacheDir
	fs.Var(&p.cacheDir, "plugin-cache-dir", "Directory for compiled plugins and pulled plugin artifacts; survives restarts on a volume.")
	fs.DurationVar(&p.timeout, "plugin-timeout", 5*time.Second, "Longest a plugin call may run.")
	fs.Uint64Var(&p.memoryMiB, "plugin-memory-limit-mib", runtime.DefaultMemoryLimit>>20, "Memory cap of each plugin instance, in MiB.")
	fs.Uint64Var(&p.budgetMiB, "plugin-memory-budget-mib", runtime.DefaultMemoryBudget>>20, "Memory of all plugin calls at once in the plugin host, in MiB: each call reserves its instance's cap (plus its input and output) first.")
	fs.Uint64Var(&p.host.memoryMiB, "plugin-host-memory-mib", pluginhost.DefaultMaxRSS>>20, "The plugin host process is killed (and restarted) when its resident memory exceeds this, in MiB.")
	fs.Uint64Var(&p.host.addressSpaceMiB, "plugin-host-address-space-mib", 16<<10, "RLIMIT_AS of the plugin host process, in MiB; 0 sets none.")
	fs.DurationVar(&p.host.grace, "plugin-host-grace", pluginhost.DefaultGrace, "How long past -plugin-timeout a plugin call may run before its host process is killed.")
	fs.DurationVar(&p.host.idle, "plugin-host-idle-timeout", pluginhost.DefaultIdleTimeout, "Deprecated: plugin hosts and the modules they load share one idle timeout, -plugin-idle-timeout. Given without it, this sets it (0 or negative: keep hosts and modules).")
	fs.DurationVar(&p.host.loadTimeout, "plugin-load-timeout", pluginhost.DefaultLoadTimeout, "Longest loading one plugin module (compile, initialise, metadata) may take before its host process is killed.")
	fs.StringVar(&p.registryCA, "plugin-registry-ca-bundle", "", "File with CA certificates of plugin registries.")
	fs.BoolVar(&p.insecure, "plugin-registry-insecure", false, "Do not verify plugin registries' TLS certificates.")
	fs.BoolVar(&p.plainHTTP, "plugin-registry-plain-http", false, "Reach plugin registries over plain HTTP.")
	fs.IntVar(&p.maxLoaded, "plugin-max-loaded", plugin.DefaultMaxLoadedModules, "Most tenants' plugin modules loaded at once, each in a plugin host process of its own (20–60 MiB each); beyond it the least recently used idle host stops. The built-in plugins share one more host.")
	fs.IntVar(&p.maxBuiltinLoaded, "plugin-max-builtin-loaded", pluginhost.DefaultMaxBuiltinModules, "Most built-in plugin modules the built-in plugins' host holds at once (~18 MiB of machine code each); beyond it the least recently used idle one is unloaded, and loaded again from the compilation cache when next needed.")
	fs.DurationVar(&p.idle, "plugin-idle-timeout", plugin.DefaultIdleTimeout, "Stop a plugin host, and have the built-in plugins' host unload a module, that no render used for this long; the next render that needs it starts or loads it again. Negative: keep them.")
	fs.DurationVar(&p.pull, "plugin-pull-timeout", plugin.DefaultPullTimeout, "Longest a plugin image pull may take, every byte included.")
	fs.StringVar(&p.verifier, "plugin-verifier", os.Getenv(verifyproc.EnvPath), "The executable that verifies plugin signatures under -plugin-verification-policy, started for each verification. Default: $"+verifyproc.EnvPath+", else "+verifyproc.Executable+" beside this executable (the image ships it).")
	fs.StringVar(&p.verificationPolicy, "plugin-verification-policy", "", "Name of a ConfigMap in -namespace whose policy.yaml says which plugin images must be signed by whom; a refused module is never loaded (docs/security.md). Empty: no verification, as upstream.")
}

// idleTimeout is the one idle timeout of plugin hosts and modules: -plugin-idle-timeout, or the deprecated
// -plugin-host-idle-timeout when only it is given (its 0 kept the host running).
func (p *pluginFlags) idleTimeout(log logr.Logger) time.Duration {
	if !p.set["plugin-host-idle-timeout"] {
		return p.idle
	}
	idle := p.idle
	if !p.set["plugin-idle-timeout"] {
		idle = cmp.Or(p.host.idle, -1)
	}
	log.Info("-plugin-host-idle-timeout is deprecated: plugin hosts and the modules they load share one idle timeout, -plugin-idle-timeout",
		"idleTimeout", idle.String())
	return idle
}

// config returns the plugin manager's configuration. Plugins run in a host process of their own, which these
// flags bound; the controller's own heap holds no plugin memory.
func (p *pluginFlags) config(log logr.Logger) (plugin.Config, error) {
	cfg := plugin.Config{CacheDir: p.cacheDir.usable(log), Timeout: p.timeout, MemoryLimit: p.memoryMiB << 20, MemoryBudget: p.budgetMiB << 20,
		MaxLoadedModules: p.maxLoaded, MaxBuiltinModules: p.maxBuiltinLoaded, IdleTimeout: p.idleTimeout(log),
		Registry: plugin.RegistryConfig{InsecureSkipTLSVerify: p.insecure, PlainHTTP: p.plainHTTP, PullTimeout: p.pull},
		Host:     plugin.HostConfig{MaxRSS: p.host.memoryMiB << 20, AddressSpace: p.host.addressSpaceMiB << 20, Grace: p.host.grace, LoadTimeout: p.host.loadTimeout}}
	if p.registryCA != "" {
		var err error
		if cfg.Registry.CABundle, err = os.ReadFile(p.registryCA); err != nil {
			return cfg, fmt.Errorf("-plugin-registry-ca-bundle: %w", err)
		}
	}
	return cfg, nil
}

// cacheDirFlag is -plugin-cache-dir. A directory given explicitly is used or fails the start; the default may
// be unwritable where no volume is mounted for it (upstream's Deployments), and then the controller uses one
// under the temp directory, or keeps compiled plugins in memory only, and says so.
type cacheDirFlag struct {
	dir string
	set bool
}

func (c *cacheDirFlag) String() string {
	if c == nil {
		return ""
	}
	return c.dir
}

func (c *cacheDirFlag) Set(v string) error {
	c.dir, c.set = v, true
	return nil
}

func (c *cacheDirFlag) usable(log logr.Logger) string {
	if c.set || c.dir == "" {
		return c.dir
	}
	err := writableDir(c.dir)
	if err == nil {
		return c.dir
	}
	fallback := filepath.Join(os.TempDir(), "osm-plugin-cache")
	if fallback != c.dir && writableDir(fallback) == nil {
		log.Info("plugin cache: the default -plugin-cache-dir is not writable, using another; mount a volume at -plugin-cache-dir to keep compiled plugins across restarts",
			"default", c.dir, "reason", err.Error(), "using", fallback)
		return fallback
	}
	log.Info("plugin cache: no writable directory, compiled plugins are kept in memory only; mount a volume at -plugin-cache-dir",
		"default", c.dir, "reason", err.Error())
	return ""
}

// writableDir creates dir if needed and checks that a file can be written in it.
func writableDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return err
	}
	name := f.Name()
	_ = f.Close()
	return os.Remove(name)
}

func main() {
	app.SetGCDefaults()
	f := &flags{}
	// A FlagSet of our own: controller-runtime registers -kubeconfig on flag.CommandLine in an init function,
	// and OSM's -kubeconfig (upstream's name) must not collide with it.
	if args, ok := webhookMode(os.Args); ok {
		os.Exit(webhookMain(args))
	}
	fs := flag.NewFlagSet("osm-controller", flag.ExitOnError)
	f.register(fs)
	printVersion := fs.Bool("version", false, "Print the version, commit and Go version, and exit.")
	_ = fs.Parse(os.Args[1:])
	f.set = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	f.plugins.set = f.set
	if *printVersion {
		fmt.Println("osm-controller", buildVersion().String())
		return
	}

	logger := newLogger(f.logFormat, f.logDebug)
	if err := run(f); err != nil {
		logger.Error(err, "osm-controller failed")
		os.Exit(1)
	}
}

// newLogger sets controller-runtime's logger from -log-format and -log-debug and returns it.
func newLogger(format string, debug bool) logr.Logger {
	logger := zap.New(zap.UseDevMode(false), func(o *zap.Options) {
		if format == "console" {
			o.Encoder = zapcore.NewConsoleEncoder(uberzap.NewDevelopmentEncoderConfig())
		}
		if debug {
			lvl := zapcore.DebugLevel
			o.Level = &lvl
		}
	})
	ctrl.SetLogger(logger)
	return logger
}

func run(f *flags) error {
	if f.namespace == "" {
		return errors.New("-namespace is required")
	}
	log := ctrl.Log.WithName("osm")
	build := buildVersion()
	if f.bootstrapTokenSA != "" {
		log.Info("-bootstrap-token-service-account-name is ignored: OSM issues a bootstrap token per MachineDeployment")
	}
	if f.provisioningTokenTTL != 0 {
		log.Info("-provisioning-token-ttl is ignored: nodes fetch their provisioning data with their bootstrap token (-bootstrap-token-ttl)")
	}
	if f.set["worker-metrics-address"] || f.set["worker-health-probe-address"] {
		// Upstream runs a second manager for the worker cluster with its own endpoints; OSM's one manager
		// serves the worker cluster's reconcile metrics and probes on -metrics-address and -health-probe-address.
		log.Info("-worker-metrics-address and -worker-health-probe-address are moot: this controller serves all its metrics on -metrics-address and its probes on -health-probe-address",
			"metrics", f.metricsAddress, "probes", f.healthProbeAddress)
	}
	if f.caBundle != "" {
		log.Info("-ca-bundle is ignored (deprecated upstream): use -host-ca-bundle or -kubernetes-ca-bundle")
	}
	webhookOpts, serving, err := f.webhookServer(log)
	if err != nil {
		return err
	}
	base := render.DefaultSettings()
	base.Namespace = f.namespace
	base.CloudInitSettingsNamespace = f.cloudInitNamespace
	settings, err := f.node.Settings(base)
	if err != nil {
		return err
	}
	mgmt, err := restConfig(f.kubeconfig, f.qps, f.burst)
	if err != nil {
		return fmt.Errorf("-kubeconfig: %w", err)
	}
	var worker *rest.Config
	if f.workerKubeconfig != "" {
		if worker, err = restConfig(f.workerKubeconfig, f.qps, f.burst); err != nil {
			return fmt.Errorf("-worker-cluster-kubeconfig: %w", err)
		}
	}
	pcfg, err := f.plugins.config(log)
	if err != nil {
		return err
	}
	defaults, err := plugins.DefaultProfiles()
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	mgr, err := app.New(ctx, app.Options{
		Mgmt: mgmt, Worker: worker, Settings: settings, WorkerCount: f.workerCount,
		DisableDefaultOSPs: f.disableDefaultOSPs, Defaults: defaults, Builtins: plugins.Builtin(), Plugins: pcfg,
		RegistryCredentialsSecret: f.registryCredentialsSecret,
		BootstrapTokenTTL:         f.bootstrapTokenTTL,
		NoNodeReports:             !f.nodeReports,
		RolloutMaxConcurrent:      f.rolloutMaxConcurrent, RolloutWindow: f.rolloutWindow,
		PluginVerificationPolicy: f.plugins.verificationPolicy,
		PluginVerifier:           f.plugins.verifier,
		MetricsAddress:           f.metricsAddress, HealthProbeAddress: f.healthProbeAddress, PprofAddress: f.pprofAddress, LeaderElect: f.leaderElect,
		Webhook: webhookOpts, WebhookServing: serving,
		Build: build.Short(), Logger: log,
		Preflight: true,
	})
	if err != nil {
		return err
	}
	log.Info("starting", "version", build.Short(), "commit", build.Revision, "namespace", settings.Namespace, "separateWorkerCluster", worker != nil)
	return mgr.Start(ctx)
}

func restConfig(path string, qps float64, burst int) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if path == "" {
		cfg, err = ctrl.GetConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", path)
	}
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = float32(qps), burst
	if qps <= 0 {
		cfg.QPS = -1 // client-go: no rate limiter
	}
	return cfg, nil
}
