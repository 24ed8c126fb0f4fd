package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/testr"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/pluginhost"
	"github.com/osmhq/osm/host/signature/policy"
	"github.com/osmhq/osm/host/signature/verifyproc"
	sdkruntime "github.com/osmhq/osm/sdk/runtime"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"
)

// TestImage builds the image as `make image` does, pushes it to an in-process registry, pulls it back like a
// container runtime would and checks it: upstream's binary paths, the webhook link, a non-root user, the
// entrypoint, the CA bundle, the version label, and that the binary in the layer says its version — as
// osm-controller -version and as webhook -help (the same binary invoked under upstream's webhook path).
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the controller")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	certs := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(certs, []byte("-----BEGIN CERTIFICATE-----\ntest\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := Options{Root: root, Version: "v0.1.0-test", Arch: runtime.GOARCH, CACerts: certs}
	bins, err := Binaries(o, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := Image(o, bins)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(registry.New())
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()
	repo, err := remote.NewRepository(host + "/osmhq/osm-controller")
	if err != nil {
		t.Fatal(err)
	}
	repo.PlainHTTP = true
	if err := Push(ctx, repo, b, o.Version); err != nil {
		t.Fatal(err)
	}

	// Pulled back by tag.
	desc, rc, err := repo.FetchReference(ctx, o.Version)
	if err != nil {
		t.Fatal(err)
	}
	manifestData, err := content.ReadAll(rc, desc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(manifestData, &m); err != nil {
		t.Fatal(err)
	}
	if desc.MediaType != ocispec.MediaTypeImageManifest || len(m.Layers) != 1 {
		t.Fatalf("manifest %s with %d layers", desc.MediaType, len(m.Layers))
	}
	var cfg ocispec.Image
	if err := json.Unmarshal(fetch(t, repo, m.Config), &cfg); err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.Config.Entrypoint, " ") != ControllerPath || cfg.Config.User != "65532:65532" || cfg.OS != "linux" ||
		cfg.Architecture != runtime.GOARCH || cfg.Config.Labels[ocispec.AnnotationVersion] != o.Version {
		t.Errorf("image config: %+v", cfg)
	}

	files := untar(t, fetch(t, repo, m.Layers[0]))
	for path, want := range map[string]struct {
		typ  byte
		mode int64
	}{
		"usr/local/bin/osm-controller": {tar.TypeReg, 0o755}, "usr/local/bin/osmctl": {tar.TypeReg, 0o755},
		"usr/local/bin/osm-plugin-host": {tar.TypeReg, 0o755}, "usr/local/bin/osm-plugin-verify": {tar.TypeReg, 0o755},
		"usr/local/bin/webhook": {tar.TypeSymlink, 0o777}, "etc/ssl/certs/ca-certificates.crt": {tar.TypeReg, 0o644},
		"etc/passwd": {tar.TypeReg, 0o644}, "tmp/": {tar.TypeDir, 0o1777},
	} {
		f, ok := files[path]
		if !ok || f.hdr.Typeflag != want.typ || f.hdr.Mode != want.mode {
			t.Errorf("%s in the layer: %+v, want type %c mode %o", path, f.hdr, want.typ, want.mode)
		}
	}
	if l := files["usr/local/bin/webhook"].hdr.Linkname; l != "osm-controller" {
		t.Errorf("webhook links to %q", l)
	}

	// The binaries from the layer run here (static linux binaries).
	dir := t.TempDir()
	bin := filepath.Join(dir, "osm-controller")
	if err := os.WriteFile(bin, files["usr/local/bin/osm-controller"].data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "-version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "osm-controller "+o.Version+" (commit ") {
		t.Errorf("osm-controller -version from the image: %q (%v)", out, err)
	}
	if err := os.Symlink("osm-controller", filepath.Join(dir, "webhook")); err != nil {
		t.Fatal(err)
	}
	out, _ = exec.Command(filepath.Join(dir, "webhook"), "-help").CombinedOutput()
	if !strings.Contains(string(out), "-cert-dir") {
		t.Errorf("webhook -help from the image does not take upstream's webhook flags:\n%s", out)
	}
	osmctl := filepath.Join(dir, "osmctl")
	if err := os.WriteFile(osmctl, files["usr/local/bin/osmctl"].data, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(osmctl, "version").CombinedOutput(); err != nil || !strings.HasPrefix(string(out), o.Version+" (commit ") {
		t.Errorf("osmctl version from the image: %q (%v)", out, err)
	}
	hostFromTheImage(t, files, dir)
	verifierFromTheImage(t, files, dir)
	t.Logf("image %s: layer %d bytes compressed", b.ManifestDesc.Digest, m.Layers[0].Size)
}

// verifierFromTheImage has the image's signature verifier, beside the controller as the controller finds it,
// answer a request: an artifact with no signature under an enforcing rule is refused as SignatureMissing.
func verifierFromTheImage(t *testing.T, files map[string]tarFile, dir string) {
	t.Helper()
	bin := filepath.Join(dir, verifyproc.Executable)
	if err := os.WriteFile(bin, files[VerifierPath[1:]].data, 0o755); err != nil {
		t.Fatal(err)
	}
	req := &verifyproc.Request{Version: verifyproc.Version, Trust: policy.Trust{Policy: "osm-system/p", Rule: policy.Rule{Name: "r", Mode: policy.ModeEnforce}},
		Evidence: verifyproc.Evidence{Reference: "registry.test/osm/x@sha256:" + strings.Repeat("0", 64), ManifestDigest: digest.Digest("sha256:" + strings.Repeat("0", 64))}}
	resp, err := (&verifyproc.Runner{Path: bin}).Run(context.Background(), req)
	if err != nil || resp.Refusal == nil || resp.Refusal.Reason != osmv1alpha1.ReasonSignatureMissing {
		t.Errorf("the image's verifier answered %+v, %v; want a SignatureMissing refusal", resp, err)
	}
}

// hostFromTheImage runs the image's plugin host with the image's precompiled default plugins, as a pod does:
// loading the ubuntu plugin compiles nothing (every compiled-code entry of its cache is still a link to the
// shipped code), and the image ships no test binaries' entries.
func hostFromTheImage(t *testing.T, files map[string]tarFile, dir string) {
	t.Helper()
	compiled := filepath.Join(dir, "compiled")
	prefix := PrecompiledPath[1:] + "/"
	for name, f := range files {
		rel, ok := strings.CutPrefix(name, prefix)
		if !ok || f.hdr.Typeflag != tar.TypeReg {
			continue
		}
		if strings.Contains(rel, "wazero-dev-") || strings.HasPrefix(rel, "osm-snapshots/unknown") {
			t.Errorf("the image ships the test binaries' %s", rel)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(compiled, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(compiled, rel), f.data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	host := filepath.Join(dir, "osm-plugin-host")
	if err := os.WriteFile(host, files["usr/local/bin/osm-plugin-host"].data, 0o755); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	arts, err := pluginhost.SeedBuiltins(cache, compiled)
	if err != nil {
		t.Fatal(err)
	}
	// No host can write its cache: a compile from scratch shows only in the compile event's layer.
	var mu sync.Mutex
	var layers []sdkruntime.CacheLayer
	hooks := sdkruntime.Hooks{Compiled: func(e sdkruntime.CompileEvent) { mu.Lock(); layers = append(layers, e.Layer); mu.Unlock() }}
	s, err := pluginhost.New(pluginhost.Config{Executable: host, Host: pluginhost.HostConfig{CacheDir: cache, Artifacts: arts}, Hooks: hooks, Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wasm, err := os.ReadFile(filepath.Join("..", "..", "plugins", "dist", "ubuntu.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	m := pluginhost.Module{Name: "ubuntu", Digest: sdkruntime.Digest(wasm), Builtin: true, Bytes: func() ([]byte, func(), error) { return wasm, func() {}, nil }}
	if _, err := s.Load(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	entries := 0
	err = filepath.WalkDir(cache, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.Contains(path, "wazero-") {
			return err
		}
		entries++
		if d.Type()&fs.ModeSymlink == 0 {
			t.Errorf("the image's host compiled %s", path)
		}
		return nil
	})
	if err != nil || entries == 0 {
		t.Errorf("compiled code in the host's cache: %d entries (%v)", entries, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(layers) != 1 || layers[0] != sdkruntime.LayerDisk {
		t.Errorf("the image's host compiled ubuntu from %v, want the shipped code (disk) once", layers)
	}
}

func fetch(t *testing.T, repo *remote.Repository, desc ocispec.Descriptor) []byte {
	t.Helper()
	rc, err := repo.Fetch(context.Background(), desc)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, err := content.ReadAll(rc, desc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

type tarFile struct {
	hdr  tar.Header
	data []byte
}

func untar(t *testing.T, layer []byte) map[string]tarFile {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(layer))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := map[string]tarFile{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = tarFile{hdr: *h, data: data}
	}
}
