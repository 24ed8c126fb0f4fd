package runtime_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/osmhq/osm/sdk/runtime"
)

// events records, in order, what a load did: "released" (the caller's release ran) and "compiled".
type events struct {
	mu   sync.Mutex
	list []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	e.list = append(e.list, s)
	e.mu.Unlock()
}

func (e *events) reset() {
	e.mu.Lock()
	e.list = nil
	e.mu.Unlock()
}

func (e *events) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.list, ",")
}

// TestLoadReleasing: release runs exactly once on every path, and before compiling whenever the runtime
// compiles a snapshot rather than the bytes it was given, so a caller's mapped bytes and the module's machine
// code are not resident together.
func TestLoadReleasing(t *testing.T) {
	healthy := testPlugin(t, "healthy")
	cases := []struct {
		name    string
		cfg     runtime.Config
		prepare func(t *testing.T, rt *runtime.Runtime) // before the load under test
		wasm    []byte
		wantErr string
		want    string
	}{
		{name: "snapshotted", wasm: healthy, want: "released,compiled"},
		{name: "not snapshotted", cfg: runtime.Config{NoSnapshot: true}, wasm: healthy, want: "compiled,released"},
		{name: "loaded already", wasm: healthy, want: "released",
			prepare: func(t *testing.T, rt *runtime.Runtime) { load(t, rt, "healthy") }},
		{name: "refused before compiling", wasm: []byte("\x00asm\x01\x00\x00\x00\x99"), wantErr: "refused", want: "released"},
		{name: "runtime closed", wasm: healthy, wantErr: "closed", want: "released",
			prepare: func(t *testing.T, rt *runtime.Runtime) { _ = rt.Close(context.Background()) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev := &events{}
			cfg := c.cfg
			cfg.Hooks.Compiled = func(runtime.CompileEvent) { ev.add("compiled") }
			rt := newRuntime(t, cfg)
			if c.prepare != nil {
				c.prepare(t, rt)
				ev.reset()
			}
			_, err := rt.LoadReleasing(context.Background(), "healthy", c.wasm, func() { ev.add("released") })
			if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
				t.Fatalf("LoadReleasing: %v, want error %q", err, c.wantErr)
			}
			if got := ev.String(); got != c.want {
				t.Errorf("events %q, want %q", got, c.want)
			}
		})
	}
}

// TestLoadReleasingAfterCancel: a caller that stops waiting still gets its release, once the load it started
// in the background has read the bytes.
func TestLoadReleasingAfterCancel(t *testing.T) {
	rt := newRuntime(t, runtime.Config{}) // even from the disk cache, a load takes longer than noticing the cancel
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	released := make(chan struct{}, 2)
	_, err := rt.LoadReleasing(ctx, "healthy", testPlugin(t, "healthy"), func() { released <- struct{}{} })
	if runtime.ReasonOf(err) != runtime.ReasonCanceled {
		t.Fatalf("LoadReleasing with a canceled context: %v", err)
	}
	select {
	case <-released:
	case <-time.After(5 * time.Minute): // a bound for a stuck load, not a performance claim
		t.Fatal("release never ran")
	}
	if _, err := rt.Load(context.Background(), "healthy", testPlugin(t, "healthy")); err != nil {
		t.Fatal(err)
	}
	if len(released) != 0 {
		t.Error("release ran twice")
	}
}
