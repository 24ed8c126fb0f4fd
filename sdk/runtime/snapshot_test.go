package runtime_test

import (
	"context"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/runtime"
	"github.com/osmhq/osm/sdk/wasmtest"
)

// compileEvents records what the runtime reports about each compilation.
type compileEvents struct {
	mu     sync.Mutex
	events []runtime.CompileEvent
}

func (c *compileEvents) hooks() runtime.Hooks {
	return runtime.Hooks{Compiled: func(e runtime.CompileEvent) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.events = append(c.events, e)
	}}
}

func (c *compileEvents) last(t *testing.T) runtime.CompileEvent {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.events) == 0 {
		t.Fatal("no compilation reported")
	}
	return c.events[len(c.events)-1]
}

// TestInstancesStartFromASnapshot: a Go plugin's instances start from the snapshot of an initialised, warmed-up
// instance, and render exactly what an instance that initialises itself renders; only the test plugin's own
// record of earlier calls tells them apart.
func TestInstancesStartFromASnapshot(t *testing.T) {
	render := func(cfg runtime.Config) (*abi.RenderResponse, runtime.CompileEvent) {
		var events compileEvents
		cfg.Hooks = events.hooks()
		m := load(t, newRuntime(t, cfg), "healthy")
		// On Linux a snapshot's memory is an image instances map copy-on-write, not data segments.
		if snapshotted := !cfg.NoSnapshot; (runtime.ImageSize(m) > 0) != (snapshotted && goruntime.GOOS == "linux") {
			t.Errorf("NoSnapshot=%v: memory image of %d bytes", cfg.NoSnapshot, runtime.ImageSize(m))
		}
		resp, err := m.Render(context.Background(), benchRequest())
		if err != nil {
			t.Fatal(err)
		}
		return resp, events.last(t)
	}
	snap, snapEvent := render(runtime.Config{})
	cold, coldEvent := render(runtime.Config{NoSnapshot: true})
	if snapEvent.NotSnapshotted != "" {
		t.Errorf("healthy plugin not snapshotted: %s", snapEvent.NotSnapshotted)
	}
	if !strings.Contains(coldEvent.NotSnapshotted, "NoSnapshot") {
		t.Errorf("with NoSnapshot the compile event says %q", coldEvent.NotSnapshotted)
	}
	instance := func(r *abi.RenderResponse) string {
		f := r.Config.File("/etc/osm/instance")
		if f == nil {
			t.Fatal("no /etc/osm/instance")
		}
		data := f.Content.Inline.Data
		f.Content.Inline.Data = ""
		return data
	}
	if got := instance(snap); got != pristine {
		t.Errorf("snapshotted instance: %s, want %s", got, pristine)
	}
	if got := instance(cold); got != `renders=0 previous=""` {
		t.Errorf("self-initialised instance: %s, want a first render", got)
	}
	if diff := cmp.Diff(cold, snap); diff != "" {
		t.Errorf("renders differ between a snapshotted and a self-initialised instance (-cold +snapshot):\n%s", diff)
	}
}

// TestSnapshotsAreKeptOnDisk: a runtime with a cache directory keeps the rebuilt module, and the next runtime
// over that directory (a restarted controller) starts instances from it without running the module's
// initialisation again: the kept file is not rewritten, and instances are in the snapshot's state.
func TestSnapshotsAreKeptOnDisk(t *testing.T) {
	dir := t.TempDir()
	load(t, newRuntime(t, runtime.Config{CacheDir: dir}), "healthy")
	kept, err := filepath.Glob(filepath.Join(dir, "osm-snapshots", "*", "*.wasm"))
	if err != nil || len(kept) != 1 {
		t.Fatalf("kept snapshots: %v (%v), want one", kept, err)
	}
	// Backdated, so that a rewrite shows in the modification time however coarse the file system's clock.
	past := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(kept[0], past, past); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(kept[0])
	if err != nil {
		t.Fatal(err)
	}

	var events compileEvents
	m := load(t, newRuntime(t, runtime.Config{CacheDir: dir, Hooks: events.hooks()}), "healthy")
	if got := events.last(t).NotSnapshotted; got != "" {
		t.Errorf("restarted runtime: NotSnapshotted = %q", got)
	}
	after, err := os.Stat(kept[0])
	if err != nil || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("the kept snapshot was taken again on restart (%v)", err)
	}
	resp, err := m.Render(context.Background(), renderRequest())
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Config.File("/etc/osm/instance").Content.Inline.Data; got != pristine {
		t.Errorf("instance from the kept snapshot: %s, want %s", got, pristine)
	}
}

// TestSnapshotsAreBounded: a module whose initialisation fills its memory is not snapshotted (the image would
// stay in memory with the module), and loads and renders as before; one whose initialisation never ends costs
// the load one timeout, then fails as it always did.
func TestSnapshotsAreBounded(t *testing.T) {
	var events compileEvents
	rt := newRuntime(t, runtime.Config{Hooks: events.hooks(), CacheDir: t.TempDir()})
	m, err := rt.Load(context.Background(), "fills-memory", fillingPlugin(16<<20))
	if err != nil {
		t.Fatal(err)
	}
	if got := events.last(t).NotSnapshotted; !strings.Contains(got, "larger") {
		t.Errorf("a module initialising 16 MiB of memory: NotSnapshotted = %q, want the size refused", got)
	}
	if m.Metadata().Name != "hand" {
		t.Errorf("metadata = %+v", m.Metadata())
	}
}

// TestFailedWarmUpStillSnapshots: a module whose osm_warmup traps is snapshotted right after its
// initialisation, and its instances start there.
func TestFailedWarmUpStillSnapshots(t *testing.T) {
	var events compileEvents
	rt := newRuntime(t, runtime.Config{Hooks: events.hooks(), CacheDir: t.TempDir()})
	wasm := handModule(wasmtest.I32Const(1), wasmtest.Unreachable)
	m, err := rt.Load(context.Background(), "warm-up-traps", wasm)
	if err != nil {
		t.Fatal(err)
	}
	if got := events.last(t).NotSnapshotted; got != "" {
		t.Errorf("NotSnapshotted = %q, want a snapshot taken before the failed warm-up", got)
	}
	if _, err := m.Render(context.Background(), renderRequest()); err == nil || runtime.ReasonOf(err) != runtime.ReasonInvalidOutput {
		t.Errorf("render = %v, want the hand-written plugin's empty output refused as usual", err)
	}
}

// fillingPlugin is a hand-written plugin whose _initialize grows its memory by size bytes and fills them.
func fillingPlugin(size int32) []byte {
	var fill []byte
	fill = append(fill, wasmtest.I32ConstS(size/65536)...)
	fill = append(fill, 0x40, 0x00, 0x1a) // memory.grow, drop
	fill = append(fill, wasmtest.I32ConstS(65536)...)
	fill = append(fill, wasmtest.I32ConstS(0xab)...)
	fill = append(fill, wasmtest.I32ConstS(size)...)
	fill = append(fill, 0xfc, 0x0b, 0x00) // memory.fill
	return handModule(append(fill, wasmtest.I32Const(0)...), nil)
}

// handModule is a hand-written plugin with the given _initialize (leaving an i32 on the stack, dropped) and,
// when set, osm_warmup.
func handModule(initialize, warmUp []byte) []byte {
	funcs := []wasmtest.Func{
		{Results: []byte{wasmtest.I32}, Locals: []byte{wasmtest.I64, wasmtest.I32}, Code: writeOutput([]byte(handMetadata)), Export: "osm_metadata"},
		{Results: []byte{wasmtest.I32}, Code: wasmtest.I32Const(0), Export: "osm_render"},
		{Code: append(append([]byte(nil), initialize...), 0x1a), Export: "_initialize"},
	}
	if warmUp != nil {
		funcs = append(funcs, wasmtest.Func{Code: warmUp, Export: "osm_warmup"})
	}
	return wasmtest.Module{Imports: handImports, Memory: 1, Data: []byte(handMetadata), Funcs: funcs}.Bytes()
}
