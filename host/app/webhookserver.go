package app

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/plugin"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/scheme"
	"github.com/osmhq/osm/host/validation"
	"github.com/osmhq/osm/host/webhooks"
)

// WebhookOptions configure the admission webhooks served alone (`osm-controller webhook`), the way upstream
// OSM's separate webhook Deployment runs them.
type WebhookOptions struct {
	// Config is the cluster of the profiles (-kubeconfig).
	Config *rest.Config
	// Settings are the node settings profiles are trial-rendered with (-namespace; the rest are defaults).
	Settings render.Settings
	// Builtins are the built-in plugins (<name>.wasm); Plugins configures the plugin runtime.
	Builtins fs.FS
	Plugins  plugin.Config
	// Defaults are the default profiles this build ships: reviews of them need no plugin, and their plugins
	// are loaded at start (webhooks.Setup).
	Defaults []*osmv1alpha1.OperatingSystemProfile
	// Webhook is where the webhooks are served (-cert-dir, -webhook-port).
	Webhook webhook.Options
	// MetricsAddress and HealthProbeAddress are where metrics and probes are served ("0" disables).
	MetricsAddress, HealthProbeAddress string
	// PluginVerificationPolicy is Options.PluginVerificationPolicy: reviews load no module the policy refuses.
	PluginVerificationPolicy string
	// PluginVerifier is Options.PluginVerifier.
	PluginVerifier string
	// LeaderElect enables leader election in Settings.Namespace; it changes nothing for serving.
	LeaderElect bool
	// Logger is the root logger.
	Logger logr.Logger
}

// NewWebhookServer builds a manager that serves only the admission webhooks. Start it with mgr.Start.
func NewWebhookServer(o WebhookOptions) (ctrl.Manager, error) {
	if err := fillCachesByListing(); err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(o.Config, ctrl.Options{
		Scheme:                        scheme.Scheme,
		Logger:                        o.Logger,
		Metrics:                       metricsserver.Options{BindAddress: o.MetricsAddress},
		HealthProbeBindAddress:        o.HealthProbeAddress,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              "operating-system-manager-webhook",
		LeaderElectionNamespace:       o.Settings.Namespace,
		LeaderElectionReleaseOnCancel: true,
		WebhookServer:                 newWebhookServer(o.Webhook, &certFiles{dir: o.Webhook.CertDir}),
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	plugins, err := plugin.New(o.pluginConfig(), o.Builtins, metrics.Registry, o.Logger.WithName("plugins"))
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(closeOnStop(plugins)); err != nil {
		return nil, err
	}
	// Admission waits for plugin pulls (within the pull timeout): someone is waiting for the answer.
	source := &plugin.Resolver{Manager: plugins, PullSecret: pullSecrets(mgr.GetAPIReader()), WaitForPulls: true,
		Verification: verification(mgr.GetAPIReader(), o.Settings.Namespace, o.PluginVerificationPolicy, o.PluginVerifier, o.Logger.WithName("signature"))}
	if err := webhooks.Setup(mgr, &validation.ProfileValidator{Plugins: source, Settings: o.Settings, Shipped: o.Defaults}); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("webhooks", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	return mgr, nil
}

// ServingCertificate reports whether dir holds the webhook server's tls.crt and tls.key. The controller serves
// its webhooks by default only when they are there: upstream's controller Deployment mounts none (upstream
// serves webhooks from a separate Deployment) and must start all the same.
func ServingCertificate(dir string) (bool, error) {
	for _, name := range []string{"tls.crt", "tls.key"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			if os.IsNotExist(err) {
				return false, nil
			}
			return false, err
		}
	}
	return true, nil
}
