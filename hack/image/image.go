package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
)

// Paths in the image. Upstream OSM's image has /usr/local/bin/osm-controller and /usr/local/bin/webhook, and
// its manifests call them by those paths; OSM's webhook is the controller binary invoked as "webhook".
const (
	ControllerPath = "/usr/local/bin/osm-controller"
	WebhookPath    = "/usr/local/bin/webhook"
	OsmctlPath     = "/usr/local/bin/osmctl"
	// HostPath is the dedicated plugin host, next to the controller, where the controller looks for it.
	HostPath = "/usr/local/bin/osm-plugin-host"
	// VerifierPath is the plugin signature verifier, next to the controller, where the controller looks for it.
	VerifierPath = "/usr/local/bin/osm-plugin-verify"
	CACertsPath  = "/etc/ssl/certs/ca-certificates.crt"
	// NonRoot is the image's user (distroless's nonroot).
	NonRoot = "65532"
)

// Options say what to build.
type Options struct {
	// Root is the repository.
	Root string
	// Version is stamped into the binaries (buildinfo.Version) and the image's labels.
	Version string
	// Arch is the GOARCH (linux only).
	Arch string
	// CACerts is the CA bundle copied into the image, for plugin registries over TLS.
	CACerts string
	// Created is the image's creation time; the zero time keeps the image reproducible.
	Created time.Time
}

// Binaries builds osm-controller, osmctl, osm-plugin-host and osm-plugin-verify for the image into dir: static (CGO off), trimmed, with the version
// and the VCS revision stamped. The default plugins must be built first (hack/build-plugins.sh): the controller
// embeds them.
func Binaries(o Options, dir string) (map[string]string, error) {
	out := map[string]string{}
	for name, pkg := range map[string]string{"osm-controller": "./cmd/osm-controller", "osmctl": "./cmd/osmctl", "osm-plugin-host": "./cmd/osm-plugin-host",
		"osm-plugin-verify": "./cmd/osm-plugin-verify"} {
		bin := filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=true",
			"-ldflags", "-s -w -X github.com/osmhq/osm/host/buildinfo.Version="+o.Version, "-o", bin, pkg)
		cmd.Dir = o.Root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+o.Arch)
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building %s: %w\n%s", name, err, b)
		}
		out[name] = bin
	}
	return out, nil
}

// Built is an OCI image: its manifest, config and one layer, each with its descriptor.
type Built struct {
	Manifest, Config, Layer             []byte
	ManifestDesc, ConfigDesc, LayerDesc ocispec.Descriptor
}

// Image assembles the image from the binaries Binaries built: one gzip layer with the binaries, the webhook
// link, the CA bundle, /tmp and a passwd entry for the non-root user; entrypoint osm-controller, like upstream's.
func Image(o Options, bins map[string]string) (*Built, error) {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	mtime := o.Created
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, ModTime: mtime})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: mtime}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, d := range []string{"etc", "etc/ssl", "etc/ssl/certs", "usr", "usr/local", "usr/local/bin"} {
		if err := dir(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := dir("tmp", 0o1777); err != nil {
		return nil, err
	}
	if err := dir(PrecompiledPath[1:], 0o755); err != nil {
		return nil, err
	}
	for _, b := range []struct{ path, bin string }{{ControllerPath, bins["osm-controller"]}, {OsmctlPath, bins["osmctl"]}, {HostPath, bins["osm-plugin-host"]},
		{VerifierPath, bins["osm-plugin-verify"]}} {
		data, err := os.ReadFile(b.bin)
		if err != nil {
			return nil, err
		}
		if err := file(b.path[1:], 0o755, data); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: WebhookPath[1:], Linkname: "osm-controller", Mode: 0o777, ModTime: mtime}); err != nil {
		return nil, err
	}
	if err := addPrecompiled(o, dir, file); err != nil {
		return nil, err
	}
	certs, err := os.ReadFile(o.CACerts)
	if err != nil {
		return nil, fmt.Errorf("CA bundle for the image: %w", err)
	}
	if err := file(CACertsPath[1:], 0o644, certs); err != nil {
		return nil, err
	}
	if err := file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:"+NonRoot+":"+NonRoot+":nonroot:/home/nonroot:/sbin/nologin\n")); err != nil {
		return nil, err
	}
	if err := file("etc/group", 0o644, []byte("root:x:0:\nnonroot:x:"+NonRoot+":\n")); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	b := &Built{Layer: gz.Bytes()}
	b.LayerDesc = content.NewDescriptorFromBytes(ocispec.MediaTypeImageLayerGzip, b.Layer)
	created := mtime
	cfg := ocispec.Image{
		Created:  &created,
		Platform: ocispec.Platform{OS: "linux", Architecture: o.Arch},
		Config: ocispec.ImageConfig{
			Entrypoint: []string{ControllerPath},
			User:       NonRoot + ":" + NonRoot,
			WorkingDir: "/",
			Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=" + CACertsPath},
			Labels: map[string]string{
				ocispec.AnnotationTitle:   "osm-controller",
				ocispec.AnnotationVersion: o.Version,
				ocispec.AnnotationSource:  "https://github.com/osmhq/osm",
			},
		},
		RootFS:  ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{digest.FromBytes(raw.Bytes())}},
		History: []ocispec.History{{Created: &created, CreatedBy: "hack/image " + o.Version}},
	}
	if b.Config, err = json.Marshal(cfg); err != nil {
		return nil, err
	}
	b.ConfigDesc = content.NewDescriptorFromBytes(ocispec.MediaTypeImageConfig, b.Config)
	m := ocispec.Manifest{
		Versioned:   specs.Versioned{SchemaVersion: 2},
		MediaType:   ocispec.MediaTypeImageManifest,
		Config:      b.ConfigDesc,
		Layers:      []ocispec.Descriptor{b.LayerDesc},
		Annotations: map[string]string{ocispec.AnnotationVersion: o.Version, ocispec.AnnotationSource: "https://github.com/osmhq/osm"},
	}
	if b.Manifest, err = json.Marshal(m); err != nil {
		return nil, err
	}
	b.ManifestDesc = content.NewDescriptorFromBytes(ocispec.MediaTypeImageManifest, b.Manifest)
	return b, nil
}

// Push stores the image in target (a registry repository or an OCI layout) and tags it.
func Push(ctx context.Context, target oras.Target, b *Built, tag string) error {
	for _, blob := range []struct {
		desc ocispec.Descriptor
		data []byte
	}{{b.LayerDesc, b.Layer}, {b.ConfigDesc, b.Config}, {b.ManifestDesc, b.Manifest}} {
		if err := target.Push(ctx, blob.desc, bytes.NewReader(blob.data)); err != nil && !errors.Is(err, errdef.ErrAlreadyExists) {
			return fmt.Errorf("pushing %s: %w", blob.desc.Digest, err)
		}
	}
	return target.Tag(ctx, b.ManifestDesc, tag)
}

// PrecompiledPath is where the image ships the default plugins' machine code: next to the controller, where
// plugins.PrecompiledDir finds it, so that a new pod never compiles a default plugin.
const PrecompiledPath = "/usr/local/bin/osm-plugins-compiled"

// addPrecompiled adds what make plugins compiled (plugins/compiled) for the image's architecture and for
// binaries that know their wazero version (not the test binaries' "dev" and "unknown" entries). Another
// architecture's image ships none: its pods compile the default plugins once per pod.
func addPrecompiled(o Options, dir func(string, int64) error, file func(string, int64, []byte) error) error {
	src := filepath.Join(o.Root, "plugins", "compiled")
	if _, err := os.Stat(filepath.Join(src, "stamp")); err != nil {
		return fmt.Errorf("no precompiled default plugins in %s: run make plugins", src)
	}
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil || rel == "." {
			return err
		}
		name := filepath.ToSlash(rel)
		top, _, _ := strings.Cut(name, "/")
		switch {
		case strings.HasPrefix(top, "wazero-") && (strings.HasPrefix(top, "wazero-dev-") || !strings.HasSuffix(top, "-"+o.Arch+"-linux")),
			name == "osm-snapshots/unknown":
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		case d.IsDir():
			return dir(PrecompiledPath[1:]+"/"+name, 0o755)
		case !d.Type().IsRegular():
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return file(PrecompiledPath[1:]+"/"+name, 0o644, data)
	})
}
