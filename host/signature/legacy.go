package signature

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/osmhq/osm/host/oci"
	"github.com/osmhq/osm/host/signature/verifyproc"
)

// cosign's older signature layout, still its default before its bundle format: a manifest tagged
// "sha256-<hex>.sig" in the artifact's repository, one layer per signature, each a simple-signing payload that
// names the signed manifest digest, with the base64 signature in a layer annotation. Only key signatures are
// read in this layout (its certificate-based form needs a transparency log bundle, which the bundle format
// carries better). verifyproc.Gather fetches them.
const (
	// SimpleSigningMediaType is the media type of a cosign simple-signing payload layer.
	SimpleSigningMediaType = verifyproc.SimpleSigningMediaType
	// SignatureAnnotation holds a simple-signing layer's base64 signature.
	SignatureAnnotation = verifyproc.SignatureAnnotation
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

// checkLegacy verifies one simple-signing layer against the rule's key authorities.
func (v *Verifier) checkLegacy(ev *verifyproc.Evidence, l *verifyproc.Legacy) (string, error) {
	sig, err := base64.StdEncoding.DecodeString(l.Descriptor.Annotations[SignatureAnnotation])
	if err != nil || len(sig) == 0 {
		return "", errors.New("no signature annotation")
	}
	if l.FetchErr != "" {
		return "", errors.New(l.FetchErr)
	}
	payload := l.Payload
	var errs []string
	for _, t := range v.authorities {
		for _, k := range t.raw {
			if err := k.VerifySignature(bytes.NewReader(sig), bytes.NewReader(payload)); err == nil {
				// Only a payload the key signed is read.
				var ss simpleSigning
				if err := json.Unmarshal(payload, &ss); err != nil {
					return "", fmt.Errorf("payload: %w", err)
				}
				if ss.Critical.Image.DockerManifestDigest != ev.ManifestDigest.String() {
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
