package signature

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/notaryproject/notation-go"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	sigsig "github.com/sigstore/sigstore/pkg/signature"
)

// maxKeys bounds the public keys of one authority.
const maxKeys = 64

// trusted is an authority with its trust material loaded: what a bundle is verified against.
type trusted struct {
	name string
	// keys: one verifier per public key, each trusting that key alone; raw: the same keys, for cosign's
	// simple-signing signatures.
	keys []*verify.Verifier
	raw  []sigsig.Verifier
	// keyless: a verifier trusting the root, and the identity certificates must name.
	keyless  *verify.Verifier
	identity verify.CertificateIdentity
	// atNow: certificates are checked against the current time (the root has no logs or timestamp authorities).
	atNow bool
	// notation verifies Notation signatures.
	notation notation.Verifier
}

// kind is the signature format the authority verifies.
func (t *trusted) kind() string {
	if t.notation != nil {
		return NotationArtifactType
	}
	return BundleMediaType
}

// loadAuthority reads a's trust material through get (the data of the object a KeyRef names).
func loadAuthority(a *Authority, get func(KeyRef) (map[string][]byte, error)) (*trusted, []byte, error) {
	t := &trusted{name: a.Name}
	if a.Notation != nil {
		return loadNotation(a, get)
	}
	if a.Keys != nil {
		data, err := get(*a.Keys)
		if err != nil {
			return nil, nil, err
		}
		pems, raw := selectData(data, a.Keys.Key)
		keys, err := ParsePublicKeys(pems)
		if err != nil {
			return nil, nil, fmt.Errorf("authority %q: %s: %w", a.Name, a.Keys, err)
		}
		for _, k := range keys {
			sv, err := sigsig.LoadDefaultVerifier(k)
			if err != nil {
				return nil, nil, fmt.Errorf("authority %q: public key: %w", a.Name, err)
			}
			v, err := keyVerifier(sv)
			if err != nil {
				return nil, nil, fmt.Errorf("authority %q: %w", a.Name, err)
			}
			t.keys = append(t.keys, v)
			t.raw = append(t.raw, sv)
		}
		return t, raw, nil
	}
	k := a.Keyless
	data, err := get(k.TrustedRoot)
	if err != nil {
		return nil, nil, err
	}
	_, raw := selectData(data, k.TrustedRoot.Key)
	if k.TrustedRoot.Key == "" && len(data) != 1 {
		return nil, nil, fmt.Errorf("authority %q: %s: name the key that holds trusted_root.json", a.Name, k.TrustedRoot)
	}
	tr, err := root.NewTrustedRootFromJSON(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("authority %q: %s is not a Sigstore trusted root: %w", a.Name, k.TrustedRoot, err)
	}
	t.atNow = len(tr.RekorLogs()) == 0 && len(tr.TimestampingAuthorities()) == 0
	if t.keyless, err = RootVerifier(tr); err != nil {
		return nil, nil, fmt.Errorf("authority %q: %w", a.Name, err)
	}
	if t.identity, err = identity(k); err != nil {
		return nil, nil, fmt.Errorf("authority %q: %w", a.Name, err)
	}
	return t, raw, nil
}

func identity(k *Keyless) (verify.CertificateIdentity, error) {
	return verify.NewShortCertificateIdentity(k.Issuer, k.IssuerRegExp, k.Subject, k.SubjectRegExp)
}

// selectData returns the values of data to read (key's alone, or all in key order) and their concatenation,
// which identifies the material.
func selectData(data map[string][]byte, key string) ([][]byte, []byte) {
	if key != "" {
		return [][]byte{data[key]}, data[key]
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out [][]byte
	var raw []byte
	for _, k := range keys {
		out = append(out, data[k])
		raw = append(append(raw, k...), data[k]...)
	}
	return out, raw
}

// ParsePublicKeys reads every PEM "PUBLIC KEY" block of the inputs (other blocks are skipped); finding none
// is an error.
func ParsePublicKeys(inputs [][]byte) ([]crypto.PublicKey, error) {
	var keys []crypto.PublicKey
	for _, in := range inputs {
		for {
			var block *pem.Block
			block, in = pem.Decode(in)
			if block == nil {
				break
			}
			if block.Type != "PUBLIC KEY" {
				continue
			}
			k, err := x509.ParsePKIXPublicKey(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("public key: %w", err)
			}
			if len(keys) == maxKeys {
				return nil, fmt.Errorf("more than %d public keys", maxKeys)
			}
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, errors.New(`no PEM "PUBLIC KEY" block`)
	}
	return keys, nil
}

// KeyVerifier verifies bundles signed by key alone. A key has no validity period and a key-signed bundle
// needs no timestamp; rotating a key is removing it from the authority.
func KeyVerifier(key crypto.PublicKey) (*verify.Verifier, error) {
	sv, err := sigsig.LoadDefaultVerifier(key)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	return keyVerifier(sv)
}

func keyVerifier(sv sigsig.Verifier) (*verify.Verifier, error) {
	material := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) {
		return root.NewExpiringKey(sv, time.Time{}, time.Time{}), nil
	})
	return verify.NewVerifier(material, verify.WithNoObserverTimestamps())
}

// RootVerifier verifies certificate-signed bundles against a trusted root, asking for the evidence the root
// can check: a transparency log entry (and its time) where the root has logs, signed certificate timestamps
// where it has CT logs, an RFC 3161 timestamp where it has timestamp authorities, and otherwise the current
// time (a private CA's long-lived code-signing certificates), which is what refuses an expired certificate.
func RootVerifier(tr root.TrustedMaterial) (*verify.Verifier, error) {
	var opts []verify.VerifierOption
	switch {
	case len(tr.RekorLogs()) > 0:
		opts = append(opts, verify.WithTransparencyLog(1), verify.WithObserverTimestamps(1))
	case len(tr.TimestampingAuthorities()) > 0:
		opts = append(opts, verify.WithSignedTimestamps(1))
	default:
		opts = append(opts, verify.WithCurrentTime())
	}
	if len(tr.CTLogs()) > 0 {
		opts = append(opts, verify.WithSignedCertificateTimestamps(1))
	}
	if len(tr.FulcioCertificateAuthorities()) == 0 {
		return nil, errors.New("the trusted root has no certificate authority")
	}
	return verify.NewVerifier(tr, opts...)
}

// verify checks that b is a signature of the manifest with the digest by this authority.
func (t *trusted) verify(b *bundle.Bundle, manifestDigest []byte) error {
	artifact := verify.WithArtifactDigest("sha256", manifestDigest)
	if t.keyless != nil {
		_, err := t.keyless.Verify(b, verify.NewPolicy(artifact, verify.WithCertificateIdentity(t.identity)))
		if t.atNow {
			return explainCertificate(b, err)
		}
		return err
	}
	var errs []error
	for _, v := range t.keys {
		_, err := v.Verify(b, verify.NewPolicy(artifact, verify.WithKey()))
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return fmt.Errorf("no key of %d verifies it", len(t.keys))
}

// explainCertificate adds to a failed verification what sigstore-go's message leaves out: that the signing
// certificate is outside its validity period (checked against the current time where the root has no
// timestamping evidence).
func explainCertificate(b *bundle.Bundle, err error) error {
	if err == nil {
		return nil
	}
	vc, verr := b.VerificationContent()
	if verr != nil || vc.Certificate() == nil {
		return err
	}
	now := time.Now()
	switch c := vc.Certificate(); {
	case now.After(c.NotAfter):
		return fmt.Errorf("%w (the signing certificate expired at %s)", err, c.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(c.NotBefore):
		return fmt.Errorf("%w (the signing certificate is not valid before %s)", err, c.NotBefore.UTC().Format(time.RFC3339))
	}
	return err
}
