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
// (ReasonSignatureMissing or ReasonSignatureInvalid, or ReasonPluginPullFailed when the registry could not
// list the signatures); the message names the image, the policy and the rule.
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
	descs, err := signatureReferrers(ctx, client, art.Reference)
	if err != nil {
		// The registry failed, not the signature: reported (and retried) like a failed pull.
		return "", refuse(osmv1alpha1.ReasonPluginPullFailed, "cannot list its signatures: %v", err)
	}
	legacy, err := legacySignatures(ctx, client, art)
	if err != nil {
		return "", refuse(osmv1alpha1.ReasonPluginPullFailed, "cannot read its cosign signatures (%s): %v", LegacyTag(art.ManifestDigest), err)
	}
	if len(descs) == 0 && len(legacy) == 0 {
		return "", refuse(osmv1alpha1.ReasonSignatureMissing, "the registry holds no signature of %s (sign it with osmctl plugin sign)", art.ManifestDigest)
	}
	if art.ManifestDigest.Algorithm() != digest.SHA256 {
		return "", refuse(osmv1alpha1.ReasonSignatureInvalid, "manifest digest %s is not sha256", art.ManifestDigest)
	}
	s := &subject{art: art, client: client}
	var problems []string
	signatures := 0
	for _, d := range descs {
		by, isSignature, err := v.checkOne(ctx, s, d)
		if err == nil {
			return by, nil
		}
		if isSignature {
			signatures++
			problems = append(problems, fmt.Sprintf("signature %s: %v", d.Digest.Encoded()[:12], err))
		}
	}
	for _, l := range legacy {
		by, err := v.checkLegacy(ctx, client, art, l)
		if err == nil {
			return by, nil
		}
		signatures++
		problems = append(problems, fmt.Sprintf("cosign signature %s: %v", l.Digest.Encoded()[:12], err))
	}
	if signatures == 0 {
		return "", refuse(osmv1alpha1.ReasonSignatureMissing, "the registry holds no signature of %s (sign it with osmctl plugin sign)", art.ManifestDigest)
	}
	return "", refuse(osmv1alpha1.ReasonSignatureInvalid, "no signature verifies against %s: %s", strings.Join(v.rule.Authorities, ", "), strings.Join(problems, "; "))
}

// subject is the artifact being verified, with what verifying it needs, read once.
type subject struct {
	art    *oci.Artifact
	client *oci.Client
	// target is the manifest's descriptor (media type, digest, size), which a Notation payload names.
	target *ocispec.Descriptor
}

func (s *subject) descriptor(ctx context.Context) (ocispec.Descriptor, error) {
	if s.target == nil {
		_, d, err := s.client.FetchManifest(ctx, s.art.Reference)
		if err != nil {
			return d, err
		}
		if d.Digest != s.art.ManifestDigest {
			return d, fmt.Errorf("the registry describes %s as %s", s.art.ManifestDigest, d.Digest)
		}
		s.target = &d
	}
	return *s.target, nil
}

// checkOne verifies one attached signature (a Sigstore bundle or a Notation envelope) against the
// authorities of its kind. isSignature is false for a referrer that is no signature at all.
func (v *Verifier) checkOne(ctx context.Context, s *subject, d ocispec.Descriptor) (by string, isSignature bool, err error) {
	art := s.art
	att, err := s.client.FetchAttachment(ctx, art.Reference, d)
	if err != nil {
		return "", d.ArtifactType == BundleMediaType || d.ArtifactType == NotationArtifactType, err
	}
	kind := att.Manifest.ArtifactType
	if kind == "" {
		kind = att.Manifest.Config.MediaType // the OCI rule for manifests without artifactType; notation writes these
	}
	if kind != BundleMediaType && kind != NotationArtifactType {
		return "", false, fmt.Errorf("artifact type %q is not a signature", kind)
	}
	if sub := att.Manifest.Subject; sub == nil || sub.Digest != art.ManifestDigest {
		return "", true, errors.New("it is not attached to this artifact")
	}
	var b bundle.Bundle
	var target ocispec.Descriptor
	switch kind {
	case BundleMediaType:
		if err := b.UnmarshalJSON(att.Layer); err != nil {
			return "", true, fmt.Errorf("not a Sigstore bundle: %w", err)
		}
	case NotationArtifactType:
		if target, err = s.descriptor(ctx); err != nil {
			return "", true, err
		}
	}
	want, _ := hex.DecodeString(art.ManifestDigest.Encoded())
	var errs []string
	for _, t := range v.authorities {
		if t.kind() != kind {
			continue
		}
		var err error
		if kind == BundleMediaType {
			err = t.verify(&b, want)
		} else {
			err = t.verifyNotation(ctx, art.Reference, target, att.Layer, att.LayerMediaType)
		}
		if err != nil {
			errs = append(errs, t.name+": "+err.Error())
			continue
		}
		return t.name, true, nil
	}
	if len(errs) == 0 {
		return "", true, fmt.Errorf("no authority of the rule verifies %s signatures", kindName(kind))
	}
	return "", true, errors.New(strings.Join(errs, "; "))
}

func kindName(kind string) string {
	if kind == NotationArtifactType {
		return "Notation"
	}
	return "Sigstore"
}

// emptyConfig is the config media type of an artifact manifest; some registries report it as the referrer's
// artifact type instead of the manifest's artifactType.
const emptyConfig = "application/vnd.oci.empty.v1+json"

// signatureReferrers lists the referrers of ref that may be signatures. The filtering is done here, not by
// the registry: registries that report a referrer's config media type as its artifact type would otherwise
// hide every signature. checkOne reads the artifact type from the manifest itself.
func signatureReferrers(ctx context.Context, client *oci.Client, ref string) ([]ocispec.Descriptor, error) {
	all, err := client.Referrers(ctx, ref, "")
	if err != nil {
		return nil, err
	}
	var out []ocispec.Descriptor
	for _, d := range all {
		switch d.ArtifactType {
		case BundleMediaType, NotationArtifactType, emptyConfig, "":
			out = append(out, d)
		}
	}
	return out, nil
}
