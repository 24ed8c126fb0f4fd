package signature

import (
	"context"
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/notaryproject/notation-core-go/signature/jws"
	"github.com/notaryproject/notation-go"
	notationregistry "github.com/notaryproject/notation-go/registry"
	notationsigner "github.com/notaryproject/notation-go/signer"
	"github.com/notaryproject/notation-go/verifier"
	"github.com/notaryproject/notation-go/verifier/trustpolicy"
	"github.com/notaryproject/notation-go/verifier/truststore"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/sigstore/pkg/cryptoutils"

	"github.com/osmhq/osm/host/oci"
	"github.com/osmhq/osm/host/signature/verifyproc"
)

// NotationArtifactType is the artifact type of a Notation signature attached to an image as a referrer.
const NotationArtifactType = verifyproc.NotationArtifactType

// maxCACertificates bounds the CA certificates of one Notation trust store.
const maxCACertificates = 64

// caStore is a Notation trust store held in memory: the certificates of one authority, read from the cluster.
type caStore struct {
	name  string
	certs []*x509.Certificate
}

func (s *caStore) GetCertificates(_ context.Context, storeType truststore.Type, name string) ([]*x509.Certificate, error) {
	if storeType != truststore.TypeCA || name != s.name {
		return nil, fmt.Errorf("no trust store %s:%s", storeType, name)
	}
	return s.certs, nil
}

// NotationVerifier verifies Notation signatures whose chain ends at one of cas and whose signing certificate
// matches one of identities, at Notation's strict level with the revocation check skipped: revocation needs
// the network (OCSP, CRL), and verification here is offline. Strict checks the signing certificate's validity
// at the current time unless the signature carries a trusted timestamp.
func NotationVerifier(name string, cas []*x509.Certificate, identities []string) (notation.Verifier, error) {
	if len(cas) == 0 {
		return nil, errors.New("the trust store holds no certificate")
	}
	doc := &trustpolicy.Document{Version: "1.0", TrustPolicies: []trustpolicy.TrustPolicy{{
		Name:           "osm",
		RegistryScopes: []string{"*"},
		SignatureVerification: trustpolicy.SignatureVerification{VerificationLevel: trustpolicy.LevelStrict.Name,
			Override: map[trustpolicy.ValidationType]trustpolicy.ValidationAction{trustpolicy.TypeRevocation: trustpolicy.ActionSkip}},
		TrustStores:       []string{"ca:" + name},
		TrustedIdentities: identities,
	}}}
	return verifier.New(doc, &caStore{name: name, certs: cas}, nil)
}

// loadNotation reads a Notation authority's trust store through get.
func loadNotation(a *Authority, get Getter) (*trusted, []byte, error) {
	data, err := get(a.Notation.TrustStore)
	if err != nil {
		return nil, nil, err
	}
	pems, raw := selectData(data, a.Notation.TrustStore.Key)
	var cas []*x509.Certificate
	for _, p := range pems {
		certs, err := cryptoutils.UnmarshalCertificatesFromPEMLimited(p, maxCACertificates)
		if err != nil {
			return nil, nil, fmt.Errorf("authority %q: %s: %w", a.Name, a.Notation.TrustStore, err)
		}
		cas = append(cas, certs...)
	}
	v, err := NotationVerifier("authority", cas, a.Notation.TrustedIdentities)
	if err != nil {
		return nil, nil, fmt.Errorf("authority %q: %w", a.Name, err)
	}
	return &trusted{name: a.Name, notation: v}, raw, nil
}

// verifyNotation checks one Notation envelope of the artifact target (its manifest's descriptor).
func (t *trusted) verifyNotation(ctx context.Context, ref string, target ocispec.Descriptor, envelope []byte, mediaType string) error {
	_, err := t.notation.Verify(ctx, target, envelope, notation.VerifierVerifyOptions{ArtifactReference: ref, SignatureMediaType: mediaType})
	return err
}

// SignNotation signs the artifact ref with key and its certificate chain (leaf first, root last) the way the
// notation CLI does (a JWS envelope attached as a referrer), and returns the signed reference pinned by digest.
func SignNotation(ctx context.Context, c *oci.Client, ref string, key crypto.Signer, chain []*x509.Certificate) (string, error) {
	pinned, _, err := c.Resolve(ctx, ref)
	if err != nil {
		return "", err
	}
	s, err := notationsigner.NewGenericSigner(key, chain)
	if err != nil {
		return "", fmt.Errorf("notation signer: %w", err)
	}
	repo, err := c.Repository(pinned)
	if err != nil {
		return "", err
	}
	_, err = notation.Sign(ctx, s, notationregistry.NewRepository(repo), notation.SignOptions{
		SignerSignOptions: notation.SignerSignOptions{SignatureMediaType: jws.MediaTypeEnvelope},
		ArtifactReference: pinned,
	})
	if err != nil {
		return "", fmt.Errorf("notation sign %s: %w", pinned, err)
	}
	return pinned, nil
}
