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
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/osmhq/osm/host/pluginhost"
	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/runtime"
	"github.com/osmhq/osm/sdk/wasmtest"
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
	m := module("hand", wasmtest.Plugin(nil, nil, 1))
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
// is a bulk memory operation or a host call. Each fails with Timeout once its host used the call's budget of
// CPU time, and the host serves the next call.
func TestHostileCallsAreKilled(t *testing.T) {
	ctx := context.Background()
	for name, render := range map[string][]byte{"spin": wasmtest.SpinRender, "memory.fill": wasmtest.FillLoop, "memory.fill x100": wasmtest.HeavyFillLoop,
		"memory.copy": wasmtest.CopyLoop, "random_get": wasmtest.RandomLoop} {
		t.Run(name, func(t *testing.T) {
			s := newSupervisor(t, nil)
			hostile := module(name, wasmtest.Plugin(nil, render, 1024, wasmtest.RandomGet))
			if _, err := s.Call(ctx, hostile, abi.ExportRender, nil); reasonOf(err) != runtime.ReasonTimeout {
				t.Fatalf("hostile call: %v, want Timeout", err)
			}
			if _, err := s.Call(ctx, module("benign", wasmtest.Plugin(nil, nil, 1)), abi.ExportRender, nil); err != nil {
				t.Errorf("next call: %v", err)
			}
		})
	}
}

// TestATenantsModuleHasAHostOfItsOwn: each tenant's module runs in a process of its own, the built-in modules
// share one, and a benign module renders while another module's calls spin on every CPU of the machine,
// before their host is killed. The spinners' host death counts against them alone.
func TestATenantsModuleHasAHostOfItsOwn(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := newSupervisor(t, func(c *pluginhost.Config) {
		c.Host.NoInterrupt = true
		// A budget the spinners do not exhaust before the benign calls are done, whatever the machine's load
		// (a benign call takes milliseconds of CPU); the test checks that they did not.
		c.Host.Timeout = 5 * time.Second
		c.Registerer = reg
	})
	ctx := context.Background()
	spinner := module("spin", wasmtest.Plugin(nil, wasmtest.SpinRender, 1))
	benign := module("benign", wasmtest.Plugin(nil, nil, 1))
	builtinA, builtinB := module("builtin-a", wasmtest.Plugin(nil, nil, 2)), module("builtin-b", wasmtest.Plugin(nil, nil, 3))
	builtinA.Builtin, builtinB.Builtin = true, true
	for _, m := range []pluginhost.Module{spinner, benign, builtinA, builtinB} {
		if _, err := s.Load(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	pids := map[int]string{}
	for _, m := range []pluginhost.Module{spinner, benign, builtinA} {
		pid := s.HostPID(m)
		if pid == 0 || pid == os.Getpid() || pids[pid] != "" {
			t.Fatalf("%s runs in %d (hosts so far %v): want a process of its own", m.Name, pid, pids)
		}
		pids[pid] = m.Name
	}
	if s.HostPID(builtinB) != s.HostPID(builtinA) {
		t.Errorf("the built-in modules run in %d and %d, want one host", s.HostPID(builtinA), s.HostPID(builtinB))
	}
	spinners := goruntime.NumCPU() + 1
	spun := make(chan error, spinners)
	for range spinners {
		go func() {
			_, err := s.Call(ctx, spinner, abi.ExportRender, nil)
			spun <- err
		}()
	}
	for _, m := range []pluginhost.Module{benign, builtinA, builtinB} {
		if _, err := s.Call(ctx, m, abi.ExportRender, nil); err != nil {
			t.Errorf("%s beside the spinners: %v", m.Name, err)
		}
	}
	select {
	case err := <-spun:
		t.Errorf("a spinner ended (%v) before the benign calls did: the test proves nothing", err)
	default:
	}
	for range spinners {
		if err := <-spun; reasonOf(err) != runtime.ReasonTimeout {
			t.Errorf("spinning call: %v, want Timeout", err)
		}
	}
	if n := counter(t, reg, "osm_plugin_host_deaths_total", "Timeout"); n != 1 {
		t.Errorf("%v hosts killed for time, want the spinners' one", n)
	}
	if _, err := s.Call(ctx, benign, abi.ExportRender, nil); err != nil {
		t.Errorf("benign after the kill: %v", err)
	}
}

// counter reads the counter name with the given label value from reg ("": of a counter without labels).
func counter(t testing.TB, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if label == "" { // a counter without labels
				sum += m.GetCounter().GetValue()
			}
			for _, l := range m.GetLabel() {
				if l.GetValue() == label {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// TestHostileLoadsAreKilled: the same loop in the module's own code that a load runs (osm_metadata once it is
// compiled, _initialize when it is snapshotted) gets a call's budget, not the load's (an hour here: the test
// would time out).
func TestHostileLoadsAreKilled(t *testing.T) {
	for name, wasm := range map[string][]byte{
		"osm_metadata": wasmtest.Plugin(wasmtest.HeavyFillLoop, nil, 1024),
		"_initialize":  wasmtest.Spec{Initialize: wasmtest.HeavyFillLoop, Pages: 1024}.Bytes(),
	} {
		t.Run(name, func(t *testing.T) {
			s := newSupervisor(t, func(c *pluginhost.Config) {
				c.LoadTimeout = time.Hour
				// Without the in-host interrupt only the supervisor ends the loop, as it must when the
				// guest holds up the host's garbage collector.
				c.Host.NoInterrupt = true
			})
			_, err := s.Load(context.Background(), module("spin-"+name, wasm))
			if r := reasonOf(err); r != runtime.ReasonTimeout {
				t.Fatalf("load: %v, want Timeout", err)
			}
			if _, err := s.Load(context.Background(), module("hand", wasmtest.Plugin(nil, nil, 1))); err != nil {
				t.Fatalf("next load: %v", err)
			}
		})
	}
}

// TestDeadlinesCountCPUTime: a host that gets no CPU (stopped, as a throttled pod's may be for a while) does
// not overrun: a call sent to a stopped host for twice its CPU budget of wall-clock time succeeds once the
// host runs again. A host that never gets CPU again is killed at the wall-clock cap.
func TestDeadlinesCountCPUTime(t *testing.T) {
	s := newSupervisor(t, func(c *pluginhost.Config) { c.WallFactor = 10 }) // budget 1.5 s of CPU, cap 15 s
	ctx := context.Background()
	m := module("hand", wasmtest.Plugin(nil, nil, 1))
	if _, err := s.Load(ctx, m); err != nil {
		t.Fatal(err)
	}
	pid := s.HostPID(m)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Call(ctx, m, abi.ExportRender, nil)
		done <- err
	}()
	waitFor(t, "the call to be sent", func() bool { return s.InFlight(m) > 0 })
	// The stimulus, not an ordering: the host gets no CPU for twice the call's CPU budget, a fifth of its
	// wall-clock cap.
	time.Sleep(3 * time.Second)
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("a call to a host that got no CPU for twice its budget: %v", err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Call(ctx, m, abi.ExportRender, nil); reasonOf(err) != runtime.ReasonTimeout {
		t.Fatalf("a call to a host stopped for good: %v, want Timeout at the wall-clock cap", err)
	}
}

// TestQuarantine: every death of a tenant's host is one strike against its module, however many operations
// it had in flight; the second within the window quarantines the module (its calls fail at once with
// Quarantined), and the quarantine expires. A built-in module is never quarantined.
func TestQuarantine(t *testing.T) {
	// Without the in-host interrupt every timeout is a kill, whatever the loop does.
	s := newSupervisor(t, func(c *pluginhost.Config) {
		c.Host.NoInterrupt = true
		c.Quarantine = 2 * time.Second
	})
	ctx := context.Background()
	hostile := module("fill", wasmtest.Plugin(nil, wasmtest.HeavyFillLoop, 1024))
	// One death with three calls in flight: one strike.
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := s.Call(ctx, hostile, abi.ExportRender, nil)
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; reasonOf(err) != runtime.ReasonTimeout {
			t.Fatalf("concurrent call: %v, want Timeout", err)
		}
	}
	if _, err := s.Call(ctx, hostile, abi.ExportRender, nil); reasonOf(err) != runtime.ReasonTimeout {
		t.Fatalf("the call after one host death: %v, want Timeout (one strike, not quarantined)", err)
	}
	_, err := s.Call(ctx, hostile, abi.ExportRender, nil)
	if reasonOf(err) != pluginhost.ReasonQuarantined {
		t.Fatalf("the call after two host deaths: %v, want Quarantined", err)
	}
	if s.HostPID(hostile) != 0 {
		t.Error("a quarantined module's call started a host")
	}
	if _, err := s.Call(ctx, module("hand", wasmtest.Plugin(nil, nil, 1)), abi.ExportRender, nil); err != nil {
		t.Errorf("another module: %v", err)
	}
	for i := 0; reasonOf(err) == pluginhost.ReasonQuarantined; i++ {
		if i > 600 {
			t.Fatalf("still quarantined a minute later; the quarantine lasts 2 s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
		_, err = s.Call(ctx, hostile, abi.ExportRender, nil)
	}
	if reasonOf(err) != runtime.ReasonTimeout {
		t.Errorf("once the quarantine expired: %v, want the module run again (Timeout)", err)
	}
	builtin := hostile
	builtin.Name, builtin.Builtin = "builtin-fill", true
	for i := range 3 {
		if _, err := s.Call(ctx, builtin, abi.ExportRender, nil); reasonOf(err) != runtime.ReasonTimeout {
			t.Fatalf("built-in call %d: %v, want Timeout, never Quarantined", i, err)
		}
	}
}

// TestMemoryWatchdog: a call that grows its host past the memory limit gets the host killed, and fails
// with OutOfMemory, though its CPU budget is far from spent.
func TestMemoryWatchdog(t *testing.T) {
	ctx := context.Background()
	probe := newSupervisor(t, nil)
	if _, err := probe.Load(ctx, module("hand", wasmtest.Plugin(nil, nil, 1))); err != nil {
		t.Fatal(err)
	}
	// A host's resident memory with a module loaded, plus half of what the hog touches.
	limit := residentBytes(t, probe.PIDs()[0]) + 32<<20
	s := newSupervisor(t, func(c *pluginhost.Config) {
		c.MaxRSS = limit
		c.Host.Timeout = time.Hour
	})
	_, err := s.Call(ctx, module("hog", wasmtest.Plugin(nil, wasmtest.FillThenSpin, 1024)), abi.ExportRender, nil)
	if reasonOf(err) != runtime.ReasonOutOfMemory {
		t.Fatalf("hog: %v, want OutOfMemory", err)
	}
}

// TestAHostsDeathIsItsModules: a host killed from outside (as the kernel's OOM killer would) fails every
// operation of a tenant's module in flight there with HostCrashed, one strike; in the built-in host the
// operations run again on a fresh host and succeed.
func TestAHostsDeathIsItsModules(t *testing.T) {
	s := newSupervisor(t, func(c *pluginhost.Config) { c.Host.Timeout = time.Hour })
	ctx := context.Background()
	slow := module("slow", wasmtest.Plugin(nil, wasmtest.SpinRender, 1024))
	builtin := module("builtin-slow", wasmtest.Plugin(nil, wasmtest.Fills(40), 1024))
	builtin.Builtin = true
	for _, tc := range []struct {
		m    pluginhost.Module
		want runtime.Reason
	}{{slow, pluginhost.ReasonHostCrashed}, {builtin, ""}} {
		if _, err := s.Load(ctx, tc.m); err != nil {
			t.Fatal(err)
		}
		pid := s.HostPID(tc.m)
		errs := make(chan error, 3)
		for range 3 {
			go func() {
				_, err := s.Call(ctx, tc.m, abi.ExportRender, nil)
				errs <- err
			}()
		}
		waitFor(t, "three calls in flight", func() bool { return s.InFlight(tc.m) == 3 })
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := <-errs; reasonOf(err) != tc.want {
				t.Errorf("%s: call in flight: %v, want %q", tc.m.Name, err, tc.want)
			}
		}
	}
	if _, err := s.Load(ctx, slow); err != nil {
		t.Errorf("after one host death, its module is not quarantined: %v", err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i > 600 {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
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
	m := module("hand", wasmtest.Plugin(nil, nil, 1))
	for i := range 3 {
		var err error
		// Past the back-off of the previous round's start, a load starts a host again.
		waitFor(t, "the start back-off to pass", func() bool {
			_, err = s.Load(context.Background(), m)
			return err == nil || !strings.Contains(err.Error(), "failed to start less than")
		})
		if r := reasonOf(err); r != pluginhost.ReasonHostCrashed || !strings.Contains(err.Error(), "did not start") {
			t.Fatalf("load %d: %v, want HostCrashed: did not start", i, err)
		}
		if _, err := s.Load(context.Background(), m); err == nil || !strings.Contains(err.Error(), "failed to start less than") {
			t.Fatalf("an immediate retry: %v, want the start back-off", err)
		}
	}
}

// TestTenantsHostsAreBounded: past MaxHosts the least recently used idle tenant's host stops; with every
// host busy a new module waits for one, and the built-in host does not count.
func TestTenantsHostsAreBounded(t *testing.T) {
	s := newSupervisor(t, func(c *pluginhost.Config) {
		c.MaxHosts = 2
		c.Host.Timeout = time.Hour
	})
	ctx := context.Background()
	a, b, c := module("a", wasmtest.Plugin(nil, nil, 1)), module("b", wasmtest.Plugin(nil, nil, 2)), module("c", wasmtest.Plugin(nil, nil, 3))
	builtin := module("builtin", wasmtest.Plugin(nil, nil, 4))
	builtin.Builtin = true
	for _, m := range []pluginhost.Module{a, b, builtin, c} {
		if _, err := s.Load(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if s.HostPID(a) != 0 || s.HostPID(b) == 0 || s.HostPID(c) == 0 || s.HostPID(builtin) == 0 {
		t.Fatalf("hosts of a, b, c, built-in: %d %d %d %d; want a's stopped (least recently used)", s.HostPID(a), s.HostPID(b), s.HostPID(c), s.HostPID(builtin))
	}
	// b and c busy: a waits until one of them is done.
	release := make(chan struct{})
	busy := make(chan error, 2)
	for _, m := range []pluginhost.Module{b, c} {
		go func() { busy <- s.Hold(ctx, m, release) }()
	}
	waitFor(t, "b and c busy", func() bool { return s.InFlight(b) == 1 && s.InFlight(c) == 1 })
	got := make(chan error, 1)
	go func() {
		_, err := s.Call(ctx, a, abi.ExportRender, nil)
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("a ran (%v) while both hosts were busy", err)
	case <-time.After(time.Second):
	}
	close(release)
	if err := <-got; err != nil {
		t.Fatalf("a once a host was free: %v", err)
	}
	for range 2 {
		if err := <-busy; err != nil {
			t.Error(err)
		}
	}
}

// TestANamespacesHostsAreBounded: one namespace's modules get at most MaxHostsPerNamespace hosts (and so as
// many compiles) at once; past it they wait for their own namespace's hosts, while another namespace's module
// gets a host at once.
func TestANamespacesHostsAreBounded(t *testing.T) {
	s := newSupervisor(t, func(c *pluginhost.Config) {
		c.MaxHostsPerNamespace = 1
		c.Host.Timeout = time.Hour
	})
	ctx := context.Background()
	inNS := func(m pluginhost.Module, ns string) pluginhost.Module { m.Namespace = ns; return m }
	a := inNS(module("a", wasmtest.Plugin(nil, nil, 1)), "minting")
	b := inNS(module("b", wasmtest.Plugin(nil, nil, 2)), "minting")
	other := inNS(module("other", wasmtest.Plugin(nil, nil, 3)), "quiet")
	release := make(chan struct{})
	held := make(chan error, 1)
	go func() { held <- s.Hold(ctx, a, release) }()
	waitFor(t, "a's host busy", func() bool { return s.InFlight(a) == 1 })
	got := make(chan error, 1)
	go func() {
		_, err := s.Call(ctx, b, abi.ExportRender, nil)
		got <- err
	}()
	if _, err := s.Call(ctx, other, abi.ExportRender, nil); err != nil {
		t.Fatalf("another namespace's module while the first namespace's host is busy: %v", err)
	}
	select {
	case err := <-got:
		t.Fatalf("a second module of the namespace ran (%v) while its one host was busy", err)
	default:
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the namespace's second module once its host was free: %v", err)
	}
	if s.HostPID(a) != 0 {
		t.Error("the namespace's idle host was not stopped to make room")
	}
}

// TestTenantsHostsRunAtALowerPriority: a tenant's host runs at the configured nice value, the built-in host
// at the controller's.
func TestTenantsHostsRunAtALowerPriority(t *testing.T) {
	s := newSupervisor(t, nil)
	ctx := context.Background()
	tenant := module("tenant", wasmtest.Plugin(nil, nil, 1))
	builtin := module("builtin", wasmtest.Plugin(nil, nil, 2))
	builtin.Builtin = true
	for _, m := range []pluginhost.Module{tenant, builtin} {
		if _, err := s.Load(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	own := niceOf(t, os.Getpid())
	if got := niceOf(t, s.HostPID(tenant)); got != pluginhost.DefaultTenantNice {
		t.Errorf("a tenant's host runs at nice %d, want %d", got, pluginhost.DefaultTenantNice)
	}
	if got := niceOf(t, s.HostPID(builtin)); got != own {
		t.Errorf("the built-in host runs at nice %d, want the controller's %d", got, own)
	}
}

// niceOf reads a process's nice value (field 19 of /proc/<pid>/stat).
func niceOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	n, err := strconv.Atoi(f[16])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTheWireIsBounded: what a module decides to put into an error (a compile error quotes its export names,
// a plugin error its own input) crosses the wire truncated, and the operation fails at once with its reason;
// the host is neither wedged nor killed.
func TestTheWireIsBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := newSupervisor(t, func(c *pluginhost.Config) {
		c.Registerer = reg
		c.Host.Timeout = time.Hour // a wedge would hold the test until go test's own timeout
		c.LoadTimeout = time.Hour
	})
	ctx := context.Background()
	huge := strings.Repeat("x", 2<<20)
	_, err := s.Load(ctx, module("bad-export", wasmtest.Spec{BadExport: huge, Pages: 1}.Bytes()))
	if reasonOf(err) != runtime.ReasonInvalidModule {
		t.Errorf("a module with a 2 MiB export name the compiler refuses: %v, want InvalidModule", truncated(err))
	}
	if err != nil && len(err.Error()) > 64<<10 {
		t.Errorf("its error is %d bytes, want it truncated", len(err.Error()))
	}
	echo := module("error-input", wasmtest.Plugin(nil, wasmtest.ErrorInput, 64, wasmtest.InputOffset, wasmtest.ErrorSet))
	_, err = s.Call(ctx, echo, abi.ExportRender, []byte(huge))
	if reasonOf(err) != runtime.ReasonPluginError {
		t.Errorf("a plugin error set to its 2 MiB input: %v, want PluginError", truncated(err))
	}
	if err != nil && len(err.Error()) > 64<<10 {
		t.Errorf("its error is %d bytes, want it truncated", len(err.Error()))
	}
	if n := counter(t, reg, "osm_plugin_host_deaths_total", "HostCrashed") + counter(t, reg, "osm_plugin_host_deaths_total", "Timeout"); n != 0 {
		t.Errorf("%v hosts died; an oversized error must fail its operation, not its host", n)
	}
}

func truncated(err error) string {
	if err == nil {
		return "<nil>"
	}
	if s := err.Error(); len(s) > 300 {
		return s[:300] + fmt.Sprintf("… (%d bytes)", len(s))
	}
	return err.Error()
}

// TestAnIdleHostStops: the main host exits once no operation used it for the idle timeout, but never under a
// call that runs longer than that; the next call starts a new host, which loads the module again.
func TestAnIdleHostStops(t *testing.T) {
	const idle = 300 * time.Millisecond
	s := newSupervisor(t, func(c *pluginhost.Config) { c.IdleTimeout = idle })
	ctx := context.Background()
	m := module("hand", wasmtest.Plugin(nil, nil, 1))
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
	if _, err := s.Call(ctx, module("spin", wasmtest.Plugin(nil, wasmtest.SpinRender, 1)), abi.ExportRender, nil); reasonOf(err) != runtime.ReasonTimeout {
		t.Errorf("a call longer than the idle timeout: %v, want Timeout", err)
	}
}
