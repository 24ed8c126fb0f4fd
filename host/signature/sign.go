package signature

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/opencontainers/go-digest"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	sigsig "github.com/sigstore/sigstore/pkg/signature"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/osmhq/osm/host/oci"
)

// What a signature signs: an in-toto statement whose subject is the plugin artifact's manifest digest, in a
// DSSE envelope, in a Sigstore bundle, attached to the artifact as a referrer. This is the layout cosign writes
// with its bundle format. The subject's name is informational: only the digest binds, so a signature stays
// valid for the same artifact in a mirror under another name.
const (
	inTotoPayloadType   = "application/vnd.in-toto+json"
	inTotoStatementType = "https://in-toto.io/Statement/v1"
	// PredicateType is the predicate of the statement a signature signs.
	PredicateType = "https://sigstore.dev/cosign/sign/v1"
)

type statement struct {
	Type          string            `json:"_type"`
	Subject       []statementEntity `json:"subject"`
	PredicateType string            `json:"predicateType"`
	Predicate     struct{}          `json:"predicate"`
}

type statementEntity struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// Signer signs plugin artifacts: a private key and, for certificate-based (keyless-style) signatures, the
// key's certificate (DER). A bundle holds the leaf certificate alone: intermediates belong in the verifier's
// trusted root.
type Signer struct {
	Key         crypto.Signer
	Certificate []byte
}

// Bundle returns a Sigstore bundle (JSON) signing the manifest digest md of the artifact name.
func (s Signer) Bundle(name string, md digest.Digest) ([]byte, error) {
	if md.Algorithm() != digest.SHA256 {
		return nil, fmt.Errorf("digest %s is not sha256", md)
	}
	payload, err := json.Marshal(statement{Type: inTotoStatementType, PredicateType: PredicateType,
		Subject: []statementEntity{{Name: name, Digest: map[string]string{"sha256": md.Encoded()}}}})
	if err != nil {
		return nil, err
	}
	kp, err := newKeypair(s.Key)
	if err != nil {
		return nil, err
	}
	opts := sign.BundleOptions{}
	if len(s.Certificate) > 0 {
		opts.CertificateProvider = certificate(s.Certificate)
	}
	b, err := sign.Bundle(&sign.DSSEData{Data: payload, PayloadType: inTotoPayloadType}, kp, opts)
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	return protojson.Marshal(b)
}

// Sign signs the artifact ref (a tag is resolved to its digest first) and attaches the signature to it in
// its registry. It returns the signed reference, pinned by digest, and the signature's manifest digest.
func Sign(ctx context.Context, c *oci.Client, ref string, s Signer) (string, digest.Digest, error) {
	pinned, md, err := c.Resolve(ctx, ref)
	if err != nil {
		return "", "", err
	}
	b, err := s.Bundle(pinned[:len(pinned)-len(md.String())-1], md)
	if err != nil {
		return "", "", err
	}
	sd, err := c.Attach(ctx, pinned, BundleMediaType, BundleMediaType, b, map[string]string{
		"dev.sigstore.bundle.content":       "dsse-envelope",
		"dev.sigstore.bundle.predicateType": PredicateType,
	})
	return pinned, sd, err
}

type certificate []byte

func (c certificate) GetCertificate(context.Context, sign.Keypair, *sign.CertificateProviderOptions) ([]byte, error) {
	return c, nil
}

// keypair adapts a crypto.Signer to sigstore-go's signing interface.
type keypair struct {
	key  crypto.Signer
	alg  sigsig.AlgorithmDetails
	hint []byte
}

func newKeypair(key crypto.Signer) (*keypair, error) {
	alg, err := sigsig.GetDefaultAlgorithmDetails(key.Public())
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(der)
	return &keypair{key: key, alg: alg, hint: []byte(base64.StdEncoding.EncodeToString(sum[:]))}, nil
}

func (k *keypair) GetHashAlgorithm() protocommon.HashAlgorithm { return k.alg.GetProtoHashType() }
func (k *keypair) GetSigningAlgorithm() protocommon.PublicKeyDetails {
	return k.alg.GetSignatureAlgorithm()
}
func (k *keypair) GetHint() []byte                { return k.hint }
func (k *keypair) GetPublicKey() crypto.PublicKey { return k.key.Public() }

func (k *keypair) GetKeyAlgorithm() string {
	switch k.key.Public().(type) {
	case *ecdsa.PublicKey:
		return "ECDSA"
	case *rsa.PublicKey:
		return "RSA"
	case ed25519.PublicKey:
		return "ED25519"
	}
	return ""
}

func (k *keypair) GetPublicKeyPem() (string, error) {
	b, err := cryptoutils.MarshalPublicKeyToPEM(k.key.Public())
	return string(b), err
}

// SignData signs data's digest (Ed25519: data itself) and returns the signature and what was signed.
func (k *keypair) SignData(_ context.Context, data []byte) ([]byte, []byte, error) {
	hf := k.alg.GetHashType()
	toSign := data
	if hf != crypto.Hash(0) {
		h := hf.New()
		h.Write(data)
		toSign = h.Sum(nil)
	}
	sig, err := k.key.Sign(rand.Reader, toSign, hf)
	return sig, toSign, err
}

// ParsePrivateKey reads a PEM private key: PKCS #8 ("PRIVATE KEY"), SEC 1 ("EC PRIVATE KEY") or PKCS #1
// ("RSA PRIVATE KEY"). Encrypted keys (cosign's "ENCRYPTED SIGSTORE PRIVATE KEY") are refused with a hint.
func ParsePrivateKey(data []byte) (crypto.Signer, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, errors.New("no PEM private key")
		}
		var (
			key any
			err error
		)
		switch block.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		case "ENCRYPTED SIGSTORE PRIVATE KEY", "ENCRYPTED COSIGN PRIVATE KEY", "ENCRYPTED PRIVATE KEY":
			return nil, fmt.Errorf("the key is encrypted (%s); give an unencrypted PEM key (for a cosign key: cosign import-key-pair works the other way; decrypt it with openssl pkcs8)", block.Type)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("private key: %w", err)
		}
		signer, ok := key.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("private key of type %T cannot sign", key)
		}
		return signer, nil
	}
}

// ParseCertificates reads the PEM certificates of data, in order, as DER.
func ParseCertificates(data []byte) ([][]byte, error) {
	certs, err := cryptoutils.UnmarshalCertificatesFromPEMLimited(data, 16)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(certs))
	for i, c := range certs {
		out[i] = c.Raw
	}
	return out, nil
}
