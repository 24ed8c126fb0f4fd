package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/plugins"
)

const (
	// defaultCertDir is where controller-runtime, and upstream's Deployments, keep the serving certificate.
	defaultCertDir = "/tmp/k8s-webhook-server/serving-certs"
	webhooksAuto   = "auto"
	// webhookCommand is the subcommand, and the binary name (upstream's image runs /usr/local/bin/webhook),
	// that serves only the webhooks.
	webhookCommand = "webhook"
)

// webhookServer decides whether the controller serves the admission webhooks, and where their certificate
// comes from, and logs the decision, so an operator sees at start where admission is served. By default
// (-webhooks=auto) they are served when the certificate directory holds a key pair (another issuer's, mounted
// there); upstream's controller Deployment mounts none (upstream serves webhooks from a separate Deployment),
// and the controller must start with its flags alone. With -webhooks=true the controller issues its own
// certificate unless -webhook-certs=dir. A missing certificate never stops the controller: the webhook server
// waits for it, and the webhook configurations are registered only once it is served.
func (f *flags) webhookServer(log logr.Logger) (webhook.Options, app.WebhookServing, error) {
	opts := webhook.Options{Port: f.webhookPort, CertDir: f.webhookCertDir}
	serving := app.WebhookServing{Certs: app.WebhookCertMode(f.webhookCerts), SecretName: f.webhookCertSecret,
		Service: f.webhookService, URL: f.webhookURL}
	off := func(why string) (webhook.Options, app.WebhookServing, error) {
		log.Info("admission webhooks off: "+why, "certDir", f.webhookCertDir)
		return webhook.Options{}, app.WebhookServing{}, nil
	}
	switch serving.Certs {
	case app.WebhookCertsSelf, app.WebhookCertsDir, "":
	default:
		return webhook.Options{}, serving, fmt.Errorf("-webhook-certs: %q is not self or dir", f.webhookCerts)
	}
	if f.webhookPort == 0 {
		return off("-webhook-port=0")
	}
	switch f.webhooks {
	case "false":
		return off("-webhooks=false")
	case "true":
		if serving.Certs == "" {
			serving.Certs = app.WebhookCertsSelf
		}
	case webhooksAuto:
		ok, err := app.ServingCertificate(f.webhookCertDir)
		if err != nil {
			return webhook.Options{}, serving, fmt.Errorf("-webhook-cert-dir: %w", err)
		}
		if !ok {
			return off("no tls.crt and tls.key in -webhook-cert-dir; set -webhooks=true (the controller issues its own certificate), " +
				"or mount a certificate there, or serve them with `osm-controller webhook` (upstream's webhook Deployment)")
		}
		if serving.Certs == "" {
			serving.Certs = app.WebhookCertsDir
		}
	default:
		return webhook.Options{}, serving, fmt.Errorf("-webhooks: %q is not auto, true or false", f.webhooks)
	}
	log.Info("admission webhooks on; registered once the server serves its certificate", "port", f.webhookPort, "certDir", f.webhookCertDir,
		"certs", serving.Certs, "secret", secretIfSelf(serving), "service", f.webhookService, "url", f.webhookURL)
	return opts, serving, nil
}

func secretIfSelf(s app.WebhookServing) string {
	if s.Certs == app.WebhookCertsSelf {
		return s.SecretName
	}
	return ""
}

// webhookMode reports whether the process serves only the webhooks, and the arguments to parse then.
func webhookMode(argv []string) ([]string, bool) {
	if filepath.Base(argv[0]) == webhookCommand {
		return argv[1:], true
	}
	if len(argv) > 1 && argv[1] == webhookCommand {
		return argv[2:], true
	}
	return nil, false
}

// webhookFlags are upstream's webhook binary's flags, with its defaults, plus the plugin flags.
type webhookFlags struct {
	kubeconfig, namespace, certDir string
	metricsAddress, probeAddress   string
	leaderElect                    bool
	logFormat                      string
	logDebug                       bool
	port                           int
	plugins                        pluginFlags
}

func (f *webhookFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "Kubeconfig of the cluster holding the profiles; in-cluster config when empty.")
	fs.StringVar(&f.namespace, "namespace", "", "Namespace of the profiles OSM manages (required).")
	fs.StringVar(&f.certDir, "cert-dir", defaultCertDir, "Directory with the serving certificate, tls.crt and tls.key.")
	fs.StringVar(&f.metricsAddress, "metrics-bind-address", ":8080", "Address of the Prometheus metrics endpoint.")
	fs.StringVar(&f.probeAddress, "health-probe-bind-address", ":8081", "Address of the health and readiness probes.")
	fs.BoolVar(&f.leaderElect, "leader-elect", false, "Elect a leader; accepted for compatibility, every replica serves.")
	fs.StringVar(&f.logFormat, "log-format", "json", "Log format: json or console.")
	fs.BoolVar(&f.logDebug, "log-debug", false, "Log at debug level.")
	fs.IntVar(&f.port, "webhook-port", 9443, "Port of the admission webhooks (upstream's is fixed at 9443).")
	// The webhook server has no volume for a cache in upstream's Deployment; /tmp is writable there.
	f.plugins.register(fs, filepath.Join(os.TempDir(), "osm-plugin-cache"))
}

func webhookMain(args []string) int {
	f := &webhookFlags{}
	fs := flag.NewFlagSet("osm-controller webhook", flag.ExitOnError)
	f.register(fs)
	_ = fs.Parse(args)
	f.plugins.set = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.plugins.set[fl.Name] = true })
	logger := newLogger(f.logFormat, f.logDebug)
	if err := runWebhook(f); err != nil {
		logger.Error(err, "osm-controller webhook failed")
		return 1
	}
	return 0
}

func runWebhook(f *webhookFlags) error {
	if f.namespace == "" {
		return errors.New("-namespace is required")
	}
	log := ctrl.Log.WithName("osm-webhook")
	cfg, err := restConfig(f.kubeconfig, 50, 100)
	if err != nil {
		return fmt.Errorf("-kubeconfig: %w", err)
	}
	pcfg, err := f.plugins.config(log)
	if err != nil {
		return err
	}
	settings := render.DefaultSettings()
	settings.Namespace = f.namespace
	defaults, err := plugins.DefaultProfiles()
	if err != nil {
		return err
	}
	mgr, err := app.NewWebhookServer(app.WebhookOptions{
		Config: cfg, Settings: settings, Builtins: plugins.Builtin(), Plugins: pcfg, Defaults: defaults,
		PluginVerificationPolicy: f.plugins.verificationPolicy,
		PluginVerifier:           f.plugins.verifier,
		Webhook:                  webhook.Options{Port: f.port, CertDir: f.certDir},
		MetricsAddress:           f.metricsAddress, HealthProbeAddress: f.probeAddress, LeaderElect: f.leaderElect,
		Logger: log,
	})
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	log.Info("admission webhooks on (webhook server only, no controllers)", "version", buildVersion().Short(), "namespace", f.namespace,
		"port", f.port, "certDir", f.certDir)
	return mgr.Start(ctx)
}
