package app_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/oci"
	"github.com/osmhq/osm/host/signature"
	"github.com/osmhq/osm/host/testenv"
	"github.com/osmhq/osm/sdk/plugintest"
)

// TestSignedPlugins runs the controller under a verification policy that enforces the operator's key for the
// profiles of its namespace: the MachineDeployment whose profile names a signed image renders, the one whose
// profile names an unsigned image gets SignatureMissing naming the image and the policy (and no user-data),
// and the one on a built-in plugin renders without any signature.
func TestSignedPlugins(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	c := env.Client
	ensureNamespace(t, env, userDataNS)
	clusterInfo(t, env)

	signed, unsigned := signedPluginsSetup(t, env)

	opts := app.Options{Builtins: os.DirFS(builtins(t, nil)), DisableDefaultOSPs: true, PluginVerificationPolicy: "plugin-policy"}
	opts.Plugins.Registry.PlainHTTP = true
	opts.Plugins.CacheDir = t.TempDir() // nothing pulled before counts
	startOSM(t, env, nil, opts)

	for name, ref := range map[string]*osmv1alpha1.PluginReference{
		"osp-signed":   {Image: signed.Reference},
		"osp-unsigned": {Image: unsigned.Reference},
		"osp-builtin":  {Builtin: "selective"},
	} {
		osp := testOSP(name, "v1.0.0")
		osp.Spec.Plugin = ref
		if err := c.Create(ctx, osp); err != nil {
			t.Fatal(err)
		}
	}
	for _, md := range []string{"signed", "unsigned", "builtin"} {
		if err := c.Create(ctx, newMD(t, md, "testos", "aws", "osp-"+md)); err != nil {
			t.Fatal(err)
		}
	}

	waitForSecret(t, c, "signed-kube-system-bootstrap-config", "1")
	waitForSecret(t, c, "builtin-kube-system-bootstrap-config", "1")
	cond := waitForNotReady(t, c, "unsigned.kube-system-config", osmv1alpha1.ReasonSignatureMissing, unsigned.Reference, "kube-system/plugin-policy", "operator-signed")
	t.Logf("unsigned: %s", cond.Message)
	waitForEvent(t, c, "unsigned", osmv1alpha1.ReasonSignatureMissing)
	for _, s := range []string{"bootstrap", "provisioning"} {
		if err := c.Get(ctx, client.ObjectKey{Namespace: userDataNS, Name: "unsigned-kube-system-" + s + "-config"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("a %s Secret exists for the MachineDeployment of the unsigned plugin (err=%v)", s, err)
		}
	}
}

// signedPluginsSetup starts a registry holding the selective plugin twice (one signed by the operator's key,
// one unsigned) and installs the operator's key and a policy enforcing it for the controller's namespace.
func signedPluginsSetup(t *testing.T, env *testenv.Env) (signed, unsigned *oci.Artifact) {
	t.Helper()
	ctx := context.Background()
	c := env.Client
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0)), registry.WithReferrersSupport(true)))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	pusher, err := oci.NewClient(oci.Options{PlainHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := os.ReadFile(plugintest.Build(t, filepath.Join("testdata", "plugins", "selective")))
	if err != nil {
		t.Fatal(err)
	}
	signed, err = pusher.Push(ctx, host+"/osm/selective:signed", wasm, map[string]string{"osm.test/build": "signed"})
	if err != nil {
		t.Fatal(err)
	}
	unsigned, err = pusher.Push(ctx, host+"/osm/selective:unsigned", wasm, map[string]string{"osm.test/build": "unsigned"})
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := signature.Sign(ctx, pusher, signed.Reference, signature.Signer{Key: key}); err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Namespace: osmNamespace, Name: "plugin-keys"},
			Data: map[string]string{"operator.pub": string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: osmNamespace, Name: "plugin-policy"}, Data: map[string]string{signature.PolicyKey: `
authorities:
- name: operator
  keys: {configMap: plugin-keys}
rules:
- name: operator-signed
  namespaces: [kube-system]
  authorities: [operator]
`}},
	} {
		if err := c.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}

	return signed, unsigned
}

// TestSignedPluginsAtAdmission: the profile webhook refuses a profile naming an unsigned plugin under enforce,
// naming the policy, and admits one naming a signed plugin.
func TestSignedPluginsAtAdmission(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{WebhookInstallOptions: webhookOptions()})
	ctx := context.Background()
	ensureNamespace(t, env, userDataNS)
	clusterInfo(t, env)
	signed, unsigned := signedPluginsSetup(t, env)
	opts := app.Options{Builtins: os.DirFS(builtins(t, nil)), DisableDefaultOSPs: true, PluginVerificationPolicy: "plugin-policy"}
	opts.Plugins.Registry.PlainHTTP = true
	opts.Plugins.CacheDir = t.TempDir()
	startOSM(t, env, nil, opts)

	refused := testOSP("osp-unsigned", "v1.0.0")
	refused.Spec.Plugin = &osmv1alpha1.PluginReference{Image: unsigned.Reference}
	err := env.Client.Create(ctx, refused)
	if err == nil || !strings.Contains(err.Error(), "kube-system/plugin-policy") || !strings.Contains(err.Error(), "no signature") {
		t.Errorf("creating a profile naming an unsigned plugin: %v, want a refusal naming the policy", err)
	}
	admitted := testOSP("osp-signed", "v1.0.0")
	admitted.Spec.Plugin = &osmv1alpha1.PluginReference{Image: signed.Reference}
	eventually(t, wait, "creating the profile of the signed plugin", func() error { return env.Client.Create(ctx, admitted) })
}
