package app_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/testenv"
	"github.com/osmhq/osm/host/webhooks"
)

// TestWebhooksWithoutCertManager turns the webhooks on as deploy/webhooks does, on a cluster without
// cert-manager, with the controller acting as deploy/'s ServiceAccount under deploy/'s and the component's RBAC:
// while it starts, every profile and MachineDeployment write is admitted (nothing is registered before the
// controller serves); then the webhooks do validate and default, with the controller's own CA; then a serving
// certificate near its expiry, and a CA near its expiry, are replaced, and admission keeps working.
func TestWebhooksWithoutCertManager(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	c := env.Client
	installDeployed(t, env, deployWithWebhooksDocs(t, "webhooks"))
	clusterInfo(t, env)
	if err := c.Create(ctx, testOSP("osp-testos", "v1.0.0")); err != nil {
		t.Fatal(err)
	}
	md := newMD(t, "during-start", "testos", "aws", "osp-testos")
	if err := c.Create(ctx, md); err != nil {
		t.Fatal(err)
	}

	port := freeTCPPort(t)
	url := "https://localhost:" + strconv.Itoa(port)
	stop := startServingOSM(t, asDeployServiceAccount(env), app.Options{Builtins: os.DirFS(builtins(t, nil)), DisableDefaultOSPs: true},
		webhook.Options{Host: "127.0.0.1", Port: port, CertDir: t.TempDir()},
		app.WebhookServing{Certs: app.WebhookCertsSelf, URL: url, CheckInterval: 200 * time.Millisecond})

	// Writes of both kinds the webhooks intercept, from the controller's start until its webhooks are
	// registered: none is refused.
	writes := 0
	var refused []error
	eventually(t, wait, "the webhooks registered", func() error {
		writes++
		if err := touch(ctx, c, &clusterv1alpha1.MachineDeployment{}, client.ObjectKeyFromObject(md), writes); err != nil {
			refused = append(refused, err)
		}
		if err := touch(ctx, c, &osmv1alpha1.OperatingSystemProfile{}, client.ObjectKey{Namespace: osmNamespace, Name: "osp-testos"}, writes); err != nil {
			refused = append(refused, err)
		}
		return registered(ctx, c)
	})
	if len(refused) > 0 {
		t.Fatalf("%d of %d writes refused while the controller started: %v", len(refused), 2*writes, refused)
	}
	t.Logf("%d profile and %d MachineDeployment writes admitted while the controller started", writes, writes)

	secret := certSecret(t, c)
	checkRegistered(t, c, url, secret.Data["ca.crt"])
	checkServed(t, port, secret)
	checkAdmission(t, c, "self-signed")

	t.Run("serving certificate near expiry", func(t *testing.T) {
		ca, caKey := parseCA(t, secret)
		cert, key := issue(t, ca, caKey, "localhost", time.Hour)
		secret.Data["tls.crt"], secret.Data["tls.key"] = cert, key
		if err := c.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
		renewed := waitRenewed(t, c, "tls.crt", cert)
		if !bytes.Equal(renewed.Data["ca.crt"], secret.Data["ca.crt"]) {
			t.Error("the CA changed although it was far from expiry")
		}
		checkServed(t, port, renewed)
		checkRegistered(t, c, url, renewed.Data["ca.crt"])
		checkAdmission(t, c, "after the certificate's renewal")
		secret = renewed
	})
	t.Run("CA near expiry", func(t *testing.T) {
		ca, caKey, caPEM, caKeyPEM := newCA(t, time.Hour)
		cert, key := issue(t, ca, caKey, "localhost", time.Hour)
		secret.Data["ca.crt"], secret.Data["ca.key"], secret.Data["tls.crt"], secret.Data["tls.key"] = caPEM, caKeyPEM, cert, key
		if err := c.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
		renewed := waitRenewed(t, c, "ca.crt", caPEM)
		eventually(t, wait, "the new CA registered", func() error { return registeredWith(ctx, c, renewed.Data["ca.crt"]) })
		checkServed(t, port, certSecret(t, c))
		checkAdmission(t, c, "after the CA's renewal")
	})
	t.Run("turned off", func(t *testing.T) {
		// The component removed: its objects stay (kubectl apply prunes nothing), the controller restarts with
		// its webhooks off. Stopped, nothing serves the registered webhooks: writes are refused.
		stop()
		key := client.ObjectKey{Namespace: osmNamespace, Name: "osp-testos"}
		if err := touch(ctx, c, &osmv1alpha1.OperatingSystemProfile{}, key, -1); err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
			t.Fatalf("with no controller serving the registered webhooks, a profile write got %v; the test would show nothing", err)
		}
		startServingOSM(t, asDeployServiceAccount(env), app.Options{Builtins: os.DirFS(builtins(t, nil)), DisableDefaultOSPs: true},
			webhook.Options{}, app.WebhookServing{})
		eventually(t, wait, "the webhook configurations emptied", func() error {
			if err := registered(ctx, c); err == nil {
				return errors.New("still registered")
			}
			return nil
		})
		if err := touch(ctx, c, &osmv1alpha1.OperatingSystemProfile{}, key, -2); err != nil {
			t.Errorf("a profile write with the webhooks off: %v", err)
		}
		if err := touch(ctx, c, &clusterv1alpha1.MachineDeployment{}, client.ObjectKeyFromObject(md), -2); err != nil {
			t.Errorf("a MachineDeployment write with the webhooks off: %v", err)
		}
	})
}

// TestWebhooksWaitForCertManager is deploy/webhooks with webhooks/cert-manager on a cluster without
// cert-manager: the Certificate cannot be created, nothing is mounted. The controller does not exit: it
// reconciles, registers no webhook and refuses no write, until the certificate appears in its directory (as
// the kubelet would mount cert-manager's Secret); then it registers the webhooks with that certificate's CA.
func TestWebhooksWaitForCertManager(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	c := env.Client
	installDeployed(t, env, deployWithWebhooksDocs(t, "webhooks", "webhooks/cert-manager"))
	clusterInfo(t, env)
	if err := c.Create(ctx, testOSP("osp-testos", "v1.0.0")); err != nil {
		t.Fatal(err)
	}
	port := freeTCPPort(t)
	url := "https://localhost:" + strconv.Itoa(port)
	certDir := t.TempDir()
	probes := testenv.FreeAddress(t)
	startServingOSM(t, asDeployServiceAccount(env), app.Options{Builtins: os.DirFS(builtins(t, nil)), DisableDefaultOSPs: true, HealthProbeAddress: probes},
		webhook.Options{Host: "127.0.0.1", Port: port, CertDir: certDir},
		app.WebhookServing{Certs: app.WebhookCertsDir, URL: url, CheckInterval: 200 * time.Millisecond})

	md := newMD(t, "without-cert", "testos", "aws", "osp-testos")
	if err := c.Create(ctx, md); err != nil {
		t.Fatal(err)
	}
	// Rendered: the controller runs without its certificate.
	waitForSecret(t, c, "without-cert-kube-system-provisioning-config", "1")
	if err := registered(ctx, c); err == nil {
		t.Fatal("webhooks registered without a certificate")
	}
	bad := brokenOSP("osp-broken-admitted")
	if err := c.Create(ctx, bad); err != nil {
		t.Fatalf("a profile write refused while no webhook is registered: %v", err)
	}
	// Not ready: a Service would route nothing to this replica.
	if err := ready(probes); err == nil || !strings.Contains(err.Error(), "[-]webhooks failed") {
		t.Errorf("readiness without a certificate: %v, want the webhooks check failing", err)
	}

	ca, caKey, caPEM, _ := newCA(t, 24*time.Hour)
	cert, key := issue(t, ca, caKey, "localhost", 24*time.Hour)
	// As the kubelet updates a Secret volume: the files appear.
	for name, data := range map[string][]byte{"ca.crt": caPEM, "tls.key": key, "tls.crt": cert} {
		if err := os.WriteFile(filepath.Join(certDir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, wait, "the webhooks registered with cert-manager's CA", func() error { return registeredWith(ctx, c, caPEM) })
	eventually(t, wait, "ready once serving", func() error { return ready(probes) })
	checkRegistered(t, c, url, caPEM)
	checkAdmission(t, c, "cert-manager's certificate")
}

// installDeployed creates what kubectl apply of objs creates on a cluster without cert-manager: the kinds the
// API server knows (CRDs are testenv's).
func installDeployed(t *testing.T, env *testenv.Env, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Secret", "Service",
			"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
			if o.GetNamespace() != "" {
				ensureNamespace(t, env, o.GetNamespace())
			}
			if err := env.Client.Create(context.Background(), o); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
			}
		}
	}
}

// asDeployServiceAccount acts as deploy/'s ServiceAccount, with exactly the RBAC installed.
func asDeployServiceAccount(env *testenv.Env) *testenv.Env {
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:kube-system:operating-system-manager"}
	return &testenv.Env{Config: cfg, Client: env.Client, Webhook: env.Webhook}
}

// startServingOSM runs the controller as startOSM does, with its webhook server on hook and serving as given,
// and returns a function that stops it (also called when the test ends).
func startServingOSM(t *testing.T, env *testenv.Env, opts app.Options, hook webhook.Options, serving app.WebhookServing) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	opts.Mgmt = env.Config
	fillDefaults(t, env, &opts)
	opts.Webhook, opts.WebhookServing = hook, serving
	mgr, err := app.New(ctx, opts)
	if err != nil {
		cancel()
		t.Fatalf("building the controller: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("controller stopped with: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("controller still stopping after 30s")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// touch writes an annotation on the object: an update the webhooks intercept.
func touch(ctx context.Context, c client.Client, obj client.Object, key client.ObjectKey, n int) error {
	if err := c.Get(ctx, key, obj); err != nil {
		return err
	}
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann["osm.test/touched"] = strconv.Itoa(n)
	obj.SetAnnotations(ann)
	return c.Patch(ctx, obj, patch)
}

// registered reports whether both configurations hold the controller's webhooks.
func registered(ctx context.Context, c client.Client) error {
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: webhooks.ValidatingConfigName}, v); err != nil {
		return err
	}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: webhooks.MutatingConfigName}, m); err != nil {
		return err
	}
	if len(v.Webhooks) == 0 || len(m.Webhooks) == 0 {
		return fmt.Errorf("%d validating and %d mutating webhooks registered", len(v.Webhooks), len(m.Webhooks))
	}
	return nil
}

// registeredWith reports whether every registered webhook carries ca.
func registeredWith(ctx context.Context, c client.Client, ca []byte) error {
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: webhooks.ValidatingConfigName}, v); err != nil {
		return err
	}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: webhooks.MutatingConfigName}, m); err != nil {
		return err
	}
	var bundles [][]byte
	for _, w := range v.Webhooks {
		bundles = append(bundles, w.ClientConfig.CABundle)
	}
	for _, w := range m.Webhooks {
		bundles = append(bundles, w.ClientConfig.CABundle)
	}
	if len(bundles) == 0 {
		return errors.New("no webhook registered")
	}
	for _, b := range bundles {
		if !bytes.Equal(b, ca) {
			return errors.New("a webhook does not carry the CA")
		}
	}
	return nil
}

// checkRegistered compares the registered webhooks with host/webhooks.Configurations routed to url.
func checkRegistered(t *testing.T, c client.Client, url string, ca []byte) {
	t.Helper()
	if err := registeredWith(context.Background(), c, ca); err != nil {
		t.Fatal(err)
	}
	wantV, wantM := webhooks.Configurations(osmNamespace, app.DefaultWebhookService)
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: webhooks.ValidatingConfigName}, v); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Name: webhooks.MutatingConfigName}, m); err != nil {
		t.Fatal(err)
	}
	if len(v.Webhooks) != len(wantV.Webhooks) || len(m.Webhooks) != len(wantM.Webhooks) {
		t.Fatalf("registered %d validating and %d mutating webhooks, want %d and %d", len(v.Webhooks), len(m.Webhooks), len(wantV.Webhooks), len(wantM.Webhooks))
	}
	for i, w := range v.Webhooks {
		want := wantV.Webhooks[i]
		if w.Name != want.Name || ptr.Deref(w.ClientConfig.URL, "") != url+*want.ClientConfig.Service.Path || *w.FailurePolicy != *want.FailurePolicy {
			t.Errorf("validating webhook %d: %s %v %s, want %s %s%s %s", i, w.Name, ptr.Deref(w.ClientConfig.URL, ""), *w.FailurePolicy,
				want.Name, url, *want.ClientConfig.Service.Path, *want.FailurePolicy)
		}
	}
	if w, want := m.Webhooks[0], wantM.Webhooks[0]; w.Name != want.Name || ptr.Deref(w.ClientConfig.URL, "") != url+*want.ClientConfig.Service.Path {
		t.Errorf("mutating webhook: %s %v, want %s %s%s", w.Name, ptr.Deref(w.ClientConfig.URL, ""), want.Name, url, *want.ClientConfig.Service.Path)
	}
}

// checkServed dials the webhook server as the API server does and checks it serves the Secret's certificate.
func checkServed(t *testing.T, port int, secret *corev1.Secret) {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(secret.Data["ca.crt"]) {
		t.Fatal("the Secret's ca.crt holds no certificate")
	}
	want, _ := pem.Decode(secret.Data["tls.crt"])
	eventually(t, wait, "the Secret's certificate served", func() error {
		conn, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), &tls.Config{ServerName: "localhost", RootCAs: pool, MinVersion: tls.VersionTLS12})
		if err != nil {
			return err
		}
		defer conn.Close()
		if got := conn.ConnectionState().PeerCertificates[0].Raw; !bytes.Equal(got, want.Bytes) {
			return errors.New("the server serves another certificate than the Secret's")
		}
		return nil
	})
}

// checkAdmission: a broken profile is refused, a MachineDeployment without a profile is defaulted.
func checkAdmission(t *testing.T, c client.Client, when string) {
	t.Helper()
	ctx := context.Background()
	var err error
	eventually(t, wait, "a broken profile refused ("+when+")", func() error {
		bad := brokenOSP("osp-broken")
		err = c.Create(ctx, bad)
		if apierrors.IsInvalid(err) {
			return nil
		}
		if err == nil {
			_ = c.Delete(ctx, bad)
		}
		return fmt.Errorf("got %w", err)
	})
	if !strings.Contains(err.Error(), "spec.provisioningConfig.files[0].content.inline.data") {
		t.Errorf("%s: the refusal does not name the field: %v", when, err)
	}
	md := newMD(t, "defaulted-"+strconv.FormatInt(time.Now().UnixNano(), 36), "flatcar", "aws", "")
	if err := c.Create(ctx, md); err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	if got := md.Annotations[clusterv1alpha1.AnnotationOSP]; got != "osp-flatcar" {
		t.Errorf("%s: a MachineDeployment without a profile got %q, want osp-flatcar from the mutating webhook", when, got)
	}
	if err := c.Delete(ctx, md); err != nil {
		t.Error(err)
	}
}

func brokenOSP(name string) *osmv1alpha1.OperatingSystemProfile {
	bad := testOSP(name, "v1.0.0")
	bad.Spec.Plugin = nil
	bad.Spec.ProvisioningConfig.Files[0].Content.Inline.Data = "{{ .NoSuchField }}"
	return bad
}

func certSecret(t *testing.T, c client.Client) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: osmNamespace, Name: app.DefaultWebhookCertSecret}, s); err != nil {
		t.Fatal(err)
	}
	return s
}

// waitRenewed waits until the Secret's key holds a certificate other than old, valid for longer than a
// renewal's look-ahead, and returns the Secret.
func waitRenewed(t *testing.T, c client.Client, key string, old []byte) *corev1.Secret {
	t.Helper()
	var s *corev1.Secret
	eventually(t, wait, key+" renewed", func() error {
		s = &corev1.Secret{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: osmNamespace, Name: app.DefaultWebhookCertSecret}, s); err != nil {
			return err
		}
		if bytes.Equal(s.Data[key], old) {
			return errors.New("not replaced yet")
		}
		b, _ := pem.Decode(s.Data[key])
		if b == nil {
			return fmt.Errorf("%s holds no PEM", key)
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return err
		}
		if time.Until(cert.NotAfter) < 180*24*time.Hour {
			return fmt.Errorf("the new %s expires at %s", key, cert.NotAfter)
		}
		return nil
	})
	return s
}

func parseCA(t *testing.T, s *corev1.Secret) (*x509.Certificate, *rsa.PrivateKey) {
	t.Helper()
	cb, _ := pem.Decode(s.Data["ca.crt"])
	kb, _ := pem.Decode(s.Data["ca.key"])
	if cb == nil || kb == nil {
		t.Fatal("the Secret holds no CA")
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	key, err := x509.ParsePKCS1PrivateKey(kb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return ca, key
}

func newCA(t *testing.T, validFor time.Duration) (*x509.Certificate, *rsa.PrivateKey, []byte, []byte) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "test webhook CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(validFor), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return ca, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
}

// issue returns a serving certificate for dnsName signed by ca, and its key, in PEM.
func issue(t *testing.T, ca *x509.Certificate, caKey *rsa.PrivateKey, dnsName string, validFor time.Duration) ([]byte, []byte) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: dnsName}, DNSNames: []string{dnsName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(validFor),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
}
