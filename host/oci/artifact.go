package oci

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry"
)

// Media types of the CNCF wasm artifact layout.
const (
	MediaTypeWasmConfig = "application/vnd.wasm.config.v0+json"
	MediaTypeWasmLayer  = "application/wasm"
	// MediaTypeWasmLayerLegacy is written by older tools; Pull accepts it.
	MediaTypeWasmLayerLegacy = "application/vnd.wasm.content.layer.v1+wasm"
)

// Artifact is a pulled (or pushed) plugin module.
type Artifact struct {
	// Reference is the artifact pinned by manifest digest: "registry/repository@sha256:...".
	Reference string
	// ManifestDigest is the digest of the artifact's manifest: what an OSP pins.
	ManifestDigest digest.Digest
	// ModuleDigest is the digest of the module itself (the layer), the key the runtime caches compiled code by.
	ModuleDigest digest.Digest
	// Module is the WebAssembly module. Empty for Push results.
	Module []byte
	// Annotations are the manifest's annotations.
	Annotations map[string]string
	// FromCache is true when nothing was fetched from the registry.
	FromCache bool
	// MediaTypes are the media types of the manifest, its config and the module layer.
	MediaTypes MediaTypes
}

// MediaTypes describe an artifact's layout.
type MediaTypes struct {
	Manifest string `json:"manifest"`
	// ArtifactType is the manifest's artifactType field, usually empty for wasm artifacts.
	ArtifactType string `json:"artifactType,omitempty"`
	Config       string `json:"config"`
	Layer        string `json:"layer"`
}

// wasmConfig is the config blob of the CNCF wasm layout.
type wasmConfig struct {
	Architecture string          `json:"architecture"`
	OS           string          `json:"os"`
	LayerDigests []digest.Digest `json:"layerDigests"`
}

// Push uploads module as a wasm artifact to ref ("registry/repository:tag", or without a tag to push by
// digest only) and returns the pinned reference. The manifest holds no timestamp unless annotations set one,
// so pushing the same module twice gives the same digest.
func (c *Client) Push(ctx context.Context, ref string, module []byte, annotations map[string]string) (*Artifact, error) {
	r, err := parse(ref)
	if err != nil {
		return nil, err
	}
	if _, err := r.Digest(); err == nil {
		return nil, fmt.Errorf("push to %s: give a tag or no reference, not a digest", ref)
	}
	repo := c.repository(r)
	layer := ocispec.Descriptor{MediaType: MediaTypeWasmLayer, Digest: digest.FromBytes(module), Size: int64(len(module))}
	config, err := json.Marshal(wasmConfig{Architecture: "wasm", OS: "wasip1", LayerDigests: []digest.Digest{layer.Digest}})
	if err != nil {
		return nil, err
	}
	configDesc := ocispec.Descriptor{MediaType: MediaTypeWasmConfig, Digest: digest.FromBytes(config), Size: int64(len(config))}
	for _, blob := range []struct {
		desc ocispec.Descriptor
		data []byte
	}{{configDesc, config}, {layer, module}} {
		if err := pushIfMissing(ctx, repo, blob.desc, blob.data); err != nil {
			return nil, fmt.Errorf("push %s: %w", ref, err)
		}
	}
	manifest, err := json.Marshal(ocispec.Manifest{
		Versioned:   specs.Versioned{SchemaVersion: 2},
		MediaType:   ocispec.MediaTypeImageManifest,
		Config:      configDesc,
		Layers:      []ocispec.Descriptor{layer},
		Annotations: annotations,
	})
	if err != nil {
		return nil, err
	}
	mdesc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(manifest), Size: int64(len(manifest))}
	if r.Reference != "" {
		err = repo.PushReference(ctx, mdesc, bytes.NewReader(manifest), r.Reference)
	} else {
		err = repo.Push(ctx, mdesc, bytes.NewReader(manifest))
	}
	if err != nil {
		return nil, fmt.Errorf("push %s: %w", ref, err)
	}
	return &Artifact{Reference: pinned(r, mdesc.Digest), ManifestDigest: mdesc.Digest, ModuleDigest: layer.Digest, Annotations: annotations,
		MediaTypes: MediaTypes{Manifest: ocispec.MediaTypeImageManifest, Config: MediaTypeWasmConfig, Layer: MediaTypeWasmLayer}}, nil
}

func pushIfMissing(ctx context.Context, repo interface {
	Exists(context.Context, ocispec.Descriptor) (bool, error)
	Push(context.Context, ocispec.Descriptor, io.Reader) error
}, desc ocispec.Descriptor, data []byte) error {
	if ok, err := repo.Exists(ctx, desc); err == nil && ok {
		return nil
	}
	if err := repo.Push(ctx, desc, bytes.NewReader(data)); err != nil && !errors.Is(err, errdef.ErrAlreadyExists) {
		return err
	}
	return nil
}

// Resolve returns ref pinned by manifest digest. A reference that already has a digest is returned as is
// without contacting the registry; a tag is resolved once, and the digest is what callers should run and
// record, since the tag may move.
func (c *Client) Resolve(ctx context.Context, ref string) (string, digest.Digest, error) {
	r, err := parse(ref)
	if err != nil {
		return "", "", err
	}
	if d, err := r.Digest(); err == nil {
		return pinned(r, d), d, nil
	}
	if r.Reference == "" {
		r.Reference = "latest"
	}
	desc, err := c.repository(r).Resolve(ctx, r.Reference)
	if err != nil {
		return "", "", fmt.Errorf("resolve %s: %w", ref, err)
	}
	return pinned(r, desc.Digest), desc.Digest, nil
}

// Pull fetches the plugin module of ref. A tag is resolved to a digest first (see Resolve). The manifest must
// hash to the digest, be a wasm artifact with exactly one wasm layer, and the layer must hash to the digest the
// manifest gives; anything else is an error that says which check failed. Verified blobs are cached.
//
// The whole pull is bounded by Options.PullTimeout. An artifact in the cache is served without contacting the
// registry only to credentials the registry granted it before; other credentials first prove access with a
// HEAD of the manifest.
func (c *Client) Pull(ctx context.Context, ref string) (*Artifact, error) {
	if c.opts.PullTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.opts.PullTimeout, errPullDeadline)
		defer cancel()
	}
	a, err := c.pull(ctx, ref)
	if err != nil && errors.Is(context.Cause(ctx), errPullDeadline) {
		return nil, fmt.Errorf("pull %s: gave up after %s (the pull deadline; is the registry slow or stalled?): %w", ref, c.opts.PullTimeout, err)
	}
	return a, err
}

// errPullDeadline is the cause of a pull's context ending at Options.PullTimeout.
var errPullDeadline = errors.New("pull deadline exceeded")

func (c *Client) pull(ctx context.Context, ref string) (*Artifact, error) {
	pinnedRef, md, err := c.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	r, _ := parse(pinnedRef)
	repo := c.repository(r)
	manifestBytes, mCached := c.cache.get(md)
	granted := c.cache.granted(c.credID, pinnedRef)
	if mCached && !granted {
		// Someone else's credentials put the manifest here; ask the registry whether ours may have it.
		if _, err := repo.Manifests().Resolve(ctx, md.String()); err != nil {
			return nil, fmt.Errorf("pull %s: check access: %w", pinnedRef, err)
		}
	}
	if !mCached {
		_, rc, err := repo.Manifests().FetchReference(ctx, md.String())
		if err != nil {
			return nil, fmt.Errorf("pull %s: fetch manifest: %w", pinnedRef, err)
		}
		manifestBytes, err = readLimited(rc, maxManifestSize)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("pull %s: read manifest: %w", pinnedRef, err)
		}
		if got := digest.FromBytes(manifestBytes); got != md {
			return nil, fmt.Errorf("pull %s: manifest digest mismatch: the registry returned content with digest %s; refusing it", pinnedRef, got)
		}
	}
	manifest, err := wasmManifest(manifestBytes)
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", pinnedRef, err)
	}
	layer := manifest.Layers[0]
	if layer.Size > c.opts.MaxModuleSize {
		return nil, fmt.Errorf("pull %s: module is %d bytes, more than the %d allowed", pinnedRef, layer.Size, c.opts.MaxModuleSize)
	}
	module, lCached := c.cache.get(layer.Digest)
	if !lCached {
		rc, err := repo.Blobs().Fetch(ctx, layer)
		if err != nil {
			return nil, fmt.Errorf("pull %s: fetch module %s: %w", pinnedRef, layer.Digest, err)
		}
		module, err = readLimited(rc, layer.Size)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("pull %s: read module: %w", pinnedRef, err)
		}
		if got := digest.FromBytes(module); got != layer.Digest || int64(len(module)) != layer.Size {
			return nil, fmt.Errorf("pull %s: module digest mismatch: the manifest says %s (%d bytes), the registry returned %s (%d bytes); refusing it",
				pinnedRef, layer.Digest, layer.Size, got, len(module))
		}
	}
	// Cache only after both checks passed, so the cache never holds a manifest whose module failed them.
	if !mCached {
		_ = c.cache.put(md, manifestBytes)
	}
	if !lCached {
		_ = c.cache.put(layer.Digest, module)
	}
	if !granted {
		_ = c.cache.grant(c.credID, pinnedRef)
	}
	return &Artifact{Reference: pinnedRef, ManifestDigest: md, ModuleDigest: layer.Digest, Module: module,
		Annotations: manifest.Annotations, FromCache: mCached && lCached,
		MediaTypes: MediaTypes{Manifest: manifest.MediaType, ArtifactType: manifest.ArtifactType, Config: manifest.Config.MediaType, Layer: layer.MediaType}}, nil
}

// wasmManifest checks that a manifest describes a wasm plugin artifact: exactly one layer, the module.
func wasmManifest(manifestBytes []byte) (*ocispec.Manifest, error) {
	var m ocispec.Manifest
	if err := json.Unmarshal(manifestBytes, &m); err != nil {
		return nil, fmt.Errorf("manifest is not JSON: %w", err)
	}
	switch m.MediaType {
	case ocispec.MediaTypeImageManifest, "":
	default:
		return nil, fmt.Errorf("not a wasm plugin artifact: manifest media type %q, want %q", m.MediaType, ocispec.MediaTypeImageManifest)
	}
	if m.Config.MediaType != MediaTypeWasmConfig && m.ArtifactType != MediaTypeWasmConfig {
		return nil, fmt.Errorf("not a wasm plugin artifact: config media type %q, want %q", m.Config.MediaType, MediaTypeWasmConfig)
	}
	if len(m.Layers) != 1 {
		return nil, fmt.Errorf("not a wasm plugin artifact: %d layers, want exactly one %s layer", len(m.Layers), MediaTypeWasmLayer)
	}
	layer := m.Layers[0]
	if layer.MediaType != MediaTypeWasmLayer && layer.MediaType != MediaTypeWasmLayerLegacy {
		return nil, fmt.Errorf("not a wasm plugin artifact: layer media type %q, want %q", layer.MediaType, MediaTypeWasmLayer)
	}
	if err := layer.Digest.Validate(); err != nil {
		return nil, fmt.Errorf("layer digest %q: %w", layer.Digest, err)
	}
	if layer.Size < 0 {
		return nil, fmt.Errorf("layer size %d is negative", layer.Size)
	}
	return &m, nil
}

// readLimited reads at most limit bytes and fails if there are more.
func readLimited(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("content exceeds %d bytes", limit)
	}
	return b, nil
}

// pinned formats "registry/repository@digest".
func pinned(r registry.Reference, d digest.Digest) string {
	return r.Registry + "/" + r.Repository + "@" + d.String()
}
