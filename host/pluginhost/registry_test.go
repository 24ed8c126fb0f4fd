package pluginhost_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/osmhq/osm/host/pluginhost"
	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/runtime"
	"github.com/osmhq/osm/sdk/wasmtest"
)

// TestTheBuiltinHostForgetsIdleModules: the built-in host, kept alive by one module's calls, forgets another
// module no operation used for the idle timeout, and loads it again on its next call; the loaded-modules
// gauge and the unloads counter say so.
func TestTheBuiltinHostForgetsIdleModules(t *testing.T) {
	reg := prometheus.NewRegistry()
	// Room for both, so that only the idle timeout unloads (TestTheBuiltinHostHoldsItsBound is the bound's).
	s := newSupervisor(t, func(c *pluginhost.Config) {
		c.IdleTimeout, c.MaxBuiltinModules, c.Registerer = 500*time.Millisecond, 2, reg
	})
	ctx := context.Background()
	busy, idler := module("busy", wasmtest.Plugin(nil, nil, 2)), module("idler", wasmtest.Plugin(nil, nil, 3))
	busy.Builtin, idler.Builtin = true, true
	// The host itself stays up whatever the machine's speed: an operation holds it.
	release := make(chan struct{})
	held := make(chan error, 1)
	go func() { held <- s.Hold(ctx, busy, release) }()
	defer func() {
		close(release)
		if err := <-held; err != nil {
			t.Error(err)
		}
	}()
	waitFor(t, "the host to be held", func() bool { return s.InFlight(busy) > 0 })
	pid := s.HostPID(busy)
	for _, m := range []pluginhost.Module{idler, busy} {
		if _, err := s.Load(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the idle module to be forgotten", func() bool {
		if _, err := s.Call(ctx, busy, abi.ExportRender, nil); err != nil {
			t.Fatal(err)
		}
		return s.Loaded() == 1 // busy's alone
	})
	if got := s.HostPID(busy); got != pid || s.HostPID(idler) != pid {
		t.Errorf("the built-in host changed: %d, was %d", got, pid)
	}
	if got := counter(t, reg, "osm_plugin_unloads_total", ""); got < 1 {
		t.Errorf("unloads = %v", got)
	}
	if got := gauge(t, reg, "osm_plugin_loaded_modules"); got > 1 {
		t.Errorf("loaded gauge = %v once the idle module was forgotten, want at most 1", got)
	}
	if _, err := s.Call(ctx, idler, abi.ExportRender, nil); err != nil {
		t.Fatalf("a call of the forgotten module: %v", err)
	}
}

// TestAModuleInUseIsNeverUnloaded: neither Unload nor the idle timeout takes a module from under a call in
// flight, in the built-in host or in a tenant's.
func TestAModuleInUseIsNeverUnloaded(t *testing.T) {
	s := newSupervisor(t, func(c *pluginhost.Config) { c.IdleTimeout = 100 * time.Millisecond })
	ctx := context.Background()
	tenant := module("spin", wasmtest.Plugin(nil, wasmtest.SpinRender, 1))
	builtin := module("builtin-spin", wasmtest.Plugin(nil, wasmtest.SpinRender, 2))
	builtin.Builtin = true
	for _, m := range []pluginhost.Module{tenant, builtin} {
		t.Run(m.Name, func(t *testing.T) {
			if _, err := s.Load(ctx, m); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := s.Call(ctx, m, abi.ExportRender, nil)
				done <- err
			}()
			waitFor(t, "the call to start", func() bool { return s.InFlight(m) > 0 })
			before := s.Loaded()
			s.Unload(m.Digest)
			if s.Loaded() < before {
				t.Error("Unload took the module from under a call in flight")
			}
			// The call spins to its deadline (1 s), past the idle timeout: it ends by it, not by an unload.
			if err := <-done; reasonOf(err) != runtime.ReasonTimeout {
				t.Errorf("the call: %v, want Timeout", err)
			}
		})
	}
}

// TestConcurrentFirstCallsLoadOnce: calls of a module no host has, started together, load it once.
func TestConcurrentFirstCallsLoadOnce(t *testing.T) {
	var compiles atomic.Int32
	s := newSupervisor(t, func(c *pluginhost.Config) {
		c.Hooks.Compiled = func(runtime.CompileEvent) { compiles.Add(1) }
	})
	m := module("builtin", wasmtest.Plugin(nil, nil, 4))
	m.Builtin = true
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := s.Call(context.Background(), m, abi.ExportRender, nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := compiles.Load(); n != 1 {
		t.Errorf("%d compiles for eight concurrent first calls, want 1", n)
	}
	if n := s.Loaded(); n != 1 {
		t.Errorf("%d modules loaded, want 1", n)
	}
}

// TestPermanentLoadFailuresAreRemembered: a load that fails for a reason Config.Permanent says will not
// pass is remembered by digest, in the supervisor only: the module's next operations fail at once with it
// and reach no host, until Unload forgets it. Other failures are not remembered.
func TestPermanentLoadFailuresAreRemembered(t *testing.T) {
	for _, permanent := range []bool{true, false} {
		var compiles atomic.Int32
		s := newSupervisor(t, func(c *pluginhost.Config) {
			c.Permanent = func(error) bool { return permanent }
			c.Hooks.Compiled = func(runtime.CompileEvent) { compiles.Add(1) }
		})
		// osm_metadata returns no output: the module compiles, and its load fails.
		m := module("broken", wasmtest.Spec{Metadata: []byte{0x41, 0x00}, Pages: 1}.Bytes())
		m.Builtin = true
		_, first := s.Load(context.Background(), m)
		if first == nil {
			t.Fatal("a module without metadata loaded")
		}
		_, again := s.Load(context.Background(), m)
		_, call := s.Call(context.Background(), m, abi.ExportRender, nil)
		remembered := s.Failed(m.Digest) != nil
		switch {
		case remembered != permanent:
			t.Errorf("permanent %v: remembered %v", permanent, remembered)
		case permanent && (!errors.Is(again, first) || !errors.Is(call, first)):
			t.Errorf("a remembered failure: load %v, call %v; want %v", again, call, first)
		case permanent && compiles.Load() != 1:
			t.Errorf("a remembered failure: %d compiles, want 1", compiles.Load())
		case !permanent && again == nil:
			t.Error("the second load passed")
		}
		if permanent {
			s.Unload(m.Digest)
			if s.Failed(m.Digest) != nil {
				t.Error("Unload did not forget the failure")
			}
		}
	}
}

// gauge returns the value of the unlabelled gauge name in reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

// TestTheBuiltinHostHoldsItsBound: the built-in host holds at most MaxBuiltinModules modules. A call of
// another module unloads the least recently used one, in the same host, and a call of that one loads it again;
// renders of three modules from eight goroutines at once all succeed without the bound ever being passed.
func TestTheBuiltinHostHoldsItsBound(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := newSupervisor(t, func(c *pluginhost.Config) { c.MaxBuiltinModules, c.Registerer = 1, reg })
	ctx := context.Background()
	var mods []pluginhost.Module
	for i, name := range []string{"first", "second", "third"} {
		m := module(name, wasmtest.Plugin(nil, nil, uint32(10+i)))
		m.Builtin = true
		mods = append(mods, m)
	}
	for i, m := range []pluginhost.Module{mods[0], mods[1], mods[0]} {
		if _, err := s.Call(ctx, m, abi.ExportRender, nil); err != nil {
			t.Fatalf("call %d (%s): %v", i, m.Name, err)
		}
		if got := s.Loaded(); got != 1 {
			t.Errorf("after call %d (%s) the built-in host holds %d modules, want 1", i, m.Name, got)
		}
	}
	if got := counter(t, reg, "osm_plugin_unloads_total", ""); got != 2 {
		t.Errorf("unloads = %v, want 2 (second's load unloaded first, and first's second unloaded second)", got)
	}
	if s.HostPID(mods[0]) != s.HostPID(mods[1]) {
		t.Error("the modules ran in different hosts")
	}

	stop := make(chan struct{})
	var most atomic.Int64
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			if n := int64(s.Loaded()); n > most.Load() {
				most.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 8*6)
	for g := range 8 {
		wg.Go(func() {
			for i := range 6 {
				m := mods[(g+i)%len(mods)]
				if _, err := s.Call(ctx, m, abi.ExportRender, nil); err != nil {
					errs <- fmt.Errorf("%s: %w", m.Name, err)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	<-watched
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := most.Load(); got > 1 {
		t.Errorf("the built-in host held %d modules at once, past its bound of 1", got)
	}
}
