package runtime_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osmhq/osm/sdk/runtime"
)

// TestEndlessLoopsAreInterrupted replays the interruption bypass: hand-written modules that loop forever in
// every place the host runs their code — the start function, the WASI initialiser, osm_metadata (so Load
// itself), osm_render — while rewriting every global they have. Each must be stopped by the runtime within a
// few timeouts with ReasonTimeout, while a healthy plugin keeps rendering on the same runtime.
func TestEndlessLoopsAreInterrupted(t *testing.T) {
	// A budget large enough that no call waits for memory: the time measured is the guest's.
	rt := newRuntime(t, runtime.Config{Timeout: hostileTimeout, MemoryBudget: 2 << 30})
	ctx := context.Background()
	healthy := load(t, rt, "healthy")

	// The hand-written plugin itself is sound: without a spin it loads, so the failures below are the spins'.
	if _, err := rt.Load(ctx, "hand", handPlugin(spinNowhere)); err != nil {
		t.Fatalf("the hand-written plugin does not load without a spin: %v", err)
	}

	tests := []struct {
		where      spinAt
		render     bool // the spin is reached by a render, not by Load
		wantReason runtime.Reason
		wantMsg    string
	}{
		{where: spinStart, wantReason: runtime.ReasonTimeout, wantMsg: "osm_metadata: timed out after " + hostileTimeout.String()},
		{where: spinInit, wantReason: runtime.ReasonTimeout, wantMsg: "osm_metadata: timed out after " + hostileTimeout.String()},
		{where: spinMetadata, wantReason: runtime.ReasonTimeout, wantMsg: "osm_metadata: timed out after " + hostileTimeout.String()},
		{where: spinRender, render: true, wantReason: runtime.ReasonTimeout, wantMsg: "osm_render: timed out after " + hostileTimeout.String()},
	}

	stop := make(chan struct{})
	var healthyOK atomic.Int64
	var healthyWG sync.WaitGroup
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
				t.Errorf("healthy render failed next to spinning plugins: %v", err)
				return
			}
			healthyOK.Add(1)
		}
	}()

	var wg sync.WaitGroup
	for _, tt := range tests {
		// Several copies of each, as the attack ran ten renders to stop every worker.
		for i := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				m, err := rt.Load(ctx, string(tt.where), handPlugin(tt.where))
				if tt.render {
					if err != nil {
						t.Errorf("%s: load: %v", tt.where, err)
						return
					}
					start = time.Now()
					_, err = m.Render(ctx, renderRequest())
				}
				if took := time.Since(start); took > 3*hostileTimeout {
					t.Errorf("%s #%d: stopped after %s, want within %s", tt.where, i, took, 3*hostileTimeout)
				}
				checkError(t, string(tt.where), err, tt.wantReason, tt.wantMsg)
			}()
		}
	}
	wg.Wait()
	close(stop)
	healthyWG.Wait()
	if healthyOK.Load() == 0 {
		t.Error("no healthy render succeeded while the spinning plugins ran")
	}
}
