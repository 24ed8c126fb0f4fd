package plugin

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osmhq/osm/host/oci"
)

// dripBlobs serves blob bodies one byte per interval while enabled (a registry under attack, or a hostile
// one), and counts blob GETs.
type dripBlobs struct {
	enabled  atomic.Bool
	interval time.Duration
	gets     atomic.Int32
}

func (d *dripBlobs) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/blobs/") {
			next.ServeHTTP(w, r)
			return
		}
		d.gets.Add(1)
		if !d.enabled.Load() {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusOK)
		for {
			if _, err := w.Write([]byte{0}); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-time.After(d.interval):
			case <-r.Context().Done():
				return
			}
		}
	})
}

// TestSlowRegistry replays a registry that answers one byte a second: resolutions return "pending" at once
// instead of holding their worker, concurrent resolutions share one pull, built-in plugins keep rendering
// meanwhile, and the pull is abandoned at its deadline with an error that says so.
func TestSlowRegistry(t *testing.T) {
	drip := &dripBlobs{interval: time.Second}
	host, _ := testRegistry(t, drip.wrap)
	healthy := testPlugin(t, "healthy")
	art := push(t, oci.Options{}, host+"/osm/slow:1", healthy)
	drip.enabled.Store(true)
	drip.gets.Store(0)

	// Long enough for the built-in renders below to finish first, even under the race detector.
	const deadline = 8 * time.Second
	m, _, _ := newManager(t, Config{Registry: RegistryConfig{PlainHTTP: true, PullTimeout: deadline, PendingAfter: 100 * time.Millisecond}}, builtinFS(healthy))
	ctx := context.Background()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = m.Resolve(ctx, Reference{Image: art.Reference})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		var pending *PendingError
		if !errors.As(err, &pending) || !errors.Is(err, ErrPending) || pending.RetryAfter() <= 0 {
			t.Fatalf("resolution %d: err = %v, want a PendingError", i, err)
		}
	}

	// Built-in plugins render while the pull drips.
	for range 3 {
		p, err := m.Resolve(ctx, Reference{Builtin: "healthy"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Render(ctx, renderRequest()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Resolve(ctx, Reference{Image: art.Reference}); !errors.Is(err, ErrPending) {
		t.Fatalf("the image finished before the built-in renders did (err %v); the test proves nothing", err)
	}
	if n := drip.gets.Load(); n != 1 {
		t.Errorf("%d blob downloads for concurrent resolutions of one image, want 1 shared", n)
	}

	// The pull ends at its deadline; the next resolution reports why.
	var err error
	waitFor(t, 5*deadline, "the pull to be abandoned", func() bool {
		_, err = m.Resolve(ctx, Reference{Image: art.Reference})
		return !errors.Is(err, ErrPending)
	})
	if err == nil || !strings.Contains(err.Error(), "the pull deadline") {
		t.Fatalf("after the deadline: err = %v", err)
	}
	if took := time.Since(start); took > 3*deadline+2*time.Second {
		t.Errorf("the pull was abandoned after %s, deadline %s", took, deadline)
	}

	// A caller that waits (an admission review) waits for the deadline, not for the registry.
	const short = 2 * time.Second
	m2, _, _ := newManager(t, Config{Registry: RegistryConfig{PlainHTTP: true, PullTimeout: short}}, nil)
	start = time.Now()
	if _, err := m2.Resolve(WaitForPulls(ctx), Reference{Image: art.Reference}); err == nil || !strings.Contains(err.Error(), "the pull deadline") {
		t.Fatalf("waiting resolution: err = %v", err)
	}
	if took := time.Since(start); took > 3*short {
		t.Errorf("the waiting resolution took %s, deadline %s", took, short)
	}
}

// TestPullSecretIsolation replays the cross-namespace leak: a plugin pulled with namespace A's pull Secret,
// and loaded, must not be served to a profile without credentials or with credentials the registry refuses,
// while credentials the registry accepts get it.
func TestPullSecretIsolation(t *testing.T) {
	users := map[string]string{"team-a": "a-secret", "team-b": "b-secret"}
	host, _ := testRegistry(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || users[u] == "" || users[u] != p {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	secret := func(user, pass string) []byte {
		return []byte(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, base64.StdEncoding.EncodeToString([]byte(user+":"+pass))))
	}
	art := push(t, oci.Options{DockerConfig: secret("team-a", "a-secret")}, host+"/private/p:1", testPlugin(t, "healthy"))
	m, _, _ := newManager(t, Config{CacheDir: t.TempDir(), Registry: RegistryConfig{PlainHTTP: true}}, nil)
	ctx := WaitForPulls(context.Background())

	a, err := m.Resolve(ctx, Reference{Image: art.Reference, PullSecret: secret("team-a", "a-secret")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Render(ctx, renderRequest()); err != nil {
		t.Fatal(err)
	}
	for name, pullSecret := range map[string][]byte{"no pull secret": nil, "refused credentials": secret("team-a", "guess")} {
		if _, err := m.Resolve(ctx, Reference{Image: art.Reference, PullSecret: pullSecret}); err == nil || !strings.Contains(err.Error(), "check access") {
			t.Errorf("%s: the module team-a pulled was served (err %v); want the registry's refusal", name, err)
		}
	}
	b, err := m.Resolve(ctx, Reference{Image: art.Reference, PullSecret: secret("team-b", "b-secret")})
	if err != nil {
		t.Fatalf("team-b, whom the registry accepts: %v", err)
	}
	if _, err := b.Render(ctx, renderRequest()); err != nil {
		t.Fatal(err)
	}
}
