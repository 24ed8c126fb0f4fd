// Package policy is the operator's plugin verification policy as the controller reads it: which plugin images
// must be signed by whom, and the trust material (public keys, trusted roots, Notation CA certificates) the
// rules' authorities name, read from the controller's namespace. It parses and selects; it verifies nothing.
// The cryptography (sigstore-go, notation-go) is package signature's, run in a process of its own
// (cmd/osm-plugin-verify, package verifyproc), so the controller's executable does not carry it.
package policy

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

// Mode is what a rule does with an image whose signatures do not verify.
type Mode string

const (
	// ModeOff verifies nothing: the default, as upstream OSM has no signatures.
	ModeOff Mode = "off"
	// ModeWarn verifies, logs a refusal, and loads the module anyway: for rolling a policy out.
	ModeWarn Mode = "warn"
	// ModeEnforce verifies and refuses a module without a trusted signature before it is loaded.
	ModeEnforce Mode = "enforce"
)

// PolicyKey is the key of the policy ConfigMap that holds the policy.
const PolicyKey = "policy.yaml"

// Policy says who must have signed which plugin images. It is YAML in the PolicyKey key of a ConfigMap the
// controller names (-plugin-verification-policy). Images no rule matches are not verified (ModeOff), so
// the absence of a policy changes nothing.
type Policy struct {
	// Authorities are the signers the rules can trust, by name.
	Authorities []Authority `json:"authorities,omitempty"`
	// Rules are tried in order; the first whose namespaces and images both match a profile's plugin image
	// applies to it.
	Rules []Rule `json:"rules,omitempty"`
}

// Authority is one signer: public keys, a certificate authority with the identity its certificates must
// name (Sigstore bundles), or a Notation trust store with its trusted identities (Notation signatures).
// Exactly one of Keys, Keyless and Notation is set.
type Authority struct {
	Name string `json:"name"`
	// Keys are PEM public keys (ECDSA, RSA, Ed25519); a signature by any of them is this authority's.
	Keys *KeyRef `json:"keys,omitempty"`
	// Keyless trusts certificates issued under a Sigstore trusted root (Fulcio-style, or a private CA) that
	// name an identity.
	Keyless *Keyless `json:"keyless,omitempty"`
	// Notation trusts Notation signatures (JWS or COSE envelopes attached as referrers, as the notation CLI
	// writes them) whose certificate chain ends at one of the trust store's CA certificates.
	Notation *NotationAuthority `json:"notation,omitempty"`
}

// NotationAuthority is a Notation trust store of type ca and the identities it trusts.
type NotationAuthority struct {
	// TrustStore holds the PEM CA certificates signing certificates must chain to.
	TrustStore KeyRef `json:"trustStore"`
	// TrustedIdentities are Notation trusted identities ("x509.subject: CN=release,O=Vendor"), or ["*"] for
	// every certificate under the trust store.
	TrustedIdentities []string `json:"trustedIdentities"`
}

// Keyless is a trusted root and the identity a signing certificate must carry.
type Keyless struct {
	// TrustedRoot is a Sigstore trusted_root.json: certificate authorities, and optionally transparency logs
	// and timestamp authorities. It is read from the cluster; nothing is fetched from the network.
	TrustedRoot KeyRef `json:"trustedRoot"`
	// Issuer (or IssuerRegExp) is the OIDC issuer the certificate's Fulcio issuer extension must name.
	Issuer       string `json:"issuer,omitempty"`
	IssuerRegExp string `json:"issuerRegExp,omitempty"`
	// Subject (or SubjectRegExp) is the certificate's subject alternative name (e-mail or URI).
	Subject       string `json:"subject,omitempty"`
	SubjectRegExp string `json:"subjectRegExp,omitempty"`
}

// KeyRef names one key of a ConfigMap or a Secret in the controller's namespace. Trust material lives where
// only the operator can write it: a tenant cannot point a policy at keys of its own namespace.
type KeyRef struct {
	ConfigMap string `json:"configMap,omitempty"`
	Secret    string `json:"secret,omitempty"`
	// Key is the data key; empty means every key of the object (for Keys: each may hold PEM keys).
	Key string `json:"key,omitempty"`
}

func (r KeyRef) String() string {
	kind, name := "ConfigMap", r.ConfigMap
	if r.Secret != "" {
		kind, name = "Secret", r.Secret
	}
	if r.Key != "" {
		return kind + " " + name + " key " + r.Key
	}
	return kind + " " + name
}

// Rule applies a mode and a set of trusted authorities to some plugin images of some namespaces.
type Rule struct {
	// Name names the rule in conditions and logs; default "rule <index>".
	Name string `json:"name,omitempty"`
	// Namespaces are shell patterns (path.Match) of profile namespaces; empty matches every namespace.
	Namespaces []string `json:"namespaces,omitempty"`
	// Images are shell patterns of image repositories ("registry/path", no tag or digest; "*" does not cross
	// a "/"); empty matches every image.
	Images []string `json:"images,omitempty"`
	// Mode is off, warn or enforce; default enforce.
	Mode Mode `json:"mode,omitempty"`
	// Authorities names the authorities of which any one signature suffices. Required unless Mode is off.
	Authorities []string `json:"authorities,omitempty"`
}

// ParsePolicy reads a policy and checks it: known fields only, authorities well formed and named once,
// rules naming known authorities, patterns that compile.
func ParsePolicy(data []byte) (*Policy, error) {
	var p Policy
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	names := map[string]bool{}
	for i, a := range p.Authorities {
		if err := a.check(); err != nil {
			return nil, fmt.Errorf("policy: authorities[%d]: %w", i, err)
		}
		if names[a.Name] {
			return nil, fmt.Errorf("policy: authority %q is defined twice", a.Name)
		}
		names[a.Name] = true
	}
	for i := range p.Rules {
		r := &p.Rules[i]
		if r.Name == "" {
			r.Name = fmt.Sprintf("rule %d", i)
		}
		switch r.Mode {
		case "":
			r.Mode = ModeEnforce
		case "false":
			r.Mode = ModeOff // YAML 1.1 reads an unquoted off as false
		}
		if err := r.check(names); err != nil {
			return nil, fmt.Errorf("policy: rules[%d] (%s): %w", i, r.Name, err)
		}
	}
	return &p, nil
}

func (a Authority) check() error {
	if a.Name == "" {
		return errors.New("name is required")
	}
	set := 0
	for _, b := range []bool{a.Keys != nil, a.Keyless != nil, a.Notation != nil} {
		if b {
			set++
		}
	}
	switch {
	case set != 1:
		return fmt.Errorf("authority %q: set exactly one of keys, keyless and notation", a.Name)
	case a.Keys != nil:
		return a.Keys.check()
	case a.Notation != nil:
		if err := a.Notation.TrustStore.check(); err != nil {
			return fmt.Errorf("authority %q: trustStore: %w", a.Name, err)
		}
		if len(a.Notation.TrustedIdentities) == 0 {
			return fmt.Errorf("authority %q: notation needs trustedIdentities (\"*\" for any)", a.Name)
		}
		return nil
	}
	k := a.Keyless
	if err := k.TrustedRoot.check(); err != nil {
		return fmt.Errorf("authority %q: trustedRoot: %w", a.Name, err)
	}
	if (k.Issuer == "") == (k.IssuerRegExp == "") || (k.Subject == "") == (k.SubjectRegExp == "") {
		return fmt.Errorf("authority %q: keyless needs exactly one of issuer and issuerRegExp and exactly one of subject and subjectRegExp", a.Name)
	}
	for _, re := range []string{k.IssuerRegExp, k.SubjectRegExp} {
		if _, err := regexp.Compile(re); err != nil {
			return fmt.Errorf("authority %q: %w", a.Name, err)
		}
	}
	return nil
}

func (r KeyRef) check() error {
	if (r.ConfigMap == "") == (r.Secret == "") {
		return errors.New("set exactly one of configMap and secret")
	}
	return nil
}

func (r *Rule) check(authorities map[string]bool) error {
	switch r.Mode {
	case ModeOff:
	case ModeWarn, ModeEnforce:
		if len(r.Authorities) == 0 {
			return fmt.Errorf("mode %s needs at least one authority", r.Mode)
		}
	default:
		return fmt.Errorf("mode %q is not one of off, warn, enforce", r.Mode)
	}
	for _, a := range r.Authorities {
		if !authorities[a] {
			return fmt.Errorf("authority %q is not defined", a)
		}
	}
	for _, p := range append(append([]string{}, r.Namespaces...), r.Images...) {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("pattern %q: %w", p, err)
		}
	}
	return nil
}

// RuleFor returns the rule that applies to image (a reference, tag or digest allowed) in namespace, or nil
// when none does.
func (p *Policy) RuleFor(namespace, image string) *Rule {
	repo := repository(image)
	for i := range p.Rules {
		r := &p.Rules[i]
		if matchAny(r.Namespaces, namespace) && matchAny(r.Images, repo) {
			return r
		}
	}
	return nil
}

// repository is image without its digest or tag.
func repository(image string) string {
	if at := strings.LastIndex(image, "@"); at >= 0 {
		image = image[:at]
	}
	if colon := strings.LastIndex(image, ":"); colon > strings.LastIndex(image, "/") {
		image = image[:colon]
	}
	return image
}

func matchAny(patterns []string, s string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if ok, _ := path.Match(p, s); ok {
			return true
		}
	}
	return false
}

// Authority returns the authority called name, or nil.
func (p *Policy) Authority(name string) *Authority {
	for i := range p.Authorities {
		if p.Authorities[i].Name == name {
			return &p.Authorities[i]
		}
	}
	return nil
}
