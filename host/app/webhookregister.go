package app

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"reflect"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/osmhq/osm/host/webhooks"
)

// registration puts the controller's webhooks into its webhook configurations only once its own server
// serves a certificate their CA verifies, and keeps the CA current. Until then the configurations hold no
// webhook (deploy/webhooks ships them empty), so nothing routes an admission review to a server that cannot
// answer it: no write is refused for want of a certificate.
//
// Every replica runs it (the webhook server runs on every replica); they write the same content.
type registration struct {
	reader     client.Reader
	writer     client.Writer
	files      *certFiles
	local      string
	serverName string
	validating *admissionregistrationv1.ValidatingWebhookConfiguration
	mutating   *admissionregistrationv1.MutatingWebhookConfiguration
	interval   time.Duration
	log        logr.Logger

	lastErr string
	served  bool
}

var _ manager.LeaderElectionRunnable = &registration{}

// NeedLeaderElection is false: a replica registers what it serves itself.
func (r *registration) NeedLeaderElection() bool { return false }

// Start checks at once and then every interval until ctx is done.
func (r *registration) Start(ctx context.Context) error {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		r.report(r.check(ctx))
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// report logs an outcome once, not on every check.
func (r *registration) report(err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if msg == r.lastErr {
		return
	}
	r.lastErr = msg
	if err != nil {
		r.log.Info("admission webhooks not registered yet", "reason", msg)
	}
}

// check registers the webhooks when the server serves a certificate the CA verifies.
func (r *registration) check(ctx context.Context) error {
	ca, err := r.files.caBundle()
	if err != nil {
		return err
	}
	if err := serves(r.local, r.serverName, ca); err != nil {
		return err
	}
	if !r.served {
		r.served = true
		r.log.Info("webhook server serves its certificate; registering the admission webhooks", "address", r.local, "serverName", r.serverName)
	}
	return errors.Join(r.ensureValidating(ctx, ca), r.ensureMutating(ctx, ca))
}

func (r *registration) ensureValidating(ctx context.Context, ca []byte) error {
	hooks := func(o client.Object) *[]admissionregistrationv1.ValidatingWebhook {
		return &o.(*admissionregistrationv1.ValidatingWebhookConfiguration).Webhooks
	}
	prep := func(w *admissionregistrationv1.ValidatingWebhook) {
		w.ClientConfig.CABundle = ca
		defaultMatching(&w.MatchPolicy, &w.NamespaceSelector, &w.ObjectSelector)
	}
	return ensureConfig(ctx, r, ca, r.validating.DeepCopy(), &admissionregistrationv1.ValidatingWebhookConfiguration{}, hooks, prep)
}

func (r *registration) ensureMutating(ctx context.Context, ca []byte) error {
	hooks := func(o client.Object) *[]admissionregistrationv1.MutatingWebhook {
		return &o.(*admissionregistrationv1.MutatingWebhookConfiguration).Webhooks
	}
	prep := func(w *admissionregistrationv1.MutatingWebhook) {
		w.ClientConfig.CABundle = ca
		defaultMatching(&w.MatchPolicy, &w.NamespaceSelector, &w.ObjectSelector)
	}
	return ensureConfig(ctx, r, ca, r.mutating.DeepCopy(), &admissionregistrationv1.MutatingWebhookConfiguration{}, hooks, prep)
}

// ensureConfig makes live's webhooks equal to want's, after prep (the CA and the API server's defaults) ran on
// each of want's. The two kinds of configuration differ only in their webhook type, which hooks reaches.
// A missing configuration is created: deploy/webhooks ships both, and its RBAC grants update only, so the
// create serves `make run` and the tests, where the controller's credentials may create.
func ensureConfig[W any](ctx context.Context, r *registration, ca []byte, want, live client.Object,
	hooks func(client.Object) *[]W, prep func(*W)) error {
	wanted := hooks(want)
	for i := range *wanted {
		prep(&(*wanted)[i])
	}
	kind := configKind(want)
	err := r.reader.Get(ctx, client.ObjectKeyFromObject(want), live)
	if kerrors.IsNotFound(err) {
		r.log.Info("creating the webhook configuration", "kind", kind, "name", want.GetName())
		return r.writer.Create(ctx, want, client.FieldOwner(fieldOwner))
	}
	if err != nil {
		return err
	}
	registered := hooks(live)
	if equality.Semantic.DeepEqual(*registered, *wanted) && !injectedByCertManager(live) {
		return nil
	}
	*registered = *wanted
	delete(live.GetAnnotations(), annotationInjectCA)
	r.log.Info("registering the admission webhooks", "kind", kind, "name", live.GetName(), "ca", caSubject(ca))
	return r.writer.Update(ctx, live, client.FieldOwner(fieldOwner))
}

func injectedByCertManager(o metav1.Object) bool {
	_, ok := o.GetAnnotations()[annotationInjectCA]
	return ok
}

// defaultMatching sets what the API server defaults in a webhook of either kind, so that a registered
// configuration compares equal to the wanted one and is not written again on every check.
func defaultMatching(policy **admissionregistrationv1.MatchPolicyType, namespaces, objects **metav1.LabelSelector) {
	if *policy == nil {
		*policy = ptr.To(admissionregistrationv1.Equivalent)
	}
	if *namespaces == nil {
		*namespaces = &metav1.LabelSelector{}
	}
	if *objects == nil {
		*objects = &metav1.LabelSelector{}
	}
}

// routeToURL points the configurations at base+path instead of a Service.
func routeToURL(v *admissionregistrationv1.ValidatingWebhookConfiguration, m *admissionregistrationv1.MutatingWebhookConfiguration, base string) {
	to := func(cc *admissionregistrationv1.WebhookClientConfig) {
		u := base + ptr.Deref(cc.Service.Path, "")
		cc.Service, cc.URL = nil, &u
	}
	for i := range v.Webhooks {
		to(&v.Webhooks[i].ClientConfig)
	}
	for i := range m.Webhooks {
		to(&m.Webhooks[i].ClientConfig)
	}
}

// caSubject names the CA for the log (the first certificate's subject), never its bytes.
func caSubject(ca []byte) string {
	rest := bytes.TrimSpace(ca)
	certs, err := parsePEMCerts(rest)
	if err != nil || len(certs) == 0 {
		return ""
	}
	return certs[0].Subject.String() + " until " + certs[0].NotAfter.UTC().Format(time.RFC3339)
}

func certPool(ca []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, errors.New("the CA bundle holds no PEM certificate")
	}
	return pool, nil
}

// deregistration empties the controller's webhook configurations when the controller starts with its webhooks
// off: they would route admission reviews to a server that is not there, and with failurePolicy Fail every
// profile and MachineDeployment write would be refused. It acts once, at start, so replicas that still serve
// during a rollout keep serving until they are replaced; a replica that serves puts the webhooks back within
// its check interval. Without the permission (deploy/webhooks' RBAC) or the configurations, it does nothing.
type deregistration struct {
	reader client.Reader
	writer client.Writer
	log    logr.Logger
}

func (d *deregistration) NeedLeaderElection() bool { return false }

func (d *deregistration) Start(ctx context.Context) error {
	objs := []client.Object{
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhooks.ValidatingConfigName}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhooks.MutatingConfigName}},
	}
	for _, o := range objs {
		if err := d.empty(ctx, o); err != nil {
			d.log.Info("admission webhooks off; could not empty a webhook configuration that routes to this controller: delete it if nothing serves it",
				"kind", configKind(o), "name", o.GetName(), "reason", err.Error())
		}
	}
	return nil
}

func (d *deregistration) empty(ctx context.Context, o client.Object) error {
	if err := d.reader.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
		return client.IgnoreNotFound(err)
	}
	switch c := o.(type) {
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		if len(c.Webhooks) == 0 {
			return nil
		}
		c.Webhooks = nil
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		if len(c.Webhooks) == 0 {
			return nil
		}
		c.Webhooks = nil
	}
	if err := d.writer.Update(ctx, o, client.FieldOwner(fieldOwner)); err != nil {
		return err
	}
	d.log.Info("admission webhooks off: emptied the webhook configuration that routed to this controller", "kind", configKind(o), "name", o.GetName())
	return nil
}

func configKind(o client.Object) string { return reflect.TypeOf(o).Elem().Name() }
