package runtime_test

import (
	"bufio"
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/runtime"
	"github.com/osmhq/osm/sdk/wasmtest"
)

// TestMemoryBudgetHolds replays the memory attack: many concurrent renders of a plugin that allocates up to its
// cap. The runtime may reserve at most its budget at once, and the process's resident memory may grow by
// little more than that, however many calls are queued.
func TestMemoryBudgetHolds(t *testing.T) {
	const memLimit = 32 << 20
	probe := newRuntime(t, runtime.Config{MemoryLimit: memLimit})
	budget := 2 * runtime.CallMemory(probe)
	rt := newRuntime(t, runtime.Config{MemoryLimit: memLimit, MemoryBudget: budget})
	alloc := load(t, rt, "alloc")
	healthy := load(t, rt, "healthy")

	baseline := rss(t)
	peak := samplePeak(t, rss)
	var wg sync.WaitGroup
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			checkError(t, "alloc", render(nil)(alloc), runtime.ReasonOutOfMemory, "out of memory (limit 32 MiB)")
		}()
	}
	// A healthy plugin waits its turn for memory, but renders.
	if _, err := healthy.Render(context.Background(), renderRequest()); err != nil {
		t.Errorf("healthy render next to the allocating ones: %v", err)
	}
	wg.Wait()
	peakRSS := peak()

	now, most := runtime.MemoryReserved(rt)
	if now != 0 || most != budget {
		t.Errorf("reserved memory: %d bytes now, at most %d; want 0 now and the budget (%d) at the peak", now, most, budget)
	}
	// Generous: the budget, plus the Go heap of twelve calls' bookkeeping and the test's own garbage.
	if grew := int64(peakRSS) - int64(baseline); grew > int64(budget)+128<<20 {
		t.Errorf("resident memory grew by %d MiB, want at most the budget (%d MiB) + 128 MiB", grew>>20, budget>>20)
	}
	t.Logf("budget %d MiB; resident memory grew by at most %d MiB", budget>>20, (int64(peakRSS)-int64(baseline))>>20)
}

// rss is the process's resident memory, from /proc/self/status.
func rss(t *testing.T) uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// TestOutputAndInputLimits: a plugin returning more than MaxResponseBytes fails with an error naming the limit
// before the output reaches the host (its instance never held more than the cap), and a request above
// MaxRequestBytes never reaches the plugin.
func TestOutputAndInputLimits(t *testing.T) {
	var memory []uint64
	var mu sync.Mutex
	rt := newRuntime(t, runtime.Config{MaxResponseBytes: 256 << 10, MaxRequestBytes: 64 << 10, Hooks: runtime.Hooks{
		Called: func(e runtime.CallEvent) {
			mu.Lock()
			memory = append(memory, e.Memory)
			mu.Unlock()
		},
	}})
	m := load(t, rt, "healthy")
	ctx := context.Background()

	req := renderRequest()
	req.Config = map[string]string{"outputBytes": strconv.Itoa(100 << 10)}
	if _, err := m.Render(ctx, req); err != nil {
		t.Fatalf("an output under the limit: %v", err)
	}
	req.Config = map[string]string{"outputBytes": strconv.Itoa(20 << 20)}
	_, err := m.Render(ctx, req)
	checkError(t, "20 MiB output", err, runtime.ReasonInvalidOutput, `plugin "healthy"`, "osm_render: output exceeds the limit of 262144 bytes (MaxResponseBytes)")
	mu.Lock()
	last := memory[len(memory)-1]
	mu.Unlock()
	// The guest held its 20 MiB string; the kernel, where the output goes, stayed within its cap.
	if max := runtime.DefaultMemoryLimit + uint64(64<<10+256<<10+1<<20); last > max {
		t.Errorf("the call's instance grew to %d bytes, beyond the memory limit plus the kernel's cap (%d)", last, max)
	}

	big := renderRequest()
	big.Input.Files = append(big.Input.Files, abi.PlainFile("/etc/big", 0o644, strings.Repeat("x", 100<<10)))
	_, err = m.Render(ctx, big)
	checkError(t, "100 KiB request", err, runtime.ReasonInvalidInput, "osm_render: request of", "exceeds the limit of 65536 bytes")
}

// TestNoStateAcrossCalls replays the cross-MachineDeployment leak: a plugin that remembers what its instance
// rendered before. Every call runs on a fresh instance, so it never sees an earlier call, even under
// concurrency.
func TestNoStateAcrossCalls(t *testing.T) {
	m := load(t, newRuntime(t, runtime.Config{}), "healthy")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 3 {
				req := renderRequest()
				req.Context.MachineDeployment.Name = "md-" + strconv.Itoa(i) + "-" + strconv.Itoa(j)
				resp, err := m.Render(context.Background(), req)
				if err != nil {
					t.Error(err)
					return
				}
				if got := resp.Config.File("/etc/osm/instance").Content.Inline.Data; got != pristine {
					t.Errorf("render for %s saw an earlier call: %s, want the snapshot's %s", req.Context.MachineDeployment.Name, got, pristine)
				}
			}
		}()
	}
	wg.Wait()
}

// recursingPlugin is a hand-written plugin whose render recurses without end, with no loop: the call fails
// with a stack overflow.
func recursingPlugin() []byte {
	render := uint32(len(handImports) + 1) // after the imports and osm_metadata
	return wasmtest.Module{Imports: handImports, Memory: 1, Data: []byte(handMetadata), Funcs: []wasmtest.Func{
		{Results: []byte{wasmtest.I32}, Locals: []byte{wasmtest.I64, wasmtest.I32}, Code: writeOutput([]byte(handMetadata)), Export: "osm_metadata"},
		{Results: []byte{wasmtest.I32}, Code: slices.Concat([]byte{0x10}, wasmtest.U32(render)), Export: "osm_render"},
	}}.Bytes()
}

// TestEndlessRecursionTraps: a render recursing without end fails with Trap (stack overflow), and the module
// serves the next call on a fresh instance.
func TestEndlessRecursionTraps(t *testing.T) {
	rt := newRuntime(t, runtime.Config{})
	endless, err := rt.Load(context.Background(), "endless", recursingPlugin())
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		checkError(t, "endless recursion", render(nil)(endless), runtime.ReasonTrap, `plugin "endless"`, "osm_render: trapped: stack overflow")
	}
}

// samplePeak samples measure every 5 ms until the returned function is called, which returns the peak.
func samplePeak(t *testing.T, measure func(*testing.T) uint64) func() uint64 {
	var peak uint64
	stop, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			peak = max(peak, measure(t))
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return func() uint64 {
		close(stop)
		<-sampled
		return peak
	}
}
