package signature

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"

	"github.com/osmhq/osm/host/oci"
)

// cosign's older signature layout, still its default before its bundle format: a manifest tagged
// "sha256-<hex>.sig" in the artifact's repository, one layer per signature, each a simple-signing payload that
// names the signed manifest digest, with the base64 signature in a layer annotation. Only key signatures are
// read in this layout (its certificate-based form needs a transparency log bundle, which the bundle format
// carries better).
const (
	// SimpleSigningMediaType is the media type of a cosign simple-signing payload layer.
	SimpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	// SignatureAnnotation holds a simple-signing layer's base64 signature.
	SignatureAnnotation = "dev.cosignproject.cosign/signature"
	// maxLegacySignatures bounds the layers of a ".sig" manifest that are checked.
	maxLegacySignatures = 32
)

// simpleSigning is the part of a simple-signing payload that binds it.
type simpleSigning struct {
	Critical struct {
		Image struct {
			DockerManifestDigest string `json:"docker-manifest-digest"`
		} `json:"image"`
		Type string `json:"type"`
	} `json:"critical"`
}

// LegacyTag is the tag of an artifact's cosign ".sig" manifest.
func LegacyTag(md digest.Digest) string { return oci.LegacySignatureTag(md) }

// legacySignatures returns the simple-signing layers of the artifact's ".sig" manifest; none when there is no
// such tag.
func legacySignatures(ctx context.Context, client *oci.Client, art *oci.Artifact) ([]ocispec.Descriptor, error) {
	repo := art.Reference[:strings.LastIndex(art.Reference, "@")]
	raw, _, err := client.FetchManifest(ctx, repo+":"+LegacyTag(art.ManifestDigest))
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
		if l.MediaType == SimpleSigningMediaType && len(out) < maxLegacySignatures {
			out = append(out, l)
		}
	}
	return out, nil
}

// checkLegacy verifies one simple-signing layer against the rule's key authorities.
func (v *Verifier) checkLegacy(ctx context.Context, client *oci.Client, art *oci.Artifact, layer ocispec.Descriptor) (string, error) {
	sig, err := base64.StdEncoding.DecodeString(layer.Annotations[SignatureAnnotation])
	if err != nil || len(sig) == 0 {
		return "", errors.New("no signature annotation")
	}
	payload, err := client.FetchBlob(ctx, art.Reference, layer)
	if err != nil {
		return "", err
	}
	var errs []string
	for _, t := range v.authorities {
		for _, k := range t.raw {
			if err := k.VerifySignature(bytes.NewReader(sig), bytes.NewReader(payload)); err == nil {
				// Only a payload the key signed is read.
				var ss simpleSigning
				if err := json.Unmarshal(payload, &ss); err != nil {
					return "", fmt.Errorf("payload: %w", err)
				}
				if ss.Critical.Image.DockerManifestDigest != art.ManifestDigest.String() {
					return "", fmt.Errorf("%s: it signs %q, not this artifact", t.name, ss.Critical.Image.DockerManifestDigest)
				}
				return t.name, nil
			}
		}
		if len(t.raw) > 0 {
			errs = append(errs, t.name+": no key verifies it")
		}
	}
	if len(errs) == 0 {
		return "", errors.New("no key authority of the rule verifies cosign's key signatures")
	}
	return "", errors.New(strings.Join(errs, "; "))
}

// LegacyPayload is the simple-signing payload cosign signs for the manifest digest md of the image name.
func LegacyPayload(name string, md digest.Digest) []byte {
	b, _ := json.Marshal(map[string]any{"critical": map[string]any{
		"identity": map[string]string{"docker-reference": name},
		"image":    map[string]string{"docker-manifest-digest": md.String()},
		"type":     "cosign container image signature",
	}, "optional": nil})
	return b
}
