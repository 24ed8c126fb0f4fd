package oci

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/opencontainers/go-digest"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/errdef"
)

// Copy copies the plugin artifact src to dst and returns dst pinned by digest. dst may name a tag
// ("registry/repo:tag"); without one the source's tag is kept, or, for a source given by digest, the artifact
// is pushed by digest only. The digest does not change, so profiles pinned to it keep working against the copy.
// The artifact's referrers (its signatures) are copied with it, so a verified mirror stays verifiable.
func (c *Client) Copy(ctx context.Context, src, dst string) (string, error) {
	// Pull verifies the source (layout, digests) and warms the cache; copying an unverified artifact to an
	// air-gapped registry would only move the problem.
	if _, err := c.Pull(ctx, src); err != nil {
		return "", err
	}
	s, err := parse(src)
	if err != nil {
		return "", err
	}
	d, err := parse(dst)
	if err != nil {
		return "", err
	}
	_, md, err := c.Resolve(ctx, src)
	if err != nil {
		return "", err
	}
	srcRef := md.String()
	dstRef := d.Reference
	if dstRef == "" {
		dstRef = s.Reference
		if _, err := s.Digest(); err == nil {
			dstRef = md.String()
		}
	}
	desc, err := oras.ExtendedCopy(ctx, c.repository(s), srcRef, c.repository(d), dstRef, withReferrers)
	if err != nil {
		return "", fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	if _, err := copyIfTagged(ctx, c.repository(s), c.repository(d), LegacySignatureTag(md)); err != nil {
		return "", fmt.Errorf("copy the cosign signatures of %s: %w", src, err)
	}
	return pinned(d, desc.Digest), nil
}

// withReferrers copies an artifact with the manifests that refer to it directly (signatures, Sigstore bundles,
// Notation signatures), and not their own referrers: what a verifier of the artifact reads, and no more.
var withReferrers = oras.ExtendedCopyOptions{ExtendedCopyGraphOptions: oras.ExtendedCopyGraphOptions{Depth: 1}}

// LegacySignatureTag is the tag under which cosign's older layout keeps the signatures of the manifest md in
// the same repository ("sha256-<hex>.sig"). Copy, Save and Load carry it with the artifact.
func LegacySignatureTag(md digest.Digest) string {
	return md.Algorithm().String() + "-" + md.Encoded() + ".sig"
}

// isLegacySignatureTag reports whether tag is a LegacySignatureTag.
func isLegacySignatureTag(tag string) bool {
	d := strings.TrimSuffix(tag, ".sig")
	if d == tag {
		return false
	}
	if i := strings.Index(d, "-"); i > 0 {
		return digest.Digest(d[:i]+":"+d[i+1:]).Validate() == nil
	}
	return false
}

// copyIfTagged copies the manifest tagged tag in src to dst under the same tag, if src has it.
func copyIfTagged(ctx context.Context, src oras.ReadOnlyTarget, dst oras.Target, tag string) (bool, error) {
	if _, err := src.Resolve(ctx, tag); errors.Is(err, errdef.ErrNotFound) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if _, err := oras.Copy(ctx, src, tag, dst, tag, oras.DefaultCopyOptions); err != nil {
		return false, err
	}
	return true, nil
}
