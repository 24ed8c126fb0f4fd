package verifyproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"

	"github.com/osmhq/osm/host/oci"
)

// Media and artifact types of the signatures gathered (cosign's, Notation's).
const (
	// BundleMediaType is the artifact type of a Sigstore bundle attached to an image as a referrer, and the
	// media type of its one layer (the bundle JSON), as cosign writes them.
	BundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"
	// NotationArtifactType is the artifact type of a Notation signature attached as a referrer (notation-go's
	// registry.ArtifactTypeNotation, which a test compares against).
	NotationArtifactType = "application/vnd.cncf.notary.signature"
	// SimpleSigningMediaType is the media type of a cosign simple-signing payload layer.
	SimpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	// SignatureAnnotation holds a simple-signing layer's base64 signature.
	SignatureAnnotation = "dev.cosignproject.cosign/signature"
	// MaxLegacySignatures bounds the layers of a ".sig" manifest that are gathered.
	MaxLegacySignatures = 32
	// emptyConfig is the config media type of an artifact manifest; some registries report it as the
	// referrer's artifact type instead of the manifest's artifactType.
	emptyConfig = "application/vnd.oci.empty.v1+json"
)

// Evidence is what the registry holds about an artifact's signatures, fetched by the controller (which has the
// pull credentials) for the verifier process (which has none and reads nothing else). Fetch failures of one
// signature are recorded with it: they refuse that signature, not the others.
type Evidence struct {
	Reference      string        `json:"reference"`
	ManifestDigest digest.Digest `json:"manifestDigest"`
	// Target is the manifest's descriptor, which a Notation payload names: fetched when a Notation
	// signature is among the referrers; TargetErr says why it could not be.
	Target    *ocispec.Descriptor `json:"target,omitempty"`
	TargetErr string              `json:"targetErr,omitempty"`
	// Referrers are the referrers that may be signatures (Sigstore bundles, Notation envelopes).
	Referrers []Referrer `json:"referrers,omitempty"`
	// Legacy are the simple-signing layers of cosign's ".sig" manifest.
	Legacy []Legacy `json:"legacy,omitempty"`
}

// Referrer is one referrer of the artifact and, unless FetchErr, its manifest and only layer.
type Referrer struct {
	Descriptor ocispec.Descriptor `json:"descriptor"`
	FetchErr   string             `json:"fetchErr,omitempty"`
	// Kind is the manifest's artifact type (its config media type where it has none).
	Kind           string         `json:"kind,omitempty"`
	Subject        *digest.Digest `json:"subject,omitempty"`
	Layer          []byte         `json:"layer,omitempty"`
	LayerMediaType string         `json:"layerMediaType,omitempty"`
}

// IsSignature says whether the referrer counts as a signature: a refused one is reported as such.
func (r *Referrer) IsSignature() bool {
	if r.FetchErr != "" {
		return r.Descriptor.ArtifactType == BundleMediaType || r.Descriptor.ArtifactType == NotationArtifactType
	}
	return r.Kind == BundleMediaType || r.Kind == NotationArtifactType
}

// Legacy is one layer of cosign's ".sig" manifest and, unless FetchErr, its payload.
type Legacy struct {
	Descriptor ocispec.Descriptor `json:"descriptor"`
	Payload    []byte             `json:"payload,omitempty"`
	FetchErr   string             `json:"fetchErr,omitempty"`
}

// RegistryError is a registry that could not say which signatures the artifact has: reported (and retried)
// like a failed pull, not as a refused signature.
type RegistryError struct{ Detail string }

func (e *RegistryError) Error() string { return e.Detail }

// Gather fetches the evidence of art's signatures through client: at most oci.MaxReferrers referrers and
// MaxLegacySignatures cosign signatures, each at most oci.MaxAttachmentSize, and no more than MaxEvidence bytes
// of signatures in all (a signature past it is recorded as not fetched).
func Gather(ctx context.Context, client *oci.Client, art *oci.Artifact) (*Evidence, error) {
	ev := &Evidence{Reference: art.Reference, ManifestDigest: art.ManifestDigest}
	descs, err := signatureReferrers(ctx, client, art.Reference)
	if err != nil {
		return nil, &RegistryError{Detail: fmt.Sprintf("cannot list its signatures: %v", err)}
	}
	legacy, err := legacySignatures(ctx, client, art)
	if err != nil {
		return nil, &RegistryError{Detail: fmt.Sprintf("cannot read its cosign signatures (%s): %v", oci.LegacySignatureTag(art.ManifestDigest), err)}
	}
	notation := false
	room := MaxEvidence
	for _, d := range descs {
		r := Referrer{Descriptor: d}
		att, err := client.FetchAttachment(ctx, art.Reference, d)
		if err != nil {
			r.FetchErr = err.Error()
			ev.Referrers = append(ev.Referrers, r)
			continue
		}
		r.Kind = att.Manifest.ArtifactType
		if r.Kind == "" {
			r.Kind = att.Manifest.Config.MediaType // the OCI rule for manifests without artifactType; notation writes these
		}
		if r.IsSignature() {
			if room -= len(att.Layer); room < 0 {
				r.FetchErr = fmt.Sprintf("the signatures of %s exceed %d bytes", art.ManifestDigest, MaxEvidence)
				ev.Referrers = append(ev.Referrers, r)
				continue
			}
			r.Layer, r.LayerMediaType = att.Layer, att.LayerMediaType
		}
		if att.Manifest.Subject != nil {
			r.Subject = &att.Manifest.Subject.Digest
		}
		notation = notation || r.Kind == NotationArtifactType
		ev.Referrers = append(ev.Referrers, r)
	}
	if notation {
		if _, d, err := client.FetchManifest(ctx, art.Reference); err != nil {
			ev.TargetErr = err.Error()
		} else if d.Digest != art.ManifestDigest {
			ev.TargetErr = fmt.Sprintf("the registry describes %s as %s", art.ManifestDigest, d.Digest)
		} else {
			ev.Target = &d
		}
	}
	for _, l := range legacy {
		g := Legacy{Descriptor: l}
		if g.Payload, err = client.FetchBlob(ctx, art.Reference, l); err != nil {
			g.FetchErr = err.Error()
		} else if room -= len(g.Payload); room < 0 {
			g.Payload, g.FetchErr = nil, fmt.Sprintf("the signatures of %s exceed %d bytes", art.ManifestDigest, MaxEvidence)
		}
		ev.Legacy = append(ev.Legacy, g)
	}
	return ev, nil
}

// signatureReferrers lists the referrers of ref that may be signatures. The filtering is done here, not by
// the registry: registries that report a referrer's config media type as its artifact type would otherwise
// hide every signature. Gather reads the artifact type from the manifest itself.
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

// legacySignatures returns the simple-signing layers of the artifact's ".sig" manifest; none when there is no
// such tag.
func legacySignatures(ctx context.Context, client *oci.Client, art *oci.Artifact) ([]ocispec.Descriptor, error) {
	repo := art.Reference[:strings.LastIndex(art.Reference, "@")]
	raw, _, err := client.FetchManifest(ctx, repo+":"+oci.LegacySignatureTag(art.ManifestDigest))
	if errors.Is(err, errdef.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("cosign signature manifest: %w", err)
	}
	var out []ocispec.Descriptor
	for _, l := range m.Layers {
		if l.MediaType == SimpleSigningMediaType && len(out) < MaxLegacySignatures {
			out = append(out, l)
		}
	}
	return out, nil
}
