package oci

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// drip sends the bodies of blob and manifest GETs one byte per interval once enabled, like a registry
// under attack or a hostile one.
func drip(enabled *atomic.Bool, interval time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !enabled.Load() || r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/blobs/") {
				next.ServeHTTP(w, r)
				return
			}
			rec := &recorder{header: http.Header{}}
			next.ServeHTTP(rec, r)
			for k, v := range rec.header {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.status)
			for _, b := range rec.body {
				if _, err := w.Write([]byte{b}); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-time.After(interval):
				case <-r.Context().Done():
					return
				}
			}
		})
	}
}

type recorder struct {
	header http.Header
	status int
	body   []byte
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(s int)   { r.status = s }
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.body = append(r.body, b...)
	return len(b), nil
}

// TestPullDeadline: a registry that drips the module one byte a second would hold a pull for hours; the pull
// deadline ends it, with an error that says so.
func TestPullDeadline(t *testing.T) {
	var slow atomic.Bool
	reg := newRegistry(t, false, drip(&slow, time.Second))
	c := reg.client(t, Options{PullTimeout: 2 * time.Second})
	a, err := c.Push(context.Background(), reg.host+"/osm/slow:1", fakeModule(strings.Repeat("x", 300)), nil)
	if err != nil {
		t.Fatal(err)
	}
	slow.Store(true)
	start := time.Now()
	_, err = c.Pull(context.Background(), a.Reference)
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "gave up after 2s (the pull deadline") {
		t.Fatalf("Pull() error = %v, want the pull deadline", err)
	}
	if took > 6*time.Second {
		t.Errorf("the pull was abandoned after %s, want about the 2s deadline", took)
	}
}

// TestCacheServesOnlyGrantedCredentials replays the cross-namespace leak: a module cached by a pull with one
// namespace's pull Secret must not be served to a client without credentials, or with credentials the
// registry refuses, even though the bytes are on disk; credentials the registry accepts get it from the
// cache, and the original credentials need no registry at all.
func TestCacheServesOnlyGrantedCredentials(t *testing.T) {
	users := map[string]string{"team-a": "a-secret", "team-b": "b-secret"}
	var requests atomic.Int32
	reg := newRegistry(t, false, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			requests.Add(1)
			if u, p, ok := r.BasicAuth(); !ok || users[u] == "" || users[u] != p {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	creds := func(user, pass string) []byte {
		return []byte(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, reg.host, base64.StdEncoding.EncodeToString([]byte(user+":"+pass))))
	}
	cache := t.TempDir()
	ctx := context.Background()
	teamA := reg.client(t, Options{DockerConfig: creds("team-a", "a-secret"), CacheDir: cache})
	a, err := teamA.Push(ctx, reg.host+"/private/p:1", fakeModule("private"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := teamA.Pull(ctx, a.Reference); err != nil {
		t.Fatal(err)
	}

	for name, opts := range map[string]Options{
		"anonymous":         {CacheDir: cache},
		"wrong credentials": {DockerConfig: creds("team-a", "guess"), CacheDir: cache},
	} {
		c := reg.client(t, opts)
		if _, err := c.Pull(ctx, a.Reference); err == nil || !strings.Contains(err.Error(), "check access") {
			t.Errorf("%s: Pull() of a module cached for team-a: err = %v, want an access check failure", name, err)
		}
	}

	teamB := reg.client(t, Options{DockerConfig: creds("team-b", "b-secret"), CacheDir: cache})
	before := requests.Load()
	got, err := teamB.Pull(ctx, a.Reference)
	if err != nil || !got.FromCache {
		t.Fatalf("team-b, whom the registry accepts: FromCache=%v err=%v", got != nil && got.FromCache, err)
	}
	if requests.Load() == before {
		t.Error("team-b was served from the cache without asking the registry")
	}

	reg.srv.Close()
	againA := reg.client(t, Options{DockerConfig: creds("team-a", "a-secret"), CacheDir: cache})
	if got, err := againA.Pull(ctx, a.Reference); err != nil || !got.FromCache {
		t.Errorf("team-a after a restart, registry down: FromCache=%v err=%v", got != nil && got.FromCache, err)
	}
}

// FuzzManifest feeds arbitrary bytes to the manifest checks every pull runs on what a registry returns.
//
//	go test -run '^$' -fuzz FuzzManifest -fuzztime 2m ./host/oci
func FuzzManifest(f *testing.F) {
	module := fakeModule("fuzz")
	good, _ := json.Marshal(ocispec.Manifest{MediaType: ocispec.MediaTypeImageManifest,
		Config: ocispec.Descriptor{MediaType: MediaTypeWasmConfig, Digest: digest.FromString("{}"), Size: 2},
		Layers: []ocispec.Descriptor{{MediaType: MediaTypeWasmLayer, Digest: digest.FromBytes(module), Size: int64(len(module))}}})
	f.Add(good)
	f.Add([]byte(`{"layers":[{"mediaType":"application/wasm","digest":"sha256:00","size":-1}],"config":{"mediaType":"application/vnd.wasm.config.v0+json"}}`))
	f.Add([]byte(`{"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := wasmManifest(b)
		if err != nil {
			return
		}
		if len(m.Layers) != 1 || m.Layers[0].Digest.Validate() != nil || m.Layers[0].Size < 0 {
			t.Fatalf("accepted manifest with layers %+v", m.Layers)
		}
		if m.Layers[0].MediaType != MediaTypeWasmLayer && m.Layers[0].MediaType != MediaTypeWasmLayerLegacy {
			t.Fatalf("accepted layer media type %q", m.Layers[0].MediaType)
		}
	})
}
