package runtime_test

import (
	"sync"
	"testing"

	"github.com/osmhq/osm/sdk/runtime"
)

// TestSharedLimitsHoldAcrossRuntimes gives two runtimes (as a host that keeps one per module does) one Limits:
// allocating calls on both together never reserve more than the one budget.
func TestSharedLimitsHoldAcrossRuntimes(t *testing.T) {
	const memLimit = 32 << 20
	probe := newRuntime(t, runtime.Config{MemoryLimit: memLimit})
	budget := 2 * runtime.CallMemory(probe)
	limits := runtime.NewLimits(budget, 1)
	a := newRuntime(t, runtime.Config{MemoryLimit: memLimit, Limits: limits})
	b := newRuntime(t, runtime.Config{MemoryLimit: memLimit, Limits: limits})
	mods := []*runtime.Module{load(t, a, "alloc"), load(t, b, "alloc")}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			checkError(t, "alloc", render(nil)(mods[i%2]), runtime.ReasonOutOfMemory, "out of memory (limit 32 MiB)")
		}()
	}
	wg.Wait()
	for _, rt := range []*runtime.Runtime{a, b} {
		if now, peak := runtime.MemoryReserved(rt); now != 0 || peak != budget {
			t.Errorf("reserved memory: %d bytes now, at most %d; want 0 now and the shared budget (%d) at the peak", now, peak, budget)
		}
	}
	if _, err := runtime.New(runtime.Config{MemoryLimit: budget, Limits: limits}); err == nil {
		t.Error("a runtime whose single call does not fit the shared budget was created")
	}
}
