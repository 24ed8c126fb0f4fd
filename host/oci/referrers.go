package oci

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/registry/remote"
)

// Signatures and other attachments live beside an artifact as OCI 1.1 referrers: manifests whose subject is the
// artifact's manifest. Registries that serve the referrers API list them there; for the others, oras keeps the
// list in the fallback tag "sha256-<hex>" of the same repository, which Referrers reads the same way.

// MaxReferrers bounds the referrers of one artifact that Referrers returns: a registry may list thousands, and
// each costs a fetch to check.
const MaxReferrers = 32

// MaxAttachmentSize bounds an attachment's manifest and its blob. A Sigstore bundle with a certificate chain is a
// few kilobytes.
const MaxAttachmentSize = 1 << 20

var errEnoughReferrers = errors.New("enough referrers")

// Referrers lists up to MaxReferrers manifests whose subject is the artifact ref (a reference pinned by digest,
// or a tag, which is resolved first) and whose artifactType is artifactType ("" for any).
func (c *Client) Referrers(ctx context.Context, ref, artifactType string) ([]ocispec.Descriptor, error) {
	pinnedRef, md, err := c.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	r, _ := parse(pinnedRef)
	repo := c.repository(r)
	subject, err := repo.Resolve(ctx, md.String())
	if err != nil {
		return nil, fmt.Errorf("referrers of %s: %w", pinnedRef, err)
	}
	var out []ocispec.Descriptor
	err = repo.Referrers(ctx, subject, artifactType, func(page []ocispec.Descriptor) error {
		for _, d := range page {
			if len(out) == MaxReferrers {
				return errEnoughReferrers
			}
			out = append(out, d)
		}
		return nil
	})
	if err != nil && !errors.Is(err, errEnoughReferrers) {
		return nil, fmt.Errorf("referrers of %s: %w", pinnedRef, err)
	}
	return out, nil
}

// Attachment is a referrer's manifest and its single layer.
type Attachment struct {
	Manifest ocispec.Manifest
	// Layer is the content of the manifest's only layer.
	Layer []byte
	// LayerMediaType is that layer's media type.
	LayerMediaType string
}

// FetchAttachment fetches the referrer desc of the repository of ref: its manifest, which must hash to
// desc.Digest and have exactly one layer, and that layer, which must hash to the digest the manifest gives. Both
// are bounded by MaxAttachmentSize.
func (c *Client) FetchAttachment(ctx context.Context, ref string, desc ocispec.Descriptor) (*Attachment, error) {
	r, err := parse(ref)
	if err != nil {
		return nil, err
	}
	repo := c.repository(r)
	if desc.Size > MaxAttachmentSize {
		return nil, fmt.Errorf("attachment %s is %d bytes, more than the %d allowed", desc.Digest, desc.Size, MaxAttachmentSize)
	}
	_, rc, err := repo.Manifests().FetchReference(ctx, desc.Digest.String())
	if err != nil {
		return nil, fmt.Errorf("attachment %s: fetch manifest: %w", desc.Digest, err)
	}
	raw, err := readLimited(rc, MaxAttachmentSize)
	rc.Close()
	if err != nil {
		return nil, fmt.Errorf("attachment %s: read manifest: %w", desc.Digest, err)
	}
	if got := digest.FromBytes(raw); got != desc.Digest {
		return nil, fmt.Errorf("attachment %s: the registry returned a manifest with digest %s", desc.Digest, got)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("attachment %s: manifest is not JSON: %w", desc.Digest, err)
	}
	if len(m.Layers) != 1 {
		return nil, fmt.Errorf("attachment %s: %d layers, want one", desc.Digest, len(m.Layers))
	}
	layer := m.Layers[0]
	if layer.Size < 0 || layer.Size > MaxAttachmentSize {
		return nil, fmt.Errorf("attachment %s: layer of %d bytes, more than the %d allowed", desc.Digest, layer.Size, MaxAttachmentSize)
	}
	if err := layer.Digest.Validate(); err != nil {
		return nil, fmt.Errorf("attachment %s: layer digest: %w", desc.Digest, err)
	}
	lrc, err := repo.Blobs().Fetch(ctx, layer)
	if err != nil {
		return nil, fmt.Errorf("attachment %s: fetch layer: %w", desc.Digest, err)
	}
	data, err := readLimited(lrc, layer.Size)
	lrc.Close()
	if err != nil {
		return nil, fmt.Errorf("attachment %s: read layer: %w", desc.Digest, err)
	}
	if got := digest.FromBytes(data); got != layer.Digest {
		return nil, fmt.Errorf("attachment %s: layer digest mismatch: the manifest says %s, the registry returned %s", desc.Digest, layer.Digest, got)
	}
	return &Attachment{Manifest: m, Layer: data, LayerMediaType: layer.MediaType}, nil
}

// Attach pushes blob as an artifact of type artifactType whose subject is the artifact ref, so that Referrers
// of ref lists it, and returns the attachment's manifest digest. The blob is the manifest's only layer, of
// mediaType.
func (c *Client) Attach(ctx context.Context, ref, artifactType, mediaType string, blob []byte, annotations map[string]string) (digest.Digest, error) {
	pinnedRef, md, err := c.Resolve(ctx, ref)
	if err != nil {
		return "", err
	}
	r, _ := parse(pinnedRef)
	repo := c.repository(r)
	subject, err := repo.Resolve(ctx, md.String())
	if err != nil {
		return "", fmt.Errorf("attach to %s: %w", pinnedRef, err)
	}
	layer := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(blob), Size: int64(len(blob))}
	if err := pushIfMissing(ctx, repo, layer, blob); err != nil {
		return "", fmt.Errorf("attach to %s: %w", pinnedRef, err)
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	if _, ok := annotations[ocispec.AnnotationCreated]; !ok {
		// A fixed time keeps the attachment's digest a function of its content.
		annotations[ocispec.AnnotationCreated] = "1970-01-01T00:00:00Z"
	}
	desc, err := oras.PackManifest(ctx, repo, oras.PackManifestVersion1_1, artifactType, oras.PackManifestOptions{
		Subject: &subject, Layers: []ocispec.Descriptor{layer}, ManifestAnnotations: annotations,
	})
	if err != nil {
		return "", fmt.Errorf("attach to %s: %w", pinnedRef, err)
	}
	return desc.Digest, nil
}

// PushManifest pushes raw as a manifest of mediaType to ref's repository, tagged with ref's tag if it has
// one: for tests that forge what a hostile registry could serve, and for tools that copy manifests as they
// are.
func (c *Client) PushManifest(ctx context.Context, ref, mediaType string, raw []byte) (digest.Digest, error) {
	r, err := parse(ref)
	if err != nil {
		return "", err
	}
	repo := c.repository(r)
	desc := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(raw), Size: int64(len(raw))}
	if r.Reference != "" && r.ValidateReferenceAsTag() == nil {
		err = repo.PushReference(ctx, desc, bytes.NewReader(raw), r.Reference)
	} else {
		err = repo.Push(ctx, desc, bytes.NewReader(raw))
	}
	if err != nil {
		return "", fmt.Errorf("push manifest to %s: %w", ref, err)
	}
	return desc.Digest, nil
}

// FetchManifest returns the raw manifest ref names (tag or digest), bounded by MaxAttachmentSize.
func (c *Client) FetchManifest(ctx context.Context, ref string) ([]byte, ocispec.Descriptor, error) {
	r, err := parse(ref)
	if err != nil {
		return nil, ocispec.Descriptor{}, err
	}
	desc, rc, err := c.repository(r).Manifests().FetchReference(ctx, r.Reference)
	if err != nil {
		return nil, desc, fmt.Errorf("fetch manifest %s: %w", ref, err)
	}
	defer rc.Close()
	raw, err := readLimited(rc, MaxAttachmentSize)
	return raw, desc, err
}

// PushBlob pushes data to ref's repository unless it is there already.
func (c *Client) PushBlob(ctx context.Context, ref, mediaType string, data []byte) (ocispec.Descriptor, error) {
	r, err := parse(ref)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	desc := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(data), Size: int64(len(data))}
	return desc, pushIfMissing(ctx, c.repository(r), desc, data)
}

// Repository returns the oras repository of ref, with this client's credentials and transport: for signing
// libraries (Notation) that push and read through oras themselves.
func (c *Client) Repository(ref string) (*remote.Repository, error) {
	r, err := parse(ref)
	if err != nil {
		return nil, err
	}
	return c.repository(r), nil
}

// FetchBlob fetches the blob desc of ref's repository, at most MaxAttachmentSize bytes, and checks its digest.
func (c *Client) FetchBlob(ctx context.Context, ref string, desc ocispec.Descriptor) ([]byte, error) {
	r, err := parse(ref)
	if err != nil {
		return nil, err
	}
	if desc.Size < 0 || desc.Size > MaxAttachmentSize {
		return nil, fmt.Errorf("blob %s of %d bytes: more than the %d allowed", desc.Digest, desc.Size, MaxAttachmentSize)
	}
	if err := desc.Digest.Validate(); err != nil {
		return nil, fmt.Errorf("blob digest: %w", err)
	}
	rc, err := c.repository(r).Blobs().Fetch(ctx, desc)
	if err != nil {
		return nil, fmt.Errorf("fetch blob %s: %w", desc.Digest, err)
	}
	defer rc.Close()
	data, err := readLimited(rc, desc.Size)
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", desc.Digest, err)
	}
	if got := digest.FromBytes(data); got != desc.Digest {
		return nil, fmt.Errorf("blob digest mismatch: want %s, the registry returned %s", desc.Digest, got)
	}
	return data, nil
}
