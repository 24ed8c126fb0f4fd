package signature

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/sigstore/sigstore-go/pkg/root"

	"github.com/osmhq/osm/host/oci"
	"github.com/osmhq/osm/host/signature/policy"
	"github.com/osmhq/osm/host/signature/verifyproc"
)

// testRegistry is an in-process OCI registry, with or without the referrers API (without it, referrers live
// in the fallback tag "sha256-<hex>").
func testRegistry(t testing.TB, referrersAPI bool) (string, *oci.Client) {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0)), registry.WithReferrersSupport(referrersAPI)))
	t.Cleanup(srv.Close)
	c, err := oci.NewClient(oci.Options{PlainHTTP: true, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(srv.URL, "http://"), c
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func publicPEM(t testing.TB, k crypto.Signer) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// testCA is a private certificate authority issuing Fulcio-style code-signing certificates.
type testCA struct {
	key  *ecdsa.PrivateKey
	cert *x509.Certificate
}

func newCA(t testing.TB) *testCA {
	t.Helper()
	k := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "osm test CA"},
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, k.Public(), k)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &testCA{key: k, cert: c}
}

var oidIssuerV2 = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 8}

// issue returns a certificate for key naming email, issued by issuer, valid from notBefore to notAfter.
func (ca *testCA) issue(t testing.TB, key crypto.Signer, email, issuer string, notBefore, notAfter time.Time) []byte {
	t.Helper()
	iss, err := asn1.MarshalWithParams(issuer, "utf8")
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), NotBefore: notBefore, NotAfter: notAfter,
		EmailAddresses: []string{email}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
		ExtraExtensions: []pkix.Extension{{Id: oidIssuerV2, Value: iss}}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// trustedRoot is a Sigstore trusted_root.json holding the CA alone: no logs, no timestamp authorities.
func (ca *testCA) trustedRoot(t testing.TB) []byte {
	t.Helper()
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01,
		[]root.CertificateAuthority{&root.FulcioCertificateAuthority{Root: ca.cert, URI: "https://ca.test"}}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tr.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// push puts module in the registry as a plugin artifact and returns it.
func push(t testing.TB, c *oci.Client, ref string, module []byte) *oci.Artifact {
	t.Helper()
	a, err := c.Push(context.Background(), ref, module, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// pull pulls ref as the plugin manager does before it asks a Verifier.
func pull(t testing.TB, c *oci.Client, ref string) *oci.Artifact {
	t.Helper()
	a, err := c.Pull(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// mapGetter serves objects by name ("ConfigMap name" or "Secret name").
func mapGetter(objects map[string]map[string][]byte) Getter {
	return func(r KeyRef) (map[string][]byte, error) {
		name := "ConfigMap " + r.ConfigMap
		if r.Secret != "" {
			name = "Secret " + r.Secret
		}
		d, ok := objects[name]
		if !ok {
			return nil, &missingError{name}
		}
		return d, nil
	}
}

type missingError struct{ name string }

func (e *missingError) Error() string { return e.name + " not found" }

// verifierFor builds the verifier of the first rule of the policy text.
func verifierFor(t testing.TB, policyYAML string, objects map[string]map[string][]byte) *Verifier {
	t.Helper()
	p, err := ParsePolicy([]byte(policyYAML))
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifier("osm-system/plugin-policy", p, p.Rules[0], mapGetter(objects), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// processVerifierFor is verifierFor as the controller has it: the trust of the first rule, checked in a
// verifier process (this test binary, which links this package and so serves as one).
func processVerifierFor(t testing.TB, policyYAML string, objects map[string]map[string][]byte) *verifyproc.Verifier {
	t.Helper()
	p, err := ParsePolicy([]byte(policyYAML))
	if err != nil {
		t.Fatal(err)
	}
	trust, err := policy.NewTrust("osm-system/plugin-policy", p, p.Rules[0], mapGetter(objects))
	if err != nil {
		t.Fatal(err)
	}
	return (&verifyproc.Runner{Log: logr.Discard()}).For(trust)
}
