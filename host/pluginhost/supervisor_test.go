package pluginhost_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/osmhq/osm/host/internal/handwasm"
	"github.com/osmhq/osm/host/pluginhost"
	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/runtime"
)

// The test binary is the plugin host: it links pluginhost, whose init serves when the supervisor starts it.

func newSupervisor(t *testing.T, mod func(*pluginhost.Config)) *pluginhost.Supervisor {
	t.Helper()
	cfg := pluginhost.Config{
		Host:  pluginhost.HostConfig{Timeout: time.Second, CacheDir: t.TempDir()},
		Grace: 500 * time.Millisecond,
		// Hosts stay up between operations unless a test is about idle hosts: several tests compare the
		// processes before and after.
		IdleTimeout: -1,
		Log:         testr.New(t),
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := pluginhost.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func module(name string, wasm []byte) pluginhost.Module {
	return pluginhost.Module{Name: name, Digest: runtime.Digest(wasm), Bytes: func() ([]byte, func(), error) { return wasm, func() {}, nil }}
}

func reasonOf(err error) runtime.Reason {
	var re *runtime.Error
	if errors.As(err, &re) {
		return re.Reason
	}
	return ""
}

func TestCallsRunInAHostProcess(t *testing.T) {
	// Room for the recursion to reach wazero's stack limit, which takes seconds in a race-built host.
	s := newSupervisor(t, func(c *pluginhost.Config) { c.Host.Timeout = time.Minute })
	ctx := context.Background()
	m := module("hand", handwasm.Plugin(nil, nil, 1))
	res, err := s.Load(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if res.Metadata.Name != "hand" || res.Validates || res.Encodes {
		t.Errorf("load result = %+v", res)
	}
	if _, err := s.Call(ctx, m, abi.ExportRender, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	pids := s.PIDs()
	if len(pids) != 1 || pids[0] == os.Getpid() {
		t.Fatalf("hosts %v: want one process that is not the test's (%d)", pids, os.Getpid())
	}
	// Endless recursion traps inside the host, which survives it.
	if _, err := s.Call(ctx, m, "recurse", nil); reasonOf(err) != runtime.ReasonTrap {
		t.Errorf("recursion: %v, want a Trap", err)
	}
	if got := s.PIDs(); !slices.Equal(got, pids) {
		t.Errorf("a trap replaced the host: %v -> %v", pids, got)
	}
}

// TestHostileCallsAreKilled replays what the in-process sandbox could not stop: loops whose every iteration
// is a bulk memory operation or a host call. Each fails with Timeout within the timeout and grace plus the
// watchdog's interval, a benign call in flight on the same host is retried and succeeds, and the host
// serves the next call.
func TestHostileCallsAreKilled(t *testing.T) {
	ctx := context.Background()
	for name, render := range map[string][]byte{"spin": handwasm.Spin, "memory.fill": handwasm.FillLoop, "memory.fill x100": handwasm.HeavyFillLoop,
		"memory.copy": handwasm.CopyLoop, "random_get": handwasm.RandomLoop} {
		t.Run(name, func(t *testing.T) {
			s := newSupervisor(t, nil)
			hostile := module(name, handwasm.Plugin(nil, render, 1024, handwasm.RandomGet))
			benign := module("benign", handwasm.Plugin(nil, nil, 1))
			var wg sync.WaitGroup
			var benignErr error
			wg.Add(1)
			go func() {
				defer wg.Done()
				// A benign call of about 0.3 s, started shortly before the hostile one's host is killed (at
				// 1.5 s), so that it is likely in flight then: it runs again on the next host.
				time.Sleep(1300 * time.Millisecond)
				_, benignErr = s.Call(ctx, module("benign-busy", handwasm.Plugin(nil, handwasm.Fills(10), 1024)), abi.ExportRender, nil)
			}()
			start := time.Now()
			_, err := s.Call(ctx, hostile, abi.ExportRender, nil)
			took := time.Since(start)
			wg.Wait()
			if reasonOf(err) != runtime.ReasonTimeout {
				t.Fatalf("hostile call: %v, want Timeout", err)
			}
			if took > 5*time.Second {
				t.Errorf("the hostile call took %s to fail; timeout 1s, grace 0.5s", took)
			}
			if benignErr != nil {
				t.Errorf("a benign call beside it failed: %v", benignErr)
			}
			if _, err := s.Call(ctx, benign, abi.ExportRender, nil); err != nil {
				t.Errorf("next call: %v", err)
			}
		})
	}
}

// TestStarvedCallsAreNotBlamed: guest machine code holds its thread until it returns, so calls of several
// modules that spin on every thread of the host starve a benign call sent just after them, which overruns its
// deadline with them. The operating system's accounting of the host's threads tells them apart: the spinners
// fail with Timeout at once, on the host that was killed, and the starved call runs again on a fresh host
// and succeeds. Nobody goes to probation, where each would have waited for the others, one timeout each.
func TestStarvedCallsAreNotBlamed(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := newSupervisor(t, func(c *pluginhost.Config) {
		c.Host.NoInterrupt = true
		c.Registerer = reg
	})
	ctx := context.Background()
	spinners := goruntime.NumCPU()
	modules := []pluginhost.Module{}
	for i := range spinners {
		// Distinct modules: one module's calls overrunning together prove nothing about others.
		modules = append(modules, module(fmt.Sprintf("spin-%d", i), handwasm.Plugin(nil, handwasm.Spin, uint32(1+i))))
	}
	modules = append(modules, module("benign", handwasm.Plugin(nil, nil, 1)))
	for _, m := range modules {
		if _, err := s.Load(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	errs := make([]error, len(modules))
	var wg sync.WaitGroup
	for i, m := range modules {
		if i == spinners {
			// Sent a moment after the spinners, so that its deadline falls within the same watch tick as
			// theirs, or just after.
			time.Sleep(5 * time.Millisecond)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Call(ctx, m, abi.ExportRender, nil)
		}()
	}
	wg.Wait()
	for i, err := range errs[:spinners] {
		if reasonOf(err) != runtime.ReasonTimeout {
			t.Errorf("spinning call %d: %v, want Timeout", i, err)
		}
	}
	if err := errs[spinners]; err != nil {
		t.Errorf("the starved benign call failed: %v", err)
	}
	if n := counter(t, reg, "osm_plugin_host_starts_total", "probation"); n != 0 {
		t.Errorf("%v probation hosts started; the host's accounting should have told the calls apart", n)
	}
}

// counter reads the counter name with the given label value from reg.
func counter(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == label {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestHostileLoadsAreKilled: the same loop in the module's own code that a load runs (osm_metadata once it is
// compiled, _initialize when it is snapshotted) gets a call's deadline, not the load timeout.
func TestHostileLoadsAreKilled(t *testing.T) {
	for name, wasm := range map[string][]byte{
		"osm_metadata": handwasm.Plugin(handwasm.HeavyFillLoop, nil, 1024),
		"_initialize":  handwasm.Spec{Initialize: handwasm.HeavyFillLoop, Pages: 1024}.Bytes(),
	} {
		t.Run(name, func(t *testing.T) {
			s := newSupervisor(t, func(c *pluginhost.Config) {
				c.LoadTimeout = time.Hour
				// Without the in-host interrupt only the supervisor ends the loop, as it must when the
				// guest holds up the host's garbage collector.
				c.Host.NoInterrupt = true
			})
			start := time.Now()
			_, err := s.Load(context.Background(), module("spin-"+name, wasm))
			if r := reasonOf(err); r != runtime.ReasonTimeout {
				t.Fatalf("load: %v, want Timeout", err)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("the hostile load took %s to fail; timeout 1s, grace 0.5s", took)
			}
			if _, err := s.Load(context.Background(), module("hand", handwasm.Plugin(nil, nil, 1))); err != nil {
				t.Fatalf("next load: %v", err)
			}
		})
	}
}

// TestRepeatKillersAreQuarantined: a module that kills its host twice is refused at once afterwards, so it
// cannot keep the host down for everyone.
func TestRepeatKillersAreQuarantined(t *testing.T) {
	// Without the in-host interrupt every timeout is a kill, whatever the loop does.
	s := newSupervisor(t, func(c *pluginhost.Config) { c.Host.NoInterrupt = true })
	ctx := context.Background()
	hostile := module("fill", handwasm.Plugin(nil, handwasm.HeavyFillLoop, 1024))
	for i := range 2 {
		if _, err := s.Call(ctx, hostile, abi.ExportRender, nil); reasonOf(err) != runtime.ReasonTimeout {
			t.Fatalf("call %d: %v, want Timeout", i, err)
		}
	}
	start := time.Now()
	_, err := s.Call(ctx, hostile, abi.ExportRender, nil)
	if reasonOf(err) != pluginhost.ReasonQuarantined {
		t.Fatalf("third call: %v, want Quarantined", err)
	}
	if time.Since(start) > 100*time.Millisecond {
		t.Errorf("a quarantined call took %s", time.Since(start))
	}
	if _, err := s.Call(ctx, module("hand", handwasm.Plugin(nil, nil, 1)), abi.ExportRender, nil); err != nil {
		t.Errorf("another module: %v", err)
	}
}

// TestMemoryWatchdog: a call that grows the host past its memory limit gets the host killed, and fails
// with OutOfMemory, well before its timeout.
func TestMemoryWatchdog(t *testing.T) {
	ctx := context.Background()
	probe := newSupervisor(t, nil)
	if _, err := probe.Load(ctx, module("hand", handwasm.Plugin(nil, nil, 1))); err != nil {
		t.Fatal(err)
	}
	// A host's resident memory with a module loaded, plus half of what the hog touches.
	limit := residentBytes(t, probe.PIDs()[0]) + 32<<20
	s := newSupervisor(t, func(c *pluginhost.Config) {
		c.MaxRSS = limit
		c.Host.Timeout = 20 * time.Second
	})
	if _, err := s.Load(ctx, module("hand", handwasm.Plugin(nil, nil, 1))); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := s.Call(ctx, module("hog", handwasm.Plugin(nil, handwasm.FillThenSpin, 1024)), abi.ExportRender, nil)
	if reasonOf(err) != runtime.ReasonOutOfMemory {
		t.Fatalf("hog: %v, want OutOfMemory", err)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("the watchdog took %s", took)
	}
}

// TestCrashRetriesTheInnocent: a host killed from outside (as the kernel's OOM killer would) with several
// calls in flight blames none of them at first: each runs again alone on a probation host, and succeeds.
func TestCrashRetriesTheInnocent(t *testing.T) {
	s := newSupervisor(t, func(c *pluginhost.Config) { c.Host.Timeout = 30 * time.Second })
	ctx := context.Background()
	slow := module("slow", handwasm.Plugin(nil, handwasm.Fills(40), 1024))
	if _, err := s.Load(ctx, slow); err != nil {
		t.Fatal(err)
	}
	pid := s.PIDs()[0]
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Call(ctx, slow, abi.ExportRender, nil)
		}()
	}
	time.Sleep(100 * time.Millisecond)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
}

func residentBytes(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		t.Fatal(err)
	}
	pages, err := strconv.ParseUint(strings.Fields(string(b))[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return pages * uint64(os.Getpagesize())
}

// TestAHostThatCannotStartBlamesNoModule: a host that dies before it starts (here: an executable that is not
// a plugin host) fails the operation without counting against its module, so a broken deployment does not
// quarantine every plugin, and is not restarted in a loop.
func TestAHostThatCannotStartBlamesNoModule(t *testing.T) {
	s := newSupervisor(t, func(c *pluginhost.Config) { c.Executable = "/bin/true" })
	m := module("hand", handwasm.Plugin(nil, nil, 1))
	for i := range 3 {
		_, err := s.Load(context.Background(), m)
		if r := reasonOf(err); r != pluginhost.ReasonHostCrashed || !strings.Contains(err.Error(), "did not start") {
			t.Fatalf("load %d: %v, want HostCrashed: did not start", i, err)
		}
		if _, err := s.Load(context.Background(), m); err == nil || !strings.Contains(err.Error(), "failed to start less than") {
			t.Fatalf("an immediate retry: %v, want the start back-off", err)
		}
		time.Sleep(1100 * time.Millisecond)
	}
}

// TestAnIdleHostStops: the main host exits once no operation used it for the idle timeout, but never under a
// call that runs longer than that; the next call starts a new host, which loads the module again.
func TestAnIdleHostStops(t *testing.T) {
	const idle = 300 * time.Millisecond
	s := newSupervisor(t, func(c *pluginhost.Config) { c.IdleTimeout = idle })
	ctx := context.Background()
	m := module("hand", handwasm.Plugin(nil, nil, 1))
	if _, err := s.Call(ctx, m, abi.ExportRender, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	first := s.PIDs()
	if len(first) != 1 {
		t.Fatalf("hosts after a call: %v, want one", first)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(s.PIDs()) > 0 || syscall.Kill(first[0], 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("host %d still running %s after its last call (idle timeout %s)", first[0], 30*time.Second, idle)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := s.Call(ctx, m, abi.ExportRender, []byte(`{}`)); err != nil {
		t.Fatalf("a call after the idle host stopped: %v", err)
	}
	if again := s.PIDs(); len(again) != 1 || again[0] == first[0] {
		t.Errorf("hosts after the next call: %v, want one new one (the first was %d)", again, first[0])
	}
	// A call that runs past the idle timeout keeps its host: it ends by the call deadline (Timeout), not by
	// the host stopping for idleness (Closed).
	if _, err := s.Call(ctx, module("spin", handwasm.Plugin(nil, handwasm.Spin, 1)), abi.ExportRender, nil); reasonOf(err) != runtime.ReasonTimeout {
		t.Errorf("a call longer than the idle timeout: %v, want Timeout", err)
	}
}
