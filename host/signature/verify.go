package signature

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/oci"
)

// BundleMediaType is the artifact type of a Sigstore bundle attached to an image as a referrer, and the media
// type of its one layer (the bundle JSON), as cosign writes them.
const BundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"

// DefaultTimeout bounds one verification: listing the referrers and fetching each bundle.
const DefaultTimeout = 30 * time.Second

// Error is a module refused by the verification policy. Its Reason is the condition reason
// (ReasonSignatureMissing or ReasonSignatureInvalid); the message names the image, the policy and the rule.
type Error struct {
	Reason string
	Image  string
	// Policy is "namespace/name" of the policy ConfigMap, or where else the policy came from.
	Policy string
	Rule   string
	Detail string
}

func (e *Error) Error() string {
	return fmt.Sprintf("plugin %s refused by the plugin verification policy %s (%s): %s", e.Image, e.Policy, e.Rule, e.Detail)
}

// Verifier checks a pulled image against one rule of a policy: some signature attached to it must verify
// against one of the rule's authorities. It implements plugin.Verifier.
type Verifier struct {
	policy      string
	rule        Rule
	authorities []*trusted
	key         string
	log         logr.Logger
	timeout     time.Duration
}

// Key identifies the policy, the rule and the trust material the verifier checks against: a module verified
// under one key is not served to a reference under another.
func (v *Verifier) Key() string { return v.key }

// Mode is the rule's mode.
func (v *Verifier) Mode() Mode { return v.rule.Mode }

// Verify checks art (pulled through client) before its module is loaded. In warn mode a refusal is logged and
// nil returned; in enforce mode it is an *Error.
func (v *Verifier) Verify(ctx context.Context, client *oci.Client, art *oci.Artifact) error {
	ctx, cancel := context.WithTimeout(ctx, v.timeout)
	defer cancel()
	by, err := v.check(ctx, client, art)
	if err == nil {
		v.log.V(1).Info("plugin signature verified", "image", art.Reference, "policy", v.policy, "rule", v.rule.Name, "authority", by)
		return nil
	}
	if v.rule.Mode == ModeWarn {
		v.log.Info("plugin signature not verified; loading it anyway (mode warn)", "image", art.Reference, "policy", v.policy,
			"rule", v.rule.Name, "reason", err.Reason, "detail", err.Detail)
		return nil
	}
	return err
}

// check returns the name of the authority one of art's signatures verifies against.
func (v *Verifier) check(ctx context.Context, client *oci.Client, art *oci.Artifact) (string, *Error) {
	refuse := func(reason, format string, args ...any) *Error {
		return &Error{Reason: reason, Image: art.Reference, Policy: v.policy, Rule: v.rule.Name, Detail: fmt.Sprintf(format, args...)}
	}
	descs, err := bundleReferrers(ctx, client, art.Reference)
	if err != nil {
		return "", refuse(osmv1alpha1.ReasonSignatureMissing, "cannot list its signatures: %v", err)
	}
	if len(descs) == 0 {
		return "", refuse(osmv1alpha1.ReasonSignatureMissing, "the registry holds no Sigstore signature of %s (sign it with osmctl plugin sign)", art.ManifestDigest)
	}
	want, err := hex.DecodeString(art.ManifestDigest.Encoded())
	if err != nil || art.ManifestDigest.Algorithm() != digest.SHA256 {
		return "", refuse(osmv1alpha1.ReasonSignatureInvalid, "manifest digest %s is not sha256", art.ManifestDigest)
	}
	var problems []string
	for _, d := range descs {
		by, err := v.checkOne(ctx, client, art, d, want)
		if err == nil {
			return by, nil
		}
		problems = append(problems, fmt.Sprintf("signature %s: %v", d.Digest.Encoded()[:12], err))
	}
	return "", refuse(osmv1alpha1.ReasonSignatureInvalid, "no signature verifies against %s: %s", strings.Join(v.rule.Authorities, ", "), strings.Join(problems, "; "))
}

// checkOne verifies one attached bundle.
func (v *Verifier) checkOne(ctx context.Context, client *oci.Client, art *oci.Artifact, d ocispec.Descriptor, want []byte) (string, error) {
	att, err := client.FetchAttachment(ctx, art.Reference, d)
	if err != nil {
		return "", err
	}
	if att.Manifest.ArtifactType != BundleMediaType {
		return "", fmt.Errorf("artifact type %q is not a Sigstore bundle", att.Manifest.ArtifactType)
	}
	if s := att.Manifest.Subject; s == nil || s.Digest != art.ManifestDigest {
		return "", errors.New("it is not attached to this artifact")
	}
	var b bundle.Bundle
	if err := b.UnmarshalJSON(att.Layer); err != nil {
		return "", fmt.Errorf("not a Sigstore bundle: %w", err)
	}
	var errs []string
	for _, t := range v.authorities {
		if err := t.verify(&b, want); err != nil {
			errs = append(errs, t.name+": "+err.Error())
			continue
		}
		return t.name, nil
	}
	return "", errors.New(strings.Join(errs, "; "))
}

// emptyConfig is the config media type of an artifact manifest; some registries report it as the referrer's
// artifact type instead of the manifest's artifactType.
const emptyConfig = "application/vnd.oci.empty.v1+json"

// bundleReferrers lists the referrers of ref that may be Sigstore bundles. The filtering is done here, not by
// the registry: registries that report a referrer's config media type as its artifact type would otherwise
// hide every bundle. checkOne reads the artifact type from the manifest itself.
func bundleReferrers(ctx context.Context, client *oci.Client, ref string) ([]ocispec.Descriptor, error) {
	all, err := client.Referrers(ctx, ref, "")
	if err != nil {
		return nil, err
	}
	var out []ocispec.Descriptor
	for _, d := range all {
		switch d.ArtifactType {
		case BundleMediaType, emptyConfig, "":
			out = append(out, d)
		}
	}
	return out, nil
}
