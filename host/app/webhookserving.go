package app

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/osmhq/osm/host/webhooks"
)

// WebhookCertMode says where the webhook server's certificate comes from.
type WebhookCertMode string

const (
	// WebhookCertsExternal serves the key pair in the certificate directory and leaves the webhook
	// configurations to whoever installed them (envtest, `make run`, upstream's layout). The zero value.
	WebhookCertsExternal WebhookCertMode = ""
	// WebhookCertsSelf provisions and rotates the serving certificate and its CA in a Secret of the controller's
	// namespace (github.com/open-policy-agent/cert-controller), writes them to the certificate directory, and
	// registers the webhook configurations with that CA once the server serves it. Needs nothing else.
	WebhookCertsSelf WebhookCertMode = "self"
	// WebhookCertsDir serves tls.crt and tls.key another issuer (cert-manager) puts in the certificate
	// directory, and registers the webhook configurations with its ca.crt once the server serves them.
	WebhookCertsDir WebhookCertMode = "dir"
)

// DefaultWebhookCertSecret and DefaultWebhookService are the names deploy/webhooks installs.
const (
	DefaultWebhookCertSecret = "operating-system-manager-webhook-server-cert"
	DefaultWebhookService    = "operating-system-manager-webhook"
	// webhookCheckInterval is how often the registration checks the server and the configurations; a
	// rotation is also picked up within it when nothing else announced it.
	webhookCheckInterval = 10 * time.Second
	// fieldOwner is the field manager of what the controller writes to the webhook configurations.
	fieldOwner = "osm-controller"
	// annotationInjectCA is cert-manager's CA injection; a configuration the controller registers must not
	// also get cert-manager's CA (configurations of an earlier deploy/webhooks carry it).
	annotationInjectCA = "cert-manager.io/inject-ca-from"
)

// WebhookServing configures the controller's own certificate and the registration of its webhook
// configurations. The zero value is WebhookCertsExternal: nothing registered, the key pair read from the
// certificate directory, the server waiting for it if it is not there yet.
type WebhookServing struct {
	// Certs is where the certificate comes from (-webhook-certs).
	Certs WebhookCertMode
	// SecretName is the Secret, in Settings.Namespace, of the controller's own certificate and CA
	// (-webhook-cert-secret); DefaultWebhookCertSecret when empty.
	SecretName string
	// Service is the Service, in Settings.Namespace, the configurations route to (-webhook-service);
	// DefaultWebhookService when empty. The certificate is issued for its DNS names.
	Service string
	// URL, when set, routes the configurations to this base URL instead of the Service (-webhook-url): a
	// controller outside the cluster. The certificate is issued for its host name.
	URL string
	// CheckInterval is how often the registration checks; webhookCheckInterval when zero. RotationCheck is how
	// often the certificate's expiry is checked (the rotator's own check; 12 hours when zero), besides every
	// change of its Secret.
	CheckInterval, RotationCheck time.Duration
}

func (s WebhookServing) withDefaults() WebhookServing {
	if s.SecretName == "" {
		s.SecretName = DefaultWebhookCertSecret
	}
	if s.Service == "" {
		s.Service = DefaultWebhookService
	}
	if s.CheckInterval <= 0 {
		s.CheckInterval = webhookCheckInterval
	}
	return s
}

// dnsNames are the names the serving certificate is for; the first is what the API server verifies.
func (s WebhookServing) dnsNames(namespace string) ([]string, error) {
	if s.URL != "" {
		u, err := url.Parse(s.URL)
		if err != nil || u.Scheme != "https" || u.Hostname() == "" {
			return nil, fmt.Errorf("-webhook-url %q: want https://host[:port][/path]", s.URL)
		}
		if net.ParseIP(u.Hostname()) != nil {
			return nil, fmt.Errorf("-webhook-url %q: the certificate is issued for a DNS name, not an IP address (use localhost for 127.0.0.1)", s.URL)
		}
		return []string{u.Hostname()}, nil
	}
	svc := s.Service + "." + namespace + ".svc"
	return []string{svc, svc + ".cluster.local"}, nil
}

// newWebhookServer returns the webhook server serving the key pair in opts.CertDir through files, which waits
// for the files instead of failing the start.
func newWebhookServer(opts webhook.Options, files *certFiles) webhook.Server {
	opts.TLSOpts = append(append([]func(*tls.Config){}, opts.TLSOpts...), func(c *tls.Config) {
		c.GetCertificate = files.GetCertificate
	})
	return webhook.NewServer(opts)
}

// setupWebhookServing adds, for the self and dir modes, what provisions the certificate and registers the
// webhook configurations, and in every mode the readiness check "webhooks": ready once the server serves a
// certificate (that the CA verifies, where the controller registers the configurations).
func setupWebhookServing(ctx context.Context, mgr manager.Manager, o Options, files *certFiles) error {
	s := o.WebhookServing.withDefaults()
	log := o.Logger.WithName("webhook-serving")
	ns := o.Settings.Namespace
	names, err := s.dnsNames(ns)
	if err != nil {
		return err
	}
	local := net.JoinHostPort(localHost(o.Webhook.Host), strconv.Itoa(o.Webhook.Port))
	if o.WebhookServing.Certs == WebhookCertsExternal {
		return mgr.AddReadyzCheck("webhooks", func(*http.Request) error { return serves(local, "", nil) })
	}
	switch s.Certs {
	case WebhookCertsSelf:
		if err := ensureCertSecret(ctx, mgr, types.NamespacedName{Namespace: ns, Name: s.SecretName}); err != nil {
			return err
		}
		if err := rotator.AddRotator(mgr, &rotator.CertRotator{
			SecretKey:      types.NamespacedName{Namespace: ns, Name: s.SecretName},
			CertDir:        files.dir,
			CAName:         "operating-system-manager-webhook-ca",
			CAOrganization: "osm",
			DNSName:        names[0],
			ExtraDNSNames:  names[1:],
			IsReady:        make(chan struct{}),
			Webhooks: []rotator.WebhookInfo{{Name: webhooks.ValidatingConfigName, Type: rotator.Validating},
				{Name: webhooks.MutatingConfigName, Type: rotator.Mutating}},
			FieldOwner: fieldOwner,
			// Every replica serves the webhooks, so every replica keeps the certificate current.
			RequireLeaderElection:  false,
			RotationCheckFrequency: s.RotationCheck,
			ControllerName:         "webhook-cert-rotator",
		}); err != nil {
			return fmt.Errorf("webhook certificate rotation: %w", err)
		}
		if err := addCertSync(mgr, ns, s.SecretName, files, log); err != nil {
			return err
		}
	case WebhookCertsDir:
	default:
		return fmt.Errorf("-webhook-certs %q: want self or dir", s.Certs)
	}
	v, m := webhooks.Configurations(ns, s.Service)
	if s.URL != "" {
		routeToURL(v, m, s.URL)
	}
	reg := &registration{reader: mgr.GetAPIReader(), writer: mgr.GetClient(), files: files, local: local, serverName: names[0],
		validating: v, mutating: m, interval: s.CheckInterval, log: log}
	if err := mgr.Add(reg); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("webhooks", func(*http.Request) error {
		ca, err := files.caBundle()
		if err != nil {
			return fmt.Errorf("no CA yet: %w", err)
		}
		return serves(local, names[0], ca)
	})
}

// localHost is the address the controller reaches its own webhook server at.
func localHost(host string) string {
	if host == "" || host == "0.0.0.0" || host == "::" {
		return "127.0.0.1"
	}
	return host
}

// serves completes a TLS handshake with the webhook server at addr. With ca it verifies the served certificate
// as the API server will (chains to ca, issued for serverName); without it, it only checks that one is served.
func serves(addr, serverName string, ca []byte) error {
	cfg := &tls.Config{ServerName: serverName, MinVersion: tls.VersionTLS12}
	if ca == nil {
		cfg.InsecureSkipVerify = true //nolint:gosec // checks only that the server answers; nothing is sent
	} else {
		pool, err := certPool(ca)
		if err != nil {
			return err
		}
		cfg.RootCAs = pool
	}
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return fmt.Errorf("webhook server at %s does not serve a usable certificate: %w", addr, err)
	}
	return conn.Close()
}

// ensureCertSecret creates the (empty) Secret of the controller's own certificate when it is missing: the
// rotator fills it but does not create it. deploy/webhooks ships it, so the controller needs no create
// permission there; run elsewhere, the controller creates it.
func ensureCertSecret(ctx context.Context, mgr manager.Manager, key types.NamespacedName) error {
	c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return err
	}
	err = c.Get(ctx, key, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		if err != nil {
			return fmt.Errorf("reading the webhook certificate Secret %s: %w", key, err)
		}
		return nil
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
		Labels: map[string]string{"app.kubernetes.io/managed-by": fieldOwner}}, Type: corev1.SecretTypeOpaque}
	if err := c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the webhook certificate Secret %s: %w", key, err)
	}
	return nil
}

// addCertSync writes the certificate Secret's key pair and CA to the certificate directory whenever the
// Secret changes, through an informer of that one Secret. The webhook server reads them there; a mounted
// Secret volume would do the same but only after the kubelet's sync period (a minute or more), and only in a
// pod.
func addCertSync(mgr manager.Manager, namespace, name string, files *certFiles, log logr.Logger) error {
	c, err := cache.New(mgr.GetConfig(), cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
		ByObject:          map[client.Object]cache.ByObject{&corev1.Secret{}: {Field: fields.OneTermEqualSelector("metadata.name", name)}},
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(c); err != nil {
		return err
	}
	inf, err := c.GetInformer(context.Background(), &corev1.Secret{}, cache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	write := func(obj any) {
		s, ok := obj.(*corev1.Secret)
		if !ok || s.Name != name || len(s.Data[certFile]) == 0 || len(s.Data[keyFile]) == 0 {
			return
		}
		changed, err := files.write(s.Data)
		if err != nil {
			log.Error(err, "writing the webhook certificate", "secret", klogRef(s), "dir", files.dir)
			return
		}
		if changed {
			log.Info("webhook certificate written", "secret", klogRef(s), "dir", files.dir)
		}
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: write, UpdateFunc: func(_, obj any) { write(obj) }})
	return err
}

func klogRef(o client.Object) string { return o.GetNamespace() + "/" + o.GetName() }
