package runtime_test

import (
	"bytes"
	"context"
	"encoding/binary"
	goruntime "runtime"
	"slices"
	"testing"
	"time"

	"github.com/osmhq/osm/sdk/internal/wasmcheck"
	"github.com/osmhq/osm/sdk/runtime"
	"github.com/osmhq/osm/sdk/wasmtest"
)

// typesPlugin is a hand-written plugin with 2,000 distinct function types of 500 parameters, distinct for
// each seed: what wazero keeps of a compiled module is large for it (about 11 MiB), so a module whose
// compiled form outlives it shows.
func typesPlugin(seed int) []byte {
	var types [][]byte
	for i := range 2_000 {
		params := bytes.Repeat([]byte{wasmtest.I32}, 500)
		params[i%500] = wasmtest.I64
		params[(i/500+seed*10)%500] = 0x7d // f32
		types = append(types, slices.Concat([]byte{0x60}, wasmtest.U32(500), params, []byte{0}))
	}
	wasm := handPlugin(spinNowhere)
	secs, err := wasmcheck.Sections(wasm)
	if err != nil {
		panic(err)
	}
	out := bytes.Clone(wasm[:8])
	for _, s := range secs {
		if s.ID == 1 { // the type section: the plugin's own types, then these
			n, k := binary.Uvarint(s.Body)
			s.Body = slices.Concat(wasmtest.U32(uint32(n)+uint32(len(types))), s.Body[k:], bytes.Join(types, nil))
		}
		out = wasmcheck.AppendSection(out, s.ID, s.Body)
	}
	return out
}

// TestUnloadedModulesFreeTheirCompiledCode loads and unloads modules of distinct digests, one after another,
// and checks that the Go heap does not keep what each compiled to. With one compilation cache shared by all
// modules, the compiled form of every module ever loaded stayed in memory until the Runtime closed (Extism
// closes a plugin's runtime, not its compiled modules): 11 MiB more per module here, and a plugin's 19 MiB of
// machine code per version for a controller that saw many.
func TestUnloadedModulesFreeTheirCompiledCode(t *testing.T) {
	rt := newRuntime(t, runtime.Config{CacheDir: t.TempDir()})
	ctx := context.Background()
	// The least heap over a second of collections: a compile another test left running in the background
	// (loads finish after their caller gave up) holds memory only until it ends, and must not count here.
	heap := func() uint64 {
		least := uint64(1<<64 - 1)
		for range 10 {
			goruntime.GC()
			var ms goruntime.MemStats
			goruntime.ReadMemStats(&ms)
			least = min(least, ms.HeapAlloc)
			time.Sleep(100 * time.Millisecond) // spaces the samples, not ordering
		}
		return least
	}
	var first uint64
	const rounds = 3
	for seed := range rounds {
		wasm := typesPlugin(seed)
		m, err := rt.Load(ctx, "types", wasm)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Render(ctx, renderRequest()); err == nil {
			t.Fatal("the hand-written plugin's render returned no error; it writes no output")
		}
		if err := rt.Unload(ctx, runtime.Digest(wasm)); err != nil {
			t.Fatal(err)
		}
		if seed == 0 {
			first = heap()
		}
	}
	grew := int64(heap()) - int64(first)
	if grew > 8<<20 {
		t.Errorf("the Go heap grew by %d MiB over %d more modules loaded and unloaded, want under 8 MiB", grew>>20, rounds-1)
	}
	t.Logf("heap grew by %d KiB over %d more modules", grew>>10, rounds-1)
}
