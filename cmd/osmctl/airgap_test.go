package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAirGap carries a plugin into an "air-gapped" registry with save and load, stops the registry it came
// from, and renders and lints with a profile that points at the copy.
func TestAirGap(t *testing.T) {
	public, airgap := newRegistry(t, nil), newRegistry(t, nil)
	ref := pushTemplate(t, public, "osm/template:0.1.0")
	digest := ref[strings.Index(ref, "@")+1:]
	publicOSP := profileWithImage(t, ref)

	bundle := filepath.Join(t.TempDir(), "plugins.tar")
	// The profile pins the digest; the tag is given too, so that it exists in the air-gapped registry as well.
	r := mustSucceed(t, osmctl(t, "plugin", "save", "--plain-http", "-f", publicOSP, public.host+"/osm/template:0.1.0", "-o", bundle))
	if strings.TrimSpace(r.stdout) != ref {
		t.Errorf("save printed %q, want %s", r.stdout, ref)
	}
	public.srv.Close()

	r = mustSucceed(t, osmctl(t, "plugin", "load", "--plain-http", bundle, "--to", airgap.host))
	loaded := strings.TrimSpace(r.stdout)
	if want := airgap.host + "/osm/template@" + digest; loaded != want {
		t.Fatalf("load printed %q, want %s (same repository path and digest)", loaded, want)
	}

	airgapOSP := profileWithImage(t, loaded)
	before := airgap.requests.Load()
	// A fresh cache directory: the module must come from the air-gapped registry, not from a cache.
	r = mustSucceed(t, osmctl(t, "render", "-f", "testdata/md-exampleos.yaml", "--osp", airgapOSP, "--plugin-registry-plain-http", "--stage", "both"))
	if airgap.requests.Load() == before {
		t.Error("render did not pull from the air-gapped registry")
	}
	for _, want := range []string{"#cloud-config", "/etc/sysctl.d/90-osm.conf", "NTP=time.example.com"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("rendered user-data lacks %q:\n%s", want, r.stdout)
		}
	}
	mustSucceed(t, osmctl(t, "lint", "-f", airgapOSP, "--plugin-registry-plain-http"))

	// The loaded tag resolves to the same digest, and the copy is byte for byte the module that was pushed.
	r = mustSucceed(t, osmctl(t, "plugin", "inspect", "--plain-http", "-o", "json", airgap.host+"/osm/template:0.1.0"))
	if !strings.Contains(r.stdout, `"manifestDigest": "`+digest+`"`) {
		t.Errorf("the loaded tag does not resolve to %s:\n%s", digest, r.stdout)
	}
}

func TestSaveLoadStreams(t *testing.T) {
	src, dst := newRegistry(t, nil), newRegistry(t, nil)
	ref := pushTemplate(t, src, "osm/template:0.1.0")
	saved := mustSucceed(t, osmctl(t, "plugin", "save", "--plain-http", src.host+"/osm/template:0.1.0", "-o", "-"))
	if !strings.Contains(saved.stderr, "saved "+ref) {
		t.Errorf("save to stdout must report on stderr: %s", saved)
	}
	r := mustSucceed(t, osmctlIn(t, bytes.NewReader([]byte(saved.stdout)), "plugin", "load", "--plain-http", "-", "--to", dst.host+"/mirror"))
	want := dst.host + "/mirror/osm/template@" + ref[strings.Index(ref, "@")+1:]
	if strings.TrimSpace(r.stdout) != want {
		t.Errorf("load printed %q, want %s", r.stdout, want)
	}
}

func TestSaveIsReproducible(t *testing.T) {
	reg := newRegistry(t, nil)
	ref := pushTemplate(t, reg, "osm/template:0.1.0")
	dir := t.TempDir()
	var bundles [][]byte
	for _, name := range []string{"a.tar", "b.tar"} {
		p := filepath.Join(dir, name)
		mustSucceed(t, osmctl(t, "plugin", "save", "--plain-http", ref, "-o", p))
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		bundles = append(bundles, data)
	}
	if !bytes.Equal(bundles[0], bundles[1]) {
		t.Error("saving the same artifacts twice gave different tarballs")
	}
}

func TestMirror(t *testing.T) {
	src, dst := newRegistry(t, nil), newRegistry(t, nil)
	ref := pushTemplate(t, src, "osm/template:0.1.0")
	digest := ref[strings.Index(ref, "@")+1:]
	tests := []struct {
		name, src, dst, want string
		tag                  string // a tag that must resolve to the digest afterwards
	}{
		{name: "keeps the tag", src: src.host + "/osm/template:0.1.0", dst: dst.host + "/mirror/template",
			want: dst.host + "/mirror/template@" + digest, tag: dst.host + "/mirror/template:0.1.0"},
		{name: "new tag", src: ref, dst: dst.host + "/other/template:stable",
			want: dst.host + "/other/template@" + digest, tag: dst.host + "/other/template:stable"},
		{name: "by digest", src: ref, dst: dst.host + "/bydigest/template", want: dst.host + "/bydigest/template@" + digest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustSucceed(t, osmctl(t, "plugin", "mirror", "--plain-http", tt.src, tt.dst))
			if got := strings.TrimSpace(r.stdout); got != tt.want {
				t.Errorf("mirror printed %q, want %s", got, tt.want)
			}
			if tt.tag != "" {
				out := filepath.Join(t.TempDir(), "p.wasm")
				p := mustSucceed(t, osmctl(t, "plugin", "pull", "--plain-http", tt.tag, "-o", out))
				if strings.TrimSpace(p.stdout) != tt.want {
					t.Errorf("%s resolves to %q, want %s", tt.tag, p.stdout, tt.want)
				}
			}
		})
	}
}
