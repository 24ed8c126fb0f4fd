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
	"github.com/osmhq/osm/host/signature/policy"
	"github.com/osmhq/osm/host/signature/verifyproc"
)

// BundleMediaType is the artifact type of a Sigstore bundle attached to an image as a referrer, and the media
// type of its one layer (the bundle JSON), as cosign writes them.
const BundleMediaType = verifyproc.BundleMediaType

// DefaultTimeout bounds one verification: listing the referrers and fetching each bundle.
const DefaultTimeout = verifyproc.DefaultTimeout

// Error is a module refused by the verification policy (policy.Error).
type Error = policy.Error

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
// nil returned; in enforce mode it is an *Error. The controller does the same through a verifier process
// (verifyproc.Verifier); this is the same check in this process, for osmctl and the tests.
func (v *Verifier) Verify(ctx context.Context, client *oci.Client, art *oci.Artifact) error {
	ctx, cancel := context.WithTimeout(ctx, v.timeout)
	defer cancel()
	ev, err := verifyproc.Gather(ctx, client, art)
	var by string
	var rerr *Error
	if err != nil {
		rerr = &Error{Reason: osmv1alpha1.ReasonPluginPullFailed, Image: art.Reference, Policy: v.policy, Rule: v.rule.Name, Detail: err.Error()}
	} else {
		by, rerr = v.check(ctx, ev)
	}
	if rerr == nil {
		v.log.V(1).Info("plugin signature verified", "image", art.Reference, "policy", v.policy, "rule", v.rule.Name, "authority", by)
		return nil
	}
	if v.rule.Mode == ModeWarn {
		v.log.Info("plugin signature not verified; loading it anyway (mode warn)", "image", art.Reference, "policy", v.policy,
			"rule", v.rule.Name, "reason", rerr.Reason, "detail", rerr.Detail)
		return nil
	}
	return rerr
}

// check returns the name of the authority one of the evidence's signatures verifies against.
func (v *Verifier) check(ctx context.Context, ev *verifyproc.Evidence) (string, *Error) {
	refuse := func(reason, format string, args ...any) *Error {
		return &Error{Reason: reason, Image: ev.Reference, Policy: v.policy, Rule: v.rule.Name, Detail: fmt.Sprintf(format, args...)}
	}
	if len(ev.Referrers) == 0 && len(ev.Legacy) == 0 {
		return "", refuse(osmv1alpha1.ReasonSignatureMissing, "the registry holds no signature of %s (sign it with osmctl plugin sign)", ev.ManifestDigest)
	}
	if ev.ManifestDigest.Algorithm() != digest.SHA256 {
		return "", refuse(osmv1alpha1.ReasonSignatureInvalid, "manifest digest %s is not sha256", ev.ManifestDigest)
	}
	var problems []string
	signatures := 0
	for i := range ev.Referrers {
		r := &ev.Referrers[i]
		by, err := v.checkOne(ctx, ev, r)
		if err == nil {
			return by, nil
		}
		if r.IsSignature() {
			signatures++
			problems = append(problems, fmt.Sprintf("signature %s: %v", r.Descriptor.Digest.Encoded()[:12], err))
		}
	}
	for i := range ev.Legacy {
		l := &ev.Legacy[i]
		by, err := v.checkLegacy(ev, l)
		if err == nil {
			return by, nil
		}
		signatures++
		problems = append(problems, fmt.Sprintf("cosign signature %s: %v", l.Descriptor.Digest.Encoded()[:12], err))
	}
	if signatures == 0 {
		return "", refuse(osmv1alpha1.ReasonSignatureMissing, "the registry holds no signature of %s (sign it with osmctl plugin sign)", ev.ManifestDigest)
	}
	return "", refuse(osmv1alpha1.ReasonSignatureInvalid, "no signature verifies against %s: %s", strings.Join(v.rule.Authorities, ", "), strings.Join(problems, "; "))
}

// checkOne verifies one attached signature (a Sigstore bundle or a Notation envelope) against the
// authorities of its kind.
func (v *Verifier) checkOne(ctx context.Context, ev *verifyproc.Evidence, r *verifyproc.Referrer) (by string, err error) {
	if r.FetchErr != "" {
		return "", errors.New(r.FetchErr)
	}
	kind := r.Kind
	if kind != BundleMediaType && kind != NotationArtifactType {
		return "", fmt.Errorf("artifact type %q is not a signature", kind)
	}
	if r.Subject == nil || *r.Subject != ev.ManifestDigest {
		return "", errors.New("it is not attached to this artifact")
	}
	var b bundle.Bundle
	var target ocispec.Descriptor
	switch kind {
	case BundleMediaType:
		if err := b.UnmarshalJSON(r.Layer); err != nil {
			return "", fmt.Errorf("not a Sigstore bundle: %w", err)
		}
	case NotationArtifactType:
		if ev.Target == nil {
			return "", errors.New(ev.TargetErr)
		}
		target = *ev.Target
	}
	want, _ := hex.DecodeString(ev.ManifestDigest.Encoded())
	var errs []string
	for _, t := range v.authorities {
		if t.kind() != kind {
			continue
		}
		var err error
		if kind == BundleMediaType {
			err = t.verify(&b, want)
		} else {
			err = t.verifyNotation(ctx, ev.Reference, target, r.Layer, r.LayerMediaType)
		}
		if err != nil {
			errs = append(errs, t.name+": "+err.Error())
			continue
		}
		return t.name, nil
	}
	if len(errs) == 0 {
		return "", fmt.Errorf("no authority of the rule verifies %s signatures", kindName(kind))
	}
	return "", errors.New(strings.Join(errs, "; "))
}

func kindName(kind string) string {
	if kind == NotationArtifactType {
		return "Notation"
	}
	return "Sigstore"
}
