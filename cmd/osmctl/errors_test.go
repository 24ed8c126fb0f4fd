package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"

	"github.com/osmhq/osm/host/oci"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
)

// TestErrors checks that every way a command can fail is one clear line on stderr and a non-zero exit.
func TestErrors(t *testing.T) {
	dir := t.TempDir()
	template := buildPlugin(t, templatePluginDir, "template.wasm")
	abiV2 := buildPlugin(t, abiV2PluginDir, "abiv2.wasm")
	notWasm := filepath.Join(dir, "notes.wasm")
	if err := os.WriteFile(notWasm, []byte("just text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")

	reg := newRegistry(t, nil)
	pushContainerImage(t, reg.host, "osm/nginx:1.27")
	templateRef := pushTemplate(t, reg, "osm/template:0.1.0")
	stopped := newRegistry(t, nil)
	stopped.srv.Close()
	unreachableRef := stopped.host + "/osm/template@" + strings.SplitN(templateRef, "@", 2)[1]
	unreachableOSP := profileWithImage(t, unreachableRef)
	tagOSP := profileWithImage(t, reg.host+"/osm/template:0.1.0")
	_, tlsCA := newTLSRegistry(t)

	tests := []struct {
		name     string
		args     []string
		want     []string
		wantCode int
	}{
		// Bad references.
		{name: "reference without a registry", args: []string{"plugin", "pull", "template", "-o", filepath.Join(dir, "p.wasm")},
			want: []string{`invalid image reference "template"`}},
		{name: "upper-case repository", args: []string{"plugin", "inspect", reg.host + "/OSM/Template:1"},
			want: []string{"invalid image reference", "OSM/Template"}},
		{name: "push to a digest", args: []string{"plugin", "push", "--plain-http", template, reg.host + "/osm/t@sha256:" + strings.Repeat("a", 64)},
			want: []string{"give a tag or no reference, not a digest"}},
		{name: "push an OCI reference", args: []string{"plugin", "push", templateRef, reg.host + "/osm/copy:1"},
			want: []string{"push takes a module file", "osmctl plugin mirror"}},
		{name: "unknown tag", args: []string{"plugin", "inspect", "--plain-http", reg.host + "/osm/template:9.9.9"},
			want: []string{"resolve", "osm/template:9.9.9", "not found"}},
		{name: "profile image pinned by tag", args: []string{"render", "-f", "testdata/md-exampleos.yaml", "--osp", tagOSP, "--plugin-registry-plain-http"},
			want: []string{"is not pinned by digest", "@sha256:<digest>"}},

		// Unreachable registries.
		{name: "unreachable registry", args: []string{"plugin", "pull", "--plain-http", unreachableRef, "-o", filepath.Join(dir, "p.wasm")},
			want: []string{stopped.host, "connection refused"}},
		{name: "unreachable registry in render", args: []string{"render", "-f", "testdata/md-exampleos.yaml", "--osp", unreachableOSP, "--plugin-registry-plain-http"},
			want: []string{"rendering workers with profile osp-exampleos", stopped.host, "connection refused"}},
		{name: "unreachable registry in lint", args: []string{"lint", "-f", unreachableOSP, "--plugin-registry-plain-http"},
			want: []string{"spec.plugin.image", "connection refused"}},
		// A local registry gets plain HTTP without a flag (TestLocalRegistryNeedsNoFlag) unless a CA file says
		// it speaks TLS; then the mismatch is an error with the fix.
		{name: "HTTPS to a plain HTTP registry", args: []string{"plugin", "inspect", "--ca-file", tlsCA, templateRef},
			want: []string{"HTTP response to HTTPS client", "--plain-http"}},
		{name: "missing registry config", args: []string{"plugin", "pull", "--registry-config", missing, templateRef, "-o", filepath.Join(dir, "p.wasm")},
			want: []string{"--registry-config: " + missing + " does not exist"}},

		// Artifacts that are not wasm plugins.
		{name: "container image", args: []string{"plugin", "pull", "--plain-http", reg.host + "/osm/nginx:1.27", "-o", filepath.Join(dir, "p.wasm")},
			want: []string{"not a wasm plugin artifact", `config media type "application/vnd.oci.image.config.v1+json"`, oci.MediaTypeWasmConfig}},
		{name: "container image in mirror", args: []string{"plugin", "mirror", "--plain-http", reg.host + "/osm/nginx:1.27", reg.host + "/mirror/nginx"},
			want: []string{"not a wasm plugin artifact"}},
		{name: "not a WebAssembly file", args: []string{"plugin", "inspect", notWasm},
			want: []string{notWasm, "is not a WebAssembly module"}},

		// ABI mismatch: refused at load, before anything is run or published.
		{name: "ABI v2 inspect", args: []string{"plugin", "inspect", abiV2},
			want: []string{`plugin "` + abiV2 + `"`, "osm_metadata failed: ABIMismatch", `"v2"`, "ABI v1"}},
		{name: "ABI v2 run", args: []string{"plugin", "run", abiV2, "--input", filepath.Join(templatePluginDir, "testdata", "provisioning.request.json")},
			want: []string{"ABIMismatch"}},
		{name: "ABI v2 push", args: []string{"plugin", "push", "--plain-http", abiV2, reg.host + "/osm/abiv2:2.0.0"},
			want: []string{"ABIMismatch"}},

		// Missing files.
		{name: "missing module", args: []string{"plugin", "inspect", missing + ".wasm"},
			want: []string{"plugin module " + missing + ".wasm does not exist"}},
		{name: "missing module to push", args: []string{"plugin", "push", missing + ".wasm", reg.host + "/osm/x:1"},
			want: []string{"does not exist"}},
		{name: "missing request", args: []string{"plugin", "run", template, "--input", missing + ".json"},
			want: []string{"reading the render request", "no such file"}},
		{name: "missing MachineDeployment for run", args: []string{"plugin", "run", template, "--md", missing + ".yaml"},
			want: []string{missing + ".yaml", "no such file"}},
		{name: "missing bundle", args: []string{"plugin", "load", missing + ".tar", "--to", reg.host},
			want: []string{"bundle " + missing + ".tar does not exist"}},
		{name: "missing profile to save", args: []string{"plugin", "save", "-f", missing + ".yaml", "-o", filepath.Join(dir, "b.tar")},
			want: []string{missing + ".yaml"}},
		{name: "missing MachineDeployment for render", args: []string{"render", "-f", missing + ".yaml"},
			want: []string{missing + ".yaml", "no such file"}},
		{name: "missing profile for lint", args: []string{"lint", "-f", missing + ".yaml"},
			want: []string{missing + ".yaml", "no such file"}},
		{name: "missing profile for diff", args: []string{"diff", "-f", "testdata/md-exampleos.yaml", "--from", missing + ".yaml", "--to", missing + ".yaml"},
			want: []string{missing + ".yaml", "no such file"}, wantCode: 2},

		// Usage errors.
		{name: "run without a request", args: []string{"plugin", "run", template},
			want: []string{"at least one of the flags", "input", "md"}},
		{name: "bad stage", args: []string{"plugin", "run", template, "--md", "testdata/md-exampleos.yaml", "--stage", "both"},
			want: []string{`--stage "both"`}},
		{name: "bad output format", args: []string{"plugin", "inspect", template, "-o", "yaml"},
			want: []string{`--output "yaml"`}},
		{name: "nothing to save", args: []string{"plugin", "save", "-o", filepath.Join(dir, "b.tar")},
			want: []string{"nothing to save"}},
		{name: "diff flag error", args: []string{"diff", "--from"}, want: []string{"flag needs an argument"}, wantCode: 2},
		{name: "diff without flags", args: []string{"diff"}, want: []string{"required flag"}, wantCode: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := osmctl(t, tt.args...)
			assertOneLineError(t, r, tt.want...)
			if tt.args[0] != "lint" && !strings.HasPrefix(r.stderr, "osmctl: ") {
				t.Errorf("the error line does not start with osmctl: %s", r)
			}
			wantCode := tt.wantCode
			if wantCode == 0 {
				wantCode = 1
			}
			if r.code != wantCode {
				t.Errorf("exit status %d, want %d", r.code, wantCode)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "p.wasm")); err == nil {
		t.Error("a failed pull left an output file")
	}
}

// pushContainerImage pushes a (tiny, fake) container image: an OCI artifact that is not a plugin.
func pushContainerImage(t *testing.T, host, repoTag string) {
	t.Helper()
	ctx := context.Background()
	ref, err := registry.ParseReference(host + "/" + repoTag)
	if err != nil {
		t.Fatal(err)
	}
	repo := &remote.Repository{Reference: ref, PlainHTTP: true}
	config := []byte(`{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}`)
	layer := []byte("not really a tarball")
	cdesc := content.NewDescriptorFromBytes(ocispec.MediaTypeImageConfig, config)
	ldesc := content.NewDescriptorFromBytes(ocispec.MediaTypeImageLayerGzip, layer)
	for _, b := range []struct {
		desc ocispec.Descriptor
		data []byte
	}{{cdesc, config}, {ldesc, layer}} {
		if err := repo.Push(ctx, b.desc, bytes.NewReader(b.data)); err != nil {
			t.Fatal(err)
		}
	}
	manifest, err := json.Marshal(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		Config: cdesc, Layers: []ocispec.Descriptor{ldesc}})
	if err != nil {
		t.Fatal(err)
	}
	mdesc := content.NewDescriptorFromBytes(ocispec.MediaTypeImageManifest, manifest)
	if err := repo.PushReference(ctx, mdesc, bytes.NewReader(manifest), ref.Reference); err != nil {
		t.Fatal(err)
	}
}
