package plugin

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/prometheus/client_golang/prometheus/testutil"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/oci"
	"github.com/osmhq/osm/host/signature"
)

// A module the verification policy refuses is never sent to a plugin host nor compiled; a signed one runs;
// and a module loaded for a reference nobody verifies is not served to one whose policy refuses it.
func TestVerificationBeforeLoad(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0)), registry.WithReferrersSupport(true)))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ctx := WaitForPulls(context.Background())
	pusher, err := oci.NewClient(oci.Options{PlainHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	wasm := testPlugin(t, "healthy")
	unsigned, err := pusher.Push(ctx, host+"/osm/healthy:unsigned", wasm, map[string]string{"n": "1"})
	if err != nil {
		t.Fatal(err)
	}
	signed, err := pusher.Push(ctx, host+"/osm/healthy:signed", wasm, map[string]string{"n": "2"})
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
	verifier := enforceKey(t, key)

	// Refused: no plugin host started, nothing compiled or loaded.
	m, _, _ := newManager(t, Config{CacheDir: t.TempDir(), Registry: RegistryConfig{PlainHTTP: true}}, nil)
	_, err = m.Resolve(ctx, Reference{Image: unsigned.Reference, Verify: verifier})
	serr, ok := errors.AsType[*signature.Error](err)
	if !ok || serr.Reason != osmv1alpha1.ReasonSignatureMissing {
		t.Fatalf("Resolve(unsigned) = %v, want SignatureMissing", err)
	}
	if pids := m.HostPIDs(); len(pids) != 0 {
		t.Errorf("a plugin host was started for a refused module: %v", pids)
	}
	if n := testutil.CollectAndCount(m.metrics.compile); n != 0 {
		t.Errorf("%d compilations for a refused module", n)
	}
	if got := m.Loaded(); got != 0 {
		t.Errorf("%v modules loaded after a refusal", got)
	}
	if got := testutil.ToFloat64(m.metrics.failures.WithLabelValues(host+"/osm/healthy", "SignatureRefused")); got != 1 {
		t.Errorf("SignatureRefused failures = %v, want 1", got)
	}

	// Signed by the trusted key: it runs.
	p, err := m.Resolve(ctx, Reference{Image: signed.Reference, Verify: verifier})
	if err != nil {
		t.Fatalf("Resolve(signed) = %v", err)
	}
	if _, err := p.Render(ctx, renderRequest()); err != nil {
		t.Fatal(err)
	}

	// The unsigned image loaded for a namespace no rule covers is still refused to one under enforce.
	other, _, _ := newManager(t, Config{CacheDir: t.TempDir(), Registry: RegistryConfig{PlainHTTP: true}}, nil)
	if _, err := other.Resolve(ctx, Reference{Image: unsigned.Reference}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Resolve(ctx, Reference{Image: unsigned.Reference, Verify: verifier}); !isRefusal(err) {
		t.Errorf("Resolve(unsigned, enforce) after an unverified load = %v, want a refusal", err)
	}
}

func isRefusal(err error) bool { _, ok := errors.AsType[*signature.Error](err); return ok }

// enforceKey is the verifier of a policy that trusts key alone, in enforce mode.
func enforceKey(t *testing.T, key *ecdsa.PrivateKey) *signature.Verifier {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	p, err := signature.ParsePolicy([]byte("authorities: [{name: operator, keys: {configMap: keys}}]\nrules: [{authorities: [operator]}]"))
	if err != nil {
		t.Fatal(err)
	}
	pub := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	v, err := signature.NewVerifier("test/policy", p, p.Rules[0], func(signature.KeyRef) (map[string][]byte, error) {
		return map[string][]byte{"k": pub}, nil
	}, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	return v
}
