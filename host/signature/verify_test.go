package signature

import (
	"bytes"
	"cmp"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-containerregistry/pkg/registry"
	notationsig "github.com/notaryproject/notation-core-go/signature"
	"github.com/notaryproject/notation-core-go/signature/jws"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/oci"
)

const keysPolicy = `
authorities:
- name: operator
  keys: {configMap: plugin-keys}
rules:
- name: tenants
  namespaces: ["tenant-*"]
  authorities: [operator]
`

const keylessPolicy = `
authorities:
- name: vendor
  keyless:
    trustedRoot: {configMap: vendor-root, key: trusted_root.json}
    issuer: https://issuer.test
    subject: plugins@vendor.test
rules:
- authorities: [vendor]
`

const notationPolicy = `
authorities:
- name: vendor-notary
  notation:
    trustStore: {configMap: notation-ca}
    trustedIdentities: ["*"]
rules:
- authorities: [vendor-notary]
`

// notationEnvelope is a JWS Notation signature of target made at signingTime.
func notationEnvelope(t *testing.T, key crypto.Signer, chain []*x509.Certificate, target ocispec.Descriptor, signingTime time.Time) []byte {
	t.Helper()
	payload, err := json.Marshal(map[string]any{"targetArtifact": target})
	if err != nil {
		t.Fatal(err)
	}
	signer, err := notationsig.NewLocalSigner(chain, key)
	if err != nil {
		t.Fatal(err)
	}
	env, err := notationsig.NewEnvelope(jws.MediaTypeEnvelope)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := env.Sign(&notationsig.SignRequest{Payload: notationsig.Payload{ContentType: "application/vnd.cncf.notary.payload.v1+json", Content: payload},
		Signer: signer, SigningTime: signingTime, SigningScheme: notationsig.SigningSchemeX509, SigningAgent: "osm-test"})
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

func certPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// Each case builds an artifact in the registry, maybe signs or forges a signature, and says what the
// operator's policy must make of it.
// verifyCase is one artifact, the policy it is verified under, and the verdict.
type verifyCase struct {
	name        string
	referrers   bool // the registry serves the referrers API
	policy      string
	objects     map[string]map[string][]byte
	setup       func(t *testing.T, host string, c *oci.Client) *oci.Artifact
	wantReason  string // "" = verified
	wantMessage string
}

// TestVerify runs each case twice: in this process (Verifier, as osmctl verifies) and as the controller does,
// through a verifier process (verifyproc: this test binary serves as the verifier). Both give the same verdict.
func TestVerify(t *testing.T) {
	ctx := context.Background()
	trustedKey, otherKey := newKey(t), newKey(t)
	ca, otherCA := newCA(t), newCA(t)
	keys := map[string]map[string][]byte{"ConfigMap plugin-keys": {"operator.pub": publicPEM(t, trustedKey)}}
	roots := map[string]map[string][]byte{"ConfigMap vendor-root": {"trusted_root.json": ca.trustedRoot(t)}}
	notationRoots := map[string]map[string][]byte{"ConfigMap notation-ca": {"ca.pem": certPEM(ca.cert.Raw)}}
	module := []byte("\x00asm\x01\x00\x00\x00 a plugin module")
	now := time.Now()
	valid := [2]time.Time{now.Add(-time.Hour), now.Add(time.Hour)}
	expired := [2]time.Time{now.Add(-48 * time.Hour), now.Add(-24 * time.Hour)}

	// signedBy pushes the module and signs it with the key signer returns (a bundle).
	signedBy := func(signer func(t *testing.T) Signer) func(t *testing.T, host string, c *oci.Client) *oci.Artifact {
		return func(t *testing.T, host string, c *oci.Client) *oci.Artifact {
			a := push(t, c, host+"/osm/myos:1.0", module)
			mustSign(t, c, a.Reference, signer(t))
			return pull(t, c, a.Reference)
		}
	}
	byKey := func(k *ecdsa.PrivateKey) func(t *testing.T, host string, c *oci.Client) *oci.Artifact {
		return signedBy(func(*testing.T) Signer { return Signer{Key: k} })
	}
	// byCertificate signs with a fresh key and a certificate issuer gave it for email, valid in period.
	byCertificate := func(issuer *testCA, email string, period [2]time.Time) func(t *testing.T, host string, c *oci.Client) *oci.Artifact {
		return signedBy(func(t *testing.T) Signer {
			k := newKey(t)
			return Signer{Key: k, Certificate: issuer.issue(t, k, email, "https://issuer.test", period[0], period[1])}
		})
	}
	notationSigned := func(issuer *testCA, period [2]time.Time) func(t *testing.T, host string, c *oci.Client) *oci.Artifact {
		return func(t *testing.T, host string, c *oci.Client) *oci.Artifact {
			k := newKey(t)
			leaf, err := x509.ParseCertificate(issuer.issue(t, k, "release@vendor.test", "https://issuer.test", period[0], period[1]))
			if err != nil {
				t.Fatal(err)
			}
			a := push(t, c, host+"/osm/myos:1.0", module)
			if _, err := SignNotation(ctx, c, a.Reference, k, []*x509.Certificate{leaf, issuer.cert}); err != nil {
				t.Fatal(err)
			}
			return pull(t, c, a.Reference)
		}
	}
	legacy := func(signer *ecdsa.PrivateKey, moved bool) func(t *testing.T, host string, c *oci.Client) *oci.Artifact {
		return func(t *testing.T, host string, c *oci.Client) *oci.Artifact {
			a := push(t, c, host+"/osm/myos:1.0", module)
			target := a
			if moved {
				target = push(t, c, host+"/osm/myos:2.0", append(bytes.Clone(module), '!'))
			}
			legacySign(t, c, host+"/osm/myos", signer, a.ManifestDigest, target.ManifestDigest)
			return pull(t, c, target.Reference)
		}
	}

	tests := []verifyCase{
		{name: "signed by the trusted key", referrers: true, policy: keysPolicy, objects: keys, setup: byKey(trustedKey)},
		{name: "signed by the trusted key, registry without the referrers API", policy: keysPolicy, objects: keys, setup: byKey(trustedKey)},
		{
			name: "unsigned", referrers: true, policy: keysPolicy, objects: keys,
			setup: func(t *testing.T, host string, c *oci.Client) *oci.Artifact {
				return pull(t, c, push(t, c, host+"/osm/myos:1.0", module).Reference)
			},
			wantReason: osmv1alpha1.ReasonSignatureMissing, wantMessage: "holds no signature",
		},
		{name: "signed by an untrusted key", referrers: true, policy: keysPolicy, objects: keys, setup: byKey(otherKey),
			wantReason: osmv1alpha1.ReasonSignatureInvalid, wantMessage: "operator: failed to verify signature"},
		{
			name: "a trusted signature of another digest attached to this one", referrers: true, policy: keysPolicy, objects: keys,
			setup: func(t *testing.T, host string, c *oci.Client) *oci.Artifact {
				a := push(t, c, host+"/osm/myos:1.0", module)
				other := push(t, c, host+"/osm/myos:2.0", append(bytes.Clone(module), '!'))
				b, err := (Signer{Key: trustedKey}).Bundle(host+"/osm/myos", other.ManifestDigest)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := c.Attach(ctx, a.Reference, BundleMediaType, BundleMediaType, b, nil); err != nil {
					t.Fatal(err)
				}
				return pull(t, c, a.Reference)
			},
			wantReason: osmv1alpha1.ReasonSignatureInvalid, wantMessage: "artifact digest",
		},
		{
			name: "a trusted signature moved to another artifact's referrers tag", policy: keysPolicy, objects: keys,
			setup: func(t *testing.T, host string, c *oci.Client) *oci.Artifact {
				signed := push(t, c, host+"/osm/myos:1.0", module)
				mustSign(t, c, signed.Reference, Signer{Key: trustedKey})
				victim := push(t, c, host+"/osm/myos:2.0", append(bytes.Clone(module), '!'))
				// The fallback tag of the signed artifact lists its signature; the attacker tags that list as
				// the victim's.
				repo := host + "/osm/myos"
				index, desc, err := c.FetchManifest(ctx, repo+":sha256-"+signed.ManifestDigest.Encoded())
				if err != nil {
					t.Fatal(err)
				}
				if _, err := c.PushManifest(ctx, repo+":sha256-"+victim.ManifestDigest.Encoded(), desc.MediaType, index); err != nil {
					t.Fatal(err)
				}
				return pull(t, c, victim.Reference)
			},
			wantReason: osmv1alpha1.ReasonSignatureInvalid, wantMessage: "not attached to this artifact",
		},
		{
			name: "a tampered layer under a copy of the original signature", referrers: true, policy: keysPolicy, objects: keys,
			setup: func(t *testing.T, host string, c *oci.Client) *oci.Artifact {
				orig := push(t, c, host+"/osm/myos:1.0", module)
				mustSign(t, c, orig.Reference, Signer{Key: trustedKey})
				tampered := bytes.Clone(module)
				tampered[len(tampered)-1] ^= 0xff
				forged := push(t, c, host+"/osm/myos:1.0", tampered) // the tag moves to the tampered module
				copySignatures(t, c, orig, forged)
				return pull(t, c, forged.Reference)
			},
			wantReason: osmv1alpha1.ReasonSignatureInvalid, wantMessage: "artifact digest",
		},
		{name: "certificate under the trusted root naming the identity", referrers: true, policy: keylessPolicy, objects: roots,
			setup: byCertificate(ca, "plugins@vendor.test", valid)},
		{name: "expired certificate", referrers: true, policy: keylessPolicy, objects: roots,
			setup: byCertificate(ca, "plugins@vendor.test", expired), wantReason: osmv1alpha1.ReasonSignatureInvalid, wantMessage: "expired"},
		{name: "certificate naming another identity", referrers: true, policy: keylessPolicy, objects: roots,
			setup: byCertificate(ca, "mallory@vendor.test", valid), wantReason: osmv1alpha1.ReasonSignatureInvalid, wantMessage: "identity"},
		{name: "certificate of another CA", referrers: true, policy: keylessPolicy, objects: roots,
			setup: byCertificate(otherCA, "plugins@vendor.test", valid), wantReason: osmv1alpha1.ReasonSignatureInvalid, wantMessage: "certificate"},
		{name: "a key signature where the authority is a certificate root", referrers: true, policy: keylessPolicy, objects: roots,
			setup: byKey(trustedKey), wantReason: osmv1alpha1.ReasonSignatureInvalid, wantMessage: "vendor:"},
		{name: "Notation signature chaining to the trust store", policy: notationPolicy, objects: notationRoots,
			setup: notationSigned(ca, valid)},
		{name: "Notation signature, registry with the referrers API", referrers: true, policy: notationPolicy, objects: notationRoots,
			setup: notationSigned(ca, valid)},
		{name: "Notation signature of another CA", policy: notationPolicy, objects: notationRoots,
			setup: notationSigned(otherCA, valid), wantReason: osmv1alpha1.ReasonSignatureInvalid, wantMessage: "does not contain any trusted certificate"},
		{
			// notation refuses to sign with an expired certificate, so the envelope is made as it was while
			// the certificate was valid.
			name: "Notation signature with an expired certificate", policy: notationPolicy, objects: notationRoots,
			setup: func(t *testing.T, host string, c *oci.Client) *oci.Artifact {
				k := newKey(t)
				leaf, err := x509.ParseCertificate(ca.issue(t, k, "release@vendor.test", "https://issuer.test", expired[0], expired[1]))
				if err != nil {
					t.Fatal(err)
				}
				a := pull(t, c, push(t, c, host+"/osm/myos:1.0", module).Reference)
				_, target, err := c.FetchManifest(ctx, a.Reference)
				if err != nil {
					t.Fatal(err)
				}
				env := notationEnvelope(t, k, []*x509.Certificate{leaf, ca.cert}, target, now.Add(-36*time.Hour))
				if _, err := c.Attach(ctx, a.Reference, NotationArtifactType, jws.MediaTypeEnvelope, env, nil); err != nil {
					t.Fatal(err)
				}
				return a
			},
			wantReason: osmv1alpha1.ReasonSignatureInvalid, wantMessage: "expired",
		},
		{
			name: "a trusted Notation signature of another digest attached to this one", policy: notationPolicy, objects: notationRoots,
			setup: func(t *testing.T, host string, c *oci.Client) *oci.Artifact {
				signed := notationSigned(ca, valid)(t, host, c)
				victim := push(t, c, host+"/osm/myos:2.0", append(bytes.Clone(module), '!'))
				copySignatures(t, c, signed, victim)
				return pull(t, c, victim.Reference)
			},
			wantReason: osmv1alpha1.ReasonSignatureInvalid, wantMessage: "content descriptor mismatch",
		},
		{name: "a Sigstore signature where the rule trusts a Notation store only", policy: notationPolicy, objects: notationRoots,
			setup: byKey(trustedKey), wantReason: osmv1alpha1.ReasonSignatureInvalid, wantMessage: "no authority of the rule verifies Sigstore signatures"},
		{name: "cosign key signature under the .sig tag", policy: keysPolicy, objects: keys, setup: legacy(trustedKey, false)},
		{name: "cosign .sig signature by an untrusted key", policy: keysPolicy, objects: keys, setup: legacy(otherKey, false),
			wantReason: osmv1alpha1.ReasonSignatureInvalid, wantMessage: "operator: no key verifies it"},
		{name: "cosign .sig signature of another artifact moved to this one's tag", policy: keysPolicy, objects: keys, setup: legacy(trustedKey, true),
			wantReason: osmv1alpha1.ReasonSignatureInvalid, wantMessage: "not this artifact"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host, c := testRegistry(t, tt.referrers)
			art := tt.setup(t, host, c)
			for _, via := range []struct {
				name string
				v    interface {
					Verify(context.Context, *oci.Client, *oci.Artifact) error
				}
			}{{"in process", verifierFor(t, tt.policy, tt.objects)}, {"verifier process", processVerifierFor(t, tt.policy, tt.objects)}} {
				checkVerdict(t, via.name, via.v.Verify(ctx, c, art), tt, art)
			}
		})
	}
}

// checkVerdict compares what Verify returned with the case's verdict.
func checkVerdict(t *testing.T, via string, err error, tt verifyCase, art *oci.Artifact) {
	t.Helper()
	if tt.wantReason == "" {
		if err != nil {
			t.Errorf("%s: Verify() = %v, want verified", via, err)
		}
		return
	}
	serr, ok := errors.AsType[*Error](err)
	if !ok {
		t.Errorf("%s: Verify() = %v, want a refusal %s", via, err, tt.wantReason)
		return
	}
	t.Logf("%s: %s", via, err)
	if serr.Reason != tt.wantReason || !strings.Contains(err.Error(), tt.wantMessage) {
		t.Errorf("%s: Verify() = %s: %v, want %s mentioning %q", via, serr.Reason, err, tt.wantReason, tt.wantMessage)
	}
	for _, want := range []string{art.Reference, "osm-system/plugin-policy"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: refusal %q does not name %s", via, err, want)
		}
	}
}

func mustSign(t *testing.T, c *oci.Client, ref string, s Signer) {
	t.Helper()
	if _, _, err := Sign(context.Background(), c, ref, s); err != nil {
		t.Fatal(err)
	}
}

// copySignatures attaches every signature bundle of from to to, unchanged: what a registry attacker can do.
func copySignatures(t *testing.T, c *oci.Client, from, to *oci.Artifact) {
	t.Helper()
	ctx := context.Background()
	descs, err := c.Referrers(ctx, from.Reference, "")
	if err != nil || len(descs) == 0 {
		t.Fatalf("referrers of %s: %v %v", from.Reference, descs, err)
	}
	for _, d := range descs {
		att, err := c.FetchAttachment(ctx, from.Reference, d)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Attach(ctx, to.Reference, cmp.Or(att.Manifest.ArtifactType, att.Manifest.Config.MediaType), att.LayerMediaType, att.Layer, nil); err != nil {
			t.Fatal(err)
		}
	}
}

func TestWarnModeLoadsAndLogs(t *testing.T) {
	host, c := testRegistry(t, true)
	art := pull(t, c, push(t, c, host+"/osm/myos:1.0", []byte("module")).Reference)
	p, err := ParsePolicy([]byte(strings.Replace(keysPolicy, "authorities: [operator]\n", "authorities: [operator]\n  mode: warn\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	var logged []string
	log := funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{})
	v, err := NewVerifier("osm-system/plugin-policy", p, p.Rules[0],
		mapGetter(map[string]map[string][]byte{"ConfigMap plugin-keys": {"k": publicPEM(t, newKey(t))}}), log)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(context.Background(), c, art); err != nil {
		t.Fatalf("warn mode refused: %v", err)
	}
	if len(logged) != 1 || !strings.Contains(logged[0], "SignatureMissing") || !strings.Contains(logged[0], art.Reference) {
		t.Errorf("warn mode logged %q, want one line naming the image and SignatureMissing", logged)
	}
}

// The air-gap verbs carry the signatures with the artifact: a mirror, and a registry loaded from a saved
// archive, verify under the same policy with no access to the source.
func TestAirGapKeepsSignatures(t *testing.T) {
	ctx := context.Background()
	key := newKey(t)
	v := verifierFor(t, keysPolicy, map[string]map[string][]byte{"ConfigMap plugin-keys": {"k": publicPEM(t, key)}})
	for _, tc := range []struct {
		referrers, legacy bool
	}{{true, false}, {false, false}, {true, true}} {
		referrers := tc.referrers
		src, c := testRegistry(t, referrers)
		a := push(t, c, src+"/osm/myos:1.0", []byte("\x00asm a module"))
		if tc.legacy {
			legacySign(t, c, src+"/osm/myos", key, a.ManifestDigest, a.ManifestDigest)
		} else {
			mustSign(t, c, a.Reference, Signer{Key: key})
		}

		mirror, _ := testRegistry(t, !referrers)
		mirrored, err := c.Copy(ctx, a.Reference, mirror+"/mirror/myos:1.0")
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Verify(ctx, c, pull(t, c, mirrored)); err != nil {
			t.Errorf("%+v: the mirror does not verify: %v", tc, err)
		}

		var archive bytes.Buffer
		if err := c.Save(ctx, []string{a.Reference}, &archive); err != nil {
			t.Fatal(err)
		}
		airgap, _ := testRegistry(t, referrers)
		loaded, err := c.Load(ctx, &archive, airgap)
		if err != nil {
			t.Fatal(err)
		}
		if len(loaded) != 1 {
			t.Fatalf("%+v: loaded %v, want the one artifact", tc, loaded)
		}
		if err := v.Verify(ctx, c, pull(t, c, loaded[0])); err != nil {
			t.Errorf("%+v: the registry loaded from the archive does not verify: %v", tc, err)
		}
	}
}

func TestSignatureLayout(t *testing.T) {
	// What Sign attaches is a referrer of the artifact with cosign's bundle layout.
	ctx := context.Background()
	host, c := testRegistry(t, true)
	a := push(t, c, host+"/osm/myos:1.0", []byte("module"))
	_, sd, err := Sign(ctx, c, host+"/osm/myos:1.0", Signer{Key: newKey(t)})
	if err != nil {
		t.Fatal(err)
	}
	raw, _, err := c.FetchManifest(ctx, host+"/osm/myos@"+sd.String())
	if err != nil {
		t.Fatal(err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m.ArtifactType != BundleMediaType || m.Subject == nil || m.Subject.Digest != a.ManifestDigest || len(m.Layers) != 1 || m.Layers[0].MediaType != BundleMediaType {
		t.Errorf("signature manifest = %s", raw)
	}
}

// A registry that cannot list the signatures is a failed pull (retried), not a missing signature.
func TestUnreachableRegistryIsAPullFailure(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	host := strings.TrimPrefix(srv.URL, "http://")
	c, err := oci.NewClient(oci.Options{PlainHTTP: true, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	art := pull(t, c, push(t, c, host+"/osm/myos:1.0", []byte("module")).Reference)
	srv.Close()
	v := verifierFor(t, keysPolicy, map[string]map[string][]byte{"ConfigMap plugin-keys": {"k": publicPEM(t, newKey(t))}})
	err = v.Verify(context.Background(), c, art)
	if serr, ok := errors.AsType[*Error](err); !ok || serr.Reason != osmv1alpha1.ReasonPluginPullFailed {
		t.Errorf("Verify() with the registry down = %v, want PluginPullFailed", err)
	}
}

// legacySign writes what "cosign sign --key" (before its bundle format) writes: a simple-signing payload for the
// digest signed, its signature in a layer annotation, in a manifest tagged for the digest tagged.
func legacySign(t *testing.T, c *oci.Client, repo string, key *ecdsa.PrivateKey, signed, tagged digest.Digest) {
	t.Helper()
	ctx := context.Background()
	payload := LegacyPayload(repo, signed)
	sum := sha256.Sum256(payload)
	sig, err := ecdsa.SignASN1(rand.Reader, key, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	layer, err := c.PushBlob(ctx, repo, SimpleSigningMediaType, payload)
	if err != nil {
		t.Fatal(err)
	}
	layer.Annotations = map[string]string{SignatureAnnotation: base64.StdEncoding.EncodeToString(sig)}
	config, err := c.PushBlob(ctx, repo, ocispec.MediaTypeImageConfig, []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		Config: config, Layers: []ocispec.Descriptor{layer}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PushManifest(ctx, repo+":"+LegacyTag(tagged), ocispec.MediaTypeImageManifest, raw); err != nil {
		t.Fatal(err)
	}
}
