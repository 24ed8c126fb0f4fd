// Package app wires OSM's controllers, webhooks, plugin runtime and metrics into a controller-runtime manager.
// cmd/osm-controller parses flags into Options and calls New; integration tests call New with the same
// Options, so they exercise exactly what production runs.
package app

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/controllers/nodereport"
	"github.com/osmhq/osm/host/controllers/osc"
	"github.com/osmhq/osm/host/controllers/osp"
	"github.com/osmhq/osm/host/controllers/ospx"
	"github.com/osmhq/osm/host/controllers/rollout"
	"github.com/osmhq/osm/host/credentials"
	"github.com/osmhq/osm/host/plugin"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/scheme"
	"github.com/osmhq/osm/host/validation"
	"github.com/osmhq/osm/host/webhooks"
)

// Options configure the controller. Field comments give the flag.
type Options struct {
	// Mgmt is the cluster of profiles and OperatingSystemConfigs (-kubeconfig).
	Mgmt *rest.Config
	// Worker is the cluster of MachineDeployments and Secrets (-worker-cluster-kubeconfig); nil means Mgmt.
	Worker *rest.Config
	// Settings are the node settings (-namespace and the -node-* flags).
	Settings render.Settings
	// WorkerCount is the number of MachineDeployments reconciled in parallel (-worker-count).
	WorkerCount int
	// DisableDefaultOSPs leaves the default profiles uninstalled (-disable-default-osps).
	DisableDefaultOSPs bool
	// Defaults are the default profiles shipped with this build.
	Defaults []*osmv1alpha1.OperatingSystemProfile
	// Builtins are the built-in plugins (<name>.wasm).
	Builtins fs.FS
	// Plugins configures the plugin runtime (-plugin-* flags).
	Plugins plugin.Config
	// RegistryCredentialsSecret is "namespace/name" of a dockerconfigjson Secret in the worker cluster whose
	// credentials nodes use to pull images (-node-registry-credentials-secret).
	RegistryCredentialsSecret string
	// BootstrapTokenTTL is the node credential's lifetime, extended while its MachineDeployment exists.
	BootstrapTokenTTL time.Duration
	// NoNodeReports turns the nodes' bootstrap reports off (-node-reports=false): no report objects, no right
	// to write them, no OSC status.nodes (sdk/SPEC.md §11).
	NoNodeReports bool
	// MetricsAddress and HealthProbeAddress are where metrics and probes are served ("0" disables).
	MetricsAddress, HealthProbeAddress string
	// PprofAddress serves net/http/pprof, with block and mutex profiling on, for diagnosis (-pprof-address);
	// empty (the default) serves nothing and profiles nothing.
	PprofAddress string
	// LeaderElect enables leader election in Settings.Namespace (-leader-elect).
	LeaderElect bool
	// Webhook serves the admission webhooks when Port is not zero. The server waits for its certificate in
	// CertDir rather than failing the start.
	Webhook webhook.Options
	// WebhookServing is where the certificate comes from and whether the controller registers its webhook
	// configurations (-webhook-certs and friends); the zero value registers nothing.
	WebhookServing WebhookServing
	// Build identifies the controller build.
	Build string
	// Logger is the root logger.
	Logger logr.Logger
	// Preflight checks, before anything starts, that the API servers serve OSM's kinds and that the controller
	// may do what it does, and fails with every missing piece named (see Preflight). cmd/osm-controller sets it.
	Preflight bool
	// RolloutMaxConcurrent is how many MachineDeployments OSM rolls at once under the rollout policy
	// (-rollout-max-concurrent; 1 when zero). RolloutWindow is the default maintenance window in which rollouts
	// start (-rollout-window; always when empty). See docs/drift.md.
	RolloutMaxConcurrent int
	RolloutWindow        string
	// PluginVerificationPolicy names the ConfigMap in Settings.Namespace whose policy.yaml says which plugin
	// images must be signed by whom (-plugin-verification-policy; package signature, docs/security.md). Empty
	// verifies nothing, as upstream.
	PluginVerificationPolicy string
	// PluginVerifier is the executable that verifies signatures (-plugin-verifier); default: osm-plugin-verify
	// beside this process's executable (package verifyproc).
	PluginVerifier string
	// InProcessRestart allows a second controller in the same process, as tests that restart it need;
	// controller-runtime otherwise refuses duplicate controller names.
	InProcessRestart bool
}

// New builds the manager with every controller and webhook registered. Start it with mgr.Start.
func New(ctx context.Context, o Options) (ctrl.Manager, error) {
	if err := fillCachesByListing(); err != nil {
		return nil, err
	}
	if o.Preflight {
		if err := preflight(ctx, o); err != nil {
			return nil, err
		}
	}
	workerCfg := o.Worker
	separate := workerCfg != nil
	if !separate {
		workerCfg = o.Mgmt
	}
	mgrOpts := ctrl.Options{
		Scheme:                        scheme.Scheme,
		Logger:                        o.Logger,
		Metrics:                       metricsserver.Options{BindAddress: o.MetricsAddress},
		HealthProbeBindAddress:        o.HealthProbeAddress,
		PprofBindAddress:              o.PprofAddress,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              "operating-system-manager",
		LeaderElectionNamespace:       o.Settings.Namespace,
		LeaderElectionReleaseOnCancel: true,
		MapperProvider:                newMemoMapper,
	}
	if o.PprofAddress != "" {
		enableContentionProfiles()
	}
	if o.InProcessRestart {
		mgrOpts.Controller.SkipNameValidation = ptr.To(true)
	}
	certs := &certFiles{dir: o.Webhook.CertDir}
	if o.Webhook.Port != 0 {
		mgrOpts.WebhookServer = newWebhookServer(o.Webhook, certs)
	}
	if separate {
		mgrOpts.Cache = mgmtCacheOptions(o.Settings.Namespace)
	} else {
		mgrOpts.Cache = sameClusterCacheOptions(o.Settings.Namespace, o.Settings.CloudInitSettingsNamespace)
	}
	mgr, err := ctrl.NewManager(o.Mgmt, mgrOpts)
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	var worker cluster.Cluster = mgr
	if separate {
		worker, err = cluster.New(workerCfg, func(co *cluster.Options) {
			co.Scheme = scheme.Scheme
			co.Logger = o.Logger.WithName("worker")
			co.MapperProvider = newMemoMapper
			co.Cache = workerCacheOptions(o.Settings.CloudInitSettingsNamespace)
		})
		if err != nil {
			return nil, fmt.Errorf("connecting to the worker cluster: %w", err)
		}
		if err := mgr.Add(worker); err != nil {
			return nil, err
		}
	}

	plugins, err := plugin.New(o.pluginConfig(), o.Builtins, metrics.Registry, o.Logger.WithName("plugins"))
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(closeOnStop(plugins)); err != nil {
		return nil, err
	}
	source := &plugin.Resolver{Manager: plugins, PullSecret: pullSecrets(mgr.GetAPIReader()),
		Verification: verification(mgr.GetAPIReader(), o.Settings.Namespace, o.PluginVerificationPolicy, o.PluginVerifier, o.Logger.WithName("signature"))}
	settings := o.Settings
	auth, hosts, err := registryCredentials(ctx, worker.GetAPIReader(), o.RegistryCredentialsSecret)
	if err != nil {
		return nil, err
	}
	settings.RegistryCredentialHosts = hosts

	mgmtClient, err := newMetadataAnswerClient(mgr.GetClient(), mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, err
	}
	workerClient, err := newMetadataAnswerClient(worker.GetClient(), worker.GetConfig(), worker.GetHTTPClient())
	if err != nil {
		return nil, err
	}
	var defaults []*osmv1alpha1.OperatingSystemProfile
	if !o.DisableDefaultOSPs {
		defaults = o.Defaults
	}
	oscReconciler := &osc.Reconciler{
		Mgmt: mgmtClient, Worker: workerClient, MgmtAPIReader: mgr.GetAPIReader(),
		Renderer: &render.Renderer{Plugins: source},
		Issuer: &credentials.Issuer{Client: worker.GetClient(), APIReader: worker.GetAPIReader(), Namespace: settings.CloudInitSettingsNamespace,
			BootstrapTokenTTL: o.BootstrapTokenTTL, NoNodeReports: o.NoNodeReports || !nodereport.Served(worker)},
		Settings:     settings,
		ClusterInfo:  cachedClusterInfo(worker.GetAPIReader(), workerCfg.CAData, settings.KubernetesCACert),
		RegistryAuth: auth,
		Recorder:     worker.GetEventRecorderFor("operating-system-manager"), //nolint:staticcheck // the reconcilers record through record.EventRecorder
		Build:        o.Build,
		StalledRetry: 10 * time.Minute,
		TakesOver:    osp.TakesOver(defaults, settings.Namespace),
	}
	workers := o.WorkerCount
	if workers <= 0 {
		workers = 10
	}
	if err := oscReconciler.SetupWithManager(ctx, mgr, worker, workers, metrics.Registry); err != nil {
		return nil, err
	}
	if err := setupNodeReports(o, mgr, worker, oscReconciler); err != nil {
		return nil, err
	}
	window, err := rollout.ParseWindow(o.RolloutWindow)
	if err != nil {
		return nil, fmt.Errorf("-rollout-window: %w", err)
	}
	rolloutReconciler := &rollout.Reconciler{Worker: worker.GetClient(), Mgmt: mgr.GetClient(), MgmtAPIReader: mgr.GetAPIReader(),
		Namespace: settings.Namespace, MaxConcurrent: o.RolloutMaxConcurrent, Window: window,
		Recorder: worker.GetEventRecorderFor("operating-system-manager"), //nolint:staticcheck // see above
	}
	if err := rolloutReconciler.SetupWithManager(mgr, worker, metrics.Registry); err != nil {
		return nil, err
	}
	ospReconciler := &osp.Reconciler{Client: mgr.GetClient(), Plugins: source, Recorder: mgr.GetEventRecorderFor("operating-system-manager"), //nolint:staticcheck // see above
		Namespace: settings.Namespace, Defaults: defaults}
	if err := ospReconciler.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	extReconciler := &ospx.Reconciler{Client: mgr.GetClient(), Validator: &validation.ExtensionValidator{Plugins: source, Settings: settings}}
	if err := extReconciler.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return nil
		}
		if err := ospReconciler.InstallDefaults(ctx); err != nil {
			o.Logger.Error(err, "installing default profiles; they are retried when reconciled")
		}
		<-ctx.Done()
		return nil
	})); err != nil {
		return nil, err
	}
	if o.Webhook.Port != 0 {
		// Admission waits for plugin pulls (within the pull timeout): someone is waiting for the answer.
		admission := &plugin.Resolver{Manager: plugins, PullSecret: source.PullSecret, WaitForPulls: true, Verification: source.Verification}
		// Reviews wait for a plugin's load only within a bound; the default profiles need no plugin at admission,
		// and their plugins are loaded in the background at start (webhooks.Setup).
		if err := webhooks.Setup(mgr, &validation.ProfileValidator{Plugins: admission, Settings: settings, Shipped: defaults}); err != nil {
			return nil, err
		}
		if err := webhooks.SetupExtensions(mgr, mgr.GetClient(), &validation.ExtensionValidator{Plugins: source, Settings: settings}); err != nil {
			return nil, err
		}
		if err := setupWebhookServing(ctx, mgr, o, certs); err != nil {
			return nil, err
		}
	} else if err := mgr.Add(&deregistration{reader: mgr.GetAPIReader(), writer: mgr.GetClient(), log: o.Logger.WithName("webhook-serving")}); err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("caches", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return fmt.Errorf("caches not synced")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return mgr, nil
}

func pullSecrets(c client.Reader) plugin.PullSecretFunc {
	return func(ctx context.Context, namespace, name string) ([]byte, error) {
		s := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
			return nil, err
		}
		data, ok := s.Data[corev1.DockerConfigJsonKey]
		if !ok {
			return nil, fmt.Errorf("pull Secret %s/%s has no %s key", namespace, name, corev1.DockerConfigJsonKey)
		}
		return data, nil
	}
}

// closeOnStop stops the plugin manager, and with it the plugin host process, when the manager stops: the host
// outlives nothing it served.
func closeOnStop(plugins *plugin.Manager) manager.Runnable {
	return manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		return plugins.Close(context.WithoutCancel(ctx))
	})
}
