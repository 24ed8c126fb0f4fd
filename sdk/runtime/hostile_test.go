package runtime_test

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/runtime"
)

// hostileTimeout is short so the suite stays quick; what matters is that the loop is interrupted at all. Under
// the race detector a healthy call on a fresh instance, competing for the CPU with spinning guests, needs more.
var hostileTimeout = func() time.Duration {
	if raceEnabled {
		return 10 * time.Second
	}
	return 2 * time.Second
}()

// TestHostilePluginsAreContained runs every hostile plugin at the same time as a stream of renders through a
// healthy plugin on the same runtime. Each hostile call must fail with its own reason and a message naming
// the plugin, every healthy render must succeed, and nothing may be left running afterwards.
func TestHostilePluginsAreContained(t *testing.T) {
	var cfg runtime.Config
	// Build and read the modules before counting goroutines.
	for _, name := range []string{"healthy", "loop", "alloc", "panic", "badjson", "abiv2"} {
		testPlugin(t, name)
	}
	baseline := goruntime.NumGoroutine()

	var failures sync.Map // reason -> count, from the Called hook
	cfg.Timeout = hostileTimeout
	cfg.CacheDir = sharedCacheDir(t)
	cfg.Hooks = runtime.Hooks{Called: func(e runtime.CallEvent) {
		if e.Err != nil {
			n, _ := failures.LoadOrStore(e.Err.Reason, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
		}
	}}
	rt, err := runtime.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	healthy := load(t, rt, "healthy")

	tests := []struct {
		name       string
		plugin     string
		run        func(*runtime.Module) error // nil: the failure is at load time
		wantReason runtime.Reason
		wantMsg    []string
	}{
		{name: "endless loop", plugin: "loop", run: render(nil), wantReason: runtime.ReasonTimeout,
			wantMsg: []string{`plugin "loop" (sha256:`, "osm_render: timed out after " + hostileTimeout.String()}},
		{name: "unbounded allocation", plugin: "alloc", run: render(nil), wantReason: runtime.ReasonOutOfMemory,
			wantMsg: []string{`plugin "alloc"`, "osm_render: out of memory (limit 64 MiB)"}},
		{name: "unrecoverable panic", plugin: "panic", run: render(nil), wantReason: runtime.ReasonPanic,
			wantMsg: []string{`plugin "panic"`, "osm_render: guest runtime crashed", "panic: goroutine exploded"}},
		{name: "recoverable panic", plugin: "panic", run: render(map[string]string{"mode": "recoverable"}), wantReason: runtime.ReasonPluginError,
			wantMsg: []string{`plugin "panic"`, "osm_render: plugin panicked: render exploded"}},
		{name: "render output not JSON", plugin: "badjson", run: render(nil), wantReason: runtime.ReasonInvalidOutput,
			wantMsg: []string{`plugin "badjson"`, "osm_render: output is not a valid osm_render response"}},
		{name: "validate output of the wrong shape", plugin: "badjson", run: func(m *runtime.Module) error {
			_, err := m.Validate(ctx, &abi.ValidateRequest{})
			return err
		}, wantReason: runtime.ReasonInvalidOutput, wantMsg: []string{"osm_validate: output is not a valid osm_validate response"}},
		{name: "wrong ABI version", plugin: "abiv2", wantReason: runtime.ReasonABIMismatch,
			wantMsg: []string{`plugin "abiv2" (sha256:`, `osm_metadata: plugin speaks ABI "v2" but this host speaks ABI v1`}},
	}

	stop := make(chan struct{})
	var healthyOK, healthyFailed atomic.Int64
	var healthyWG sync.WaitGroup
	for range 2 {
		healthyWG.Add(1)
		go func() {
			defer healthyWG.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := healthy.Render(ctx, renderRequest()); err != nil {
					healthyFailed.Add(1)
					t.Errorf("healthy render failed next to hostile plugins: %v", err)
					return
				}
				healthyOK.Add(1)
			}
		}()
	}

	var wg sync.WaitGroup
	for _, tt := range tests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := rt.Load(ctx, tt.plugin, testPlugin(t, tt.plugin))
			if err == nil && tt.run != nil {
				err = tt.run(m)
			}
			checkError(t, tt.name, err, tt.wantReason, tt.wantMsg...)
		}()
	}
	wg.Wait()
	close(stop)
	healthyWG.Wait()

	if healthyOK.Load() == 0 || healthyFailed.Load() != 0 {
		t.Errorf("healthy renders: %d ok, %d failed; want some ok and none failed", healthyOK.Load(), healthyFailed.Load())
	}
	for _, r := range []runtime.Reason{runtime.ReasonTimeout, runtime.ReasonOutOfMemory, runtime.ReasonPanic, runtime.ReasonInvalidOutput, runtime.ReasonABIMismatch} {
		if _, ok := failures.Load(r); !ok {
			t.Errorf("the Called hook saw no failure with reason %s", r)
		}
	}

	// Broken instances were discarded: the modules still serve calls on fresh instances.
	panicky := load(t, rt, "panic")
	checkError(t, "panic plugin after a crash", render(map[string]string{"mode": "recoverable"})(panicky),
		runtime.ReasonPluginError, "plugin panicked: render exploded")

	if err := rt.Close(ctx); err != nil {
		t.Errorf("closing runtime: %v", err)
	}
	waitForGoroutines(t, baseline)
}

func render(config map[string]string) func(*runtime.Module) error {
	return func(m *runtime.Module) error {
		req := renderRequest()
		req.Config = config
		_, err := m.Render(context.Background(), req)
		return err
	}
}

func checkError(t *testing.T, what string, err error, reason runtime.Reason, msgs ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want reason %s", what, reason)
		return
	}
	var rerr *runtime.Error
	if !errors.As(err, &rerr) {
		t.Errorf("%s: error %v is not a *runtime.Error", what, err)
		return
	}
	if rerr.Reason != reason || !errors.Is(err, &runtime.Error{Reason: reason}) {
		t.Errorf("%s: reason %s, want %s (error: %v)", what, rerr.Reason, reason, err)
	}
	for _, msg := range msgs {
		if !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: error %q does not contain %q", what, err, msg)
		}
	}
	if strings.ContainsAny(err.Error(), "\r\n") {
		t.Errorf("%s: error message is not one line: %q", what, err)
	}
}

// waitForGoroutines fails if goroutines started during the test are still alive after a grace period.
func waitForGoroutines(t *testing.T, baseline int) {
	t.Helper()
	var n int
	for range 100 {
		if n = goruntime.NumGoroutine(); n <= baseline {
			return
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
	buf := make([]byte, 1<<20)
	t.Errorf("%d goroutines still running, %d before the test:\n%s", n, baseline, buf[:goruntime.Stack(buf, true)])
}

func TestInvalidModules(t *testing.T) {
	rt := newRuntime(t, runtime.Config{})
	tests := []struct {
		name       string
		wasm       []byte
		wantReason runtime.Reason
		wantMsg    string
	}{
		{name: "not wasm", wasm: []byte("#!/bin/sh\necho hi\n"), wantReason: runtime.ReasonInvalidModule, wantMsg: "module refused before compiling: not a WebAssembly 1.0 binary module"},
		{name: "empty module", wasm: []byte("\x00asm\x01\x00\x00\x00"), wantReason: runtime.ReasonMissingExport, wantMsg: "module does not export osm_metadata"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := rt.Load(context.Background(), tt.name, tt.wasm)
			checkError(t, tt.name, err, tt.wantReason, fmt.Sprintf("plugin %q", tt.name), tt.wantMsg)
		})
	}
}
