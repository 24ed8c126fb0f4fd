package oci

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
)

func TestPushPullRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		tls  bool
		opts Options
	}{
		{name: "plain HTTP"},
		{name: "TLS with CA bundle", tls: true},
		{name: "TLS without verification", tls: true, opts: Options{InsecureSkipTLSVerify: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			reg := newRegistry(t, tt.tls, nil)
			tt.opts.CacheDir = t.TempDir()
			c := reg.client(t, tt.opts)
			module := fakeModule(tt.name)

			pushed, err := c.Push(ctx, reg.host+"/osm/ubuntu:1.0.0", module, map[string]string{"org.opencontainers.image.version": "1.0.0"})
			if err != nil {
				t.Fatal(err)
			}
			if pushed.ModuleDigest != digest.FromBytes(module) || !strings.HasPrefix(pushed.Reference, reg.host+"/osm/ubuntu@sha256:") {
				t.Errorf("push result %+v", pushed)
			}
			again, err := c.Push(ctx, reg.host+"/osm/ubuntu:latest", module, map[string]string{"org.opencontainers.image.version": "1.0.0"})
			if err != nil || again.ManifestDigest != pushed.ManifestDigest {
				t.Errorf("pushing the same module again gave digest %v (err %v), want %s: pushes must be reproducible", again, err, pushed.ManifestDigest)
			}

			ref, d, err := c.Resolve(ctx, reg.host+"/osm/ubuntu:1.0.0")
			if err != nil || d != pushed.ManifestDigest || ref != pushed.Reference {
				t.Fatalf("Resolve(tag) = %s, %s, %v; want %s", ref, d, err, pushed.Reference)
			}
			for _, pullRef := range []string{reg.host + "/osm/ubuntu:1.0.0", pushed.Reference} {
				a, err := c.Pull(ctx, pullRef)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(a.Module, module) || a.ManifestDigest != pushed.ManifestDigest || a.Annotations["org.opencontainers.image.version"] != "1.0.0" {
					t.Errorf("Pull(%s) = %+v", pullRef, a)
				}
			}
			a, err := c.Pull(ctx, pushed.Reference)
			if err != nil || !a.FromCache {
				t.Errorf("third pull: FromCache = %v, err = %v; want it served from the cache", a != nil && a.FromCache, err)
			}
		})
	}
}

func TestPullRejects(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		tamper  func(http.Handler) http.Handler
		push    func(t *testing.T, c *Client, host string) string
		wantErr string
	}{
		{
			name: "layer replaced in transit",
			// Same length, so only the digest check can catch it.
			tamper: replaceBody("/blobs/sha256:", []byte("\x00asm\x01\x00\x00\x00evil!")),
			push: func(t *testing.T, c *Client, host string) string {
				a, err := c.Push(ctx, host+"/osm/p:1", fakeModule("good!"), nil)
				if err != nil {
					t.Fatal(err)
				}
				return a.Reference
			},
			wantErr: "module digest mismatch",
		},
		{
			name:   "manifest replaced in transit",
			tamper: replaceBody("/manifests/sha256:", []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json"}`)),
			push: func(t *testing.T, c *Client, host string) string {
				a, err := c.Push(ctx, host+"/osm/p:1", fakeModule("good"), nil)
				if err != nil {
					t.Fatal(err)
				}
				return a.Reference
			},
			wantErr: "manifest digest mismatch",
		},
		{
			name: "container image layer",
			push: func(t *testing.T, c *Client, host string) string {
				return pushRaw(t, c, host+"/osm/p:1", MediaTypeWasmConfig, "application/vnd.oci.image.layer.v1.tar+gzip", []byte("tar"))
			},
			wantErr: `layer media type "application/vnd.oci.image.layer.v1.tar+gzip", want "application/wasm"`,
		},
		{
			name: "container image config",
			push: func(t *testing.T, c *Client, host string) string {
				return pushRaw(t, c, host+"/osm/p:1", "application/vnd.oci.image.config.v1+json", MediaTypeWasmLayer, fakeModule("x"))
			},
			wantErr: `config media type "application/vnd.oci.image.config.v1+json"`,
		},
		{
			name: "unknown tag",
			push: func(t *testing.T, c *Client, host string) string {
				return host + "/osm/missing:1"
			},
			wantErr: "resolve",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := newRegistry(t, false, tt.tamper)
			c := reg.client(t, Options{CacheDir: t.TempDir()})
			ref := tt.push(t, c, reg.host)
			_, err := c.Pull(ctx, ref)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Pull() error = %v, want it to contain %q", err, tt.wantErr)
			}
			if entries, _ := os.ReadDir(filepath.Join(c.opts.CacheDir, "blobs", "sha256")); len(entries) != 0 {
				t.Errorf("a rejected artifact left %d blobs in the cache", len(entries))
			}
		})
	}
}

func TestPullAcceptsLegacyLayerType(t *testing.T) {
	reg := newRegistry(t, false, nil)
	c := reg.client(t, Options{})
	module := fakeModule("legacy")
	ref := pushRaw(t, c, reg.host+"/osm/legacy:1", MediaTypeWasmConfig, MediaTypeWasmLayerLegacy, module)
	a, err := c.Pull(context.Background(), ref)
	if err != nil || !bytes.Equal(a.Module, module) {
		t.Fatalf("Pull() = %v, %v", a, err)
	}
}

// replaceBody makes the registry answer GETs whose path contains marker with body instead.
func replaceBody(marker string, body []byte) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet || !strings.Contains(r.URL.Path, marker) {
				next.ServeHTTP(w, r)
				return
			}
			rec := &headerRecorder{header: http.Header{}}
			next.ServeHTTP(rec, r)
			for k, v := range rec.header {
				w.Header()[k] = v
			}
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
			w.WriteHeader(rec.status)
			_, _ = w.Write(body)
		})
	}
}

type headerRecorder struct {
	header http.Header
	status int
}

func (h *headerRecorder) Header() http.Header         { return h.header }
func (h *headerRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (h *headerRecorder) WriteHeader(s int)           { h.status = s }

func TestAuth(t *testing.T) {
	requireAuth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != "robot" || p != "s3cret" {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	reg := newRegistry(t, true, requireAuth)
	dockerConfig := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, reg.host, base64.StdEncoding.EncodeToString([]byte("robot:s3cret")))

	ctx := context.Background()
	authed := reg.client(t, Options{DockerConfig: []byte(dockerConfig)})
	a, err := authed.Push(ctx, reg.host+"/private/p:1", fakeModule("secret"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := authed.Pull(ctx, a.Reference); err != nil {
		t.Fatal(err)
	}
	anonymous := reg.client(t, Options{})
	if _, err := anonymous.Pull(ctx, a.Reference); err == nil || !strings.Contains(err.Error(), "credential") {
		t.Errorf("anonymous pull: err = %v, want a missing-credential error", err)
	}
	if _, err := NewClient(Options{DockerConfig: []byte("{not json")}); err == nil {
		t.Error("NewClient accepted a malformed docker config")
	}
	if _, err := NewClient(Options{CABundle: []byte("not pem")}); err == nil {
		t.Error("NewClient accepted a CA bundle without certificates")
	}
}

func TestUntrustedTLSIsRefused(t *testing.T) {
	reg := newRegistry(t, true, nil)
	c, err := NewClient(Options{}) // system roots only
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Resolve(context.Background(), reg.host+"/osm/p:1"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("Resolve against an untrusted certificate: err = %v", err)
	}
}

func TestCopySaveLoad(t *testing.T) {
	ctx := context.Background()
	src, mirror, airgap := newRegistry(t, false, nil), newRegistry(t, false, nil), newRegistry(t, false, nil)
	c := src.client(t, Options{})
	ubuntu, err := c.Push(ctx, src.host+"/osm/ubuntu:1.0.0", fakeModule("ubuntu"), nil)
	if err != nil {
		t.Fatal(err)
	}
	flatcar, err := c.Push(ctx, src.host+"/osm/flatcar:2.0.0", fakeModule("flatcar"), nil)
	if err != nil {
		t.Fatal(err)
	}

	copied, err := c.Copy(ctx, src.host+"/osm/ubuntu:1.0.0", mirror.host+"/mirror/ubuntu")
	if err != nil {
		t.Fatal(err)
	}
	if want := mirror.host + "/mirror/ubuntu@" + ubuntu.ManifestDigest.String(); copied != want {
		t.Errorf("Copy() = %s, want %s", copied, want)
	}
	if _, d, err := c.Resolve(ctx, mirror.host+"/mirror/ubuntu:1.0.0"); err != nil || d != ubuntu.ManifestDigest {
		t.Errorf("copied tag resolves to %s (%v), want %s", d, err, ubuntu.ManifestDigest)
	}

	var archive bytes.Buffer
	if err := c.Save(ctx, []string{src.host + "/osm/ubuntu:1.0.0", flatcar.Reference}, &archive); err != nil {
		t.Fatal(err)
	}
	loaded, err := c.Load(ctx, bytes.NewReader(archive.Bytes()), airgap.host+"/")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		airgap.host + "/osm/ubuntu@" + ubuntu.ManifestDigest.String():   true,
		airgap.host + "/osm/flatcar@" + flatcar.ManifestDigest.String(): true,
	}
	if len(loaded) != 2 || !want[loaded[0]] || !want[loaded[1]] {
		t.Errorf("Load() = %v, want %v", loaded, want)
	}
	if _, d, err := c.Resolve(ctx, airgap.host+"/osm/ubuntu:1.0.0"); err != nil || d != ubuntu.ManifestDigest {
		t.Errorf("loaded tag resolves to %s (%v), want %s", d, err, ubuntu.ManifestDigest)
	}
	for _, ref := range loaded {
		if _, err := c.Pull(ctx, ref); err != nil {
			t.Errorf("pull loaded %s: %v", ref, err)
		}
	}
}

func TestCacheIsVerifiedOnRead(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t, false, nil)
	c := reg.client(t, Options{CacheDir: t.TempDir()})
	a, err := c.Push(ctx, reg.host+"/osm/p:1", fakeModule("cached"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pull(ctx, a.Reference); err != nil {
		t.Fatal(err)
	}
	blob := filepath.Join(c.opts.CacheDir, "blobs", "sha256", a.ModuleDigest.Encoded())
	if err := os.WriteFile(blob, []byte("corrupted"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := c.Pull(ctx, a.Reference)
	if err != nil || got.FromCache || !bytes.Equal(got.Module, fakeModule("cached")) {
		t.Fatalf("pull over a corrupted cache: FromCache=%v err=%v; want a verified refetch", got != nil && got.FromCache, err)
	}

	reg.srv.Close() // the cache alone must serve a digest reference now
	got, err = c.Pull(ctx, a.Reference)
	if err != nil || !got.FromCache {
		t.Fatalf("offline pull: FromCache=%v err=%v", got != nil && got.FromCache, err)
	}
}

func writeOneFile(t *testing.T, w io.Writer, name string) {
	t.Helper()
	tw := newTarWriter(w)
	if err := tw.add(name, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}
