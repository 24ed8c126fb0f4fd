package app_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/plugin"
	"github.com/osmhq/osm/host/pluginhost"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/testenv"
	"github.com/osmhq/osm/plugins"
	"github.com/osmhq/osm/sdk/runtime"
	"github.com/osmhq/osm/sdk/wasmtest"
)

// hostileTenantSetup starts the real controller against a real API server with the shipped ubuntu plugin (a
// built-in with its build-time digest: the trusted host), the selective test plugin and the test's hostile
// modules (built-ins without a recorded digest: each runs in a host of its own, as a tenant's pulled module
// does), the ubuntu profile in the controller's namespace, and returns the client.
func hostileTenantSetup(t *testing.T, hostile map[string][]byte, cfg plugin.Config) client.Client {
	t.Helper()
	env := testenv.Start(t, testenv.Options{})
	for _, ns := range []string{userDataNS, tenantA, tenantB} {
		ensureNamespace(t, env, ns)
	}
	clusterInfo(t, env)
	dir := builtins(t, nil)
	for _, f := range []string{"ubuntu.wasm", "ubuntu.wasm.sha256"} {
		copyFile(t, filepath.Join("..", "..", "plugins", "dist", f), filepath.Join(dir, f))
	}
	for name, wasm := range hostile {
		if err := os.WriteFile(filepath.Join(dir, name+".wasm"), wasm, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	startOSM(t, env, nil, app.Options{Builtins: os.DirFS(dir), DisableDefaultOSPs: true, WorkerCount: 4, Plugins: cfg})
	defaults, err := plugins.DefaultProfiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range defaults {
		if d.Name == "osp-ubuntu" {
			osp := d.DeepCopy()
			osp.Namespace = osmNamespace
			if err := env.Client.Create(context.Background(), osp); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := env.Client.Create(context.Background(), testOSP("osp-testos", "v1.0.0")); err != nil {
		t.Fatal(err)
	}
	return env.Client
}

// renderIn creates a MachineDeployment in ns (on profile osp of the controller's namespace) and returns how long
// its bootstrap Secret took.
func renderIn(t *testing.T, c client.Client, ns, name, os, osp string) time.Duration {
	t.Helper()
	md := newMD(t, name, os, "aws", osp)
	md.Namespace = ns
	start := time.Now()
	if err := c.Create(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	waitForSecret(t, c, name+"-"+ns+"-bootstrap-config", "1")
	return time.Since(start)
}

var errNotYet = errors.New("not yet")

// oscReady returns the Ready condition of the OSC of MachineDeployment ns/name, or nil.
func oscReady(t *testing.T, c client.Client, ns, name string) *metav1.Condition {
	t.Helper()
	osc := &osmv1alpha1.OperatingSystemConfig{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: osmNamespace, Name: name + "." + ns + "-config"}, osc); err != nil {
		return nil
	}
	return meta.FindStatusCondition(osc.Status.Conditions, osmv1alpha1.ConditionReady)
}

// spinningHost returns the tenant's plugin host of this test binary that has used the most CPU time, if that
// is at least min, else 0. Tenants' hosts only: the test's kube-apiserver and etcd are children of the test
// binary too, and a compile process, which runs no guest code and ends, uses as much while it compiles.
func spinningHost(t *testing.T, min time.Duration) int {
	t.Helper()
	most, busiest := time.Duration(0), 0
	for _, pid := range pluginHosts(t) {
		env, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if !bytes.Contains(env, []byte(`"role":"tenant"`)) {
			continue
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.Atoi(f[11])
		st, _ := strconv.Atoi(f[12])
		if cpu := time.Duration(ut+st) * 10 * time.Millisecond; cpu >= min && cpu > most {
			most, busiest = cpu, pid
		}
	}
	return busiest
}

// TestAStuckTenantModuleCostsOnlyItself: a tenant's module stuck in its own code while it loads (here: its
// _initialize, which its host runs before the osm_metadata call that completes the load, filling 64 MiB 600
// times per iteration, with a plugin timeout of ten minutes) holds its own host only. While that host still spins, another tenant's MachineDeployments on
// the shipped ubuntu plugin and on another module render. The test measures their latency against the same
// renders before the attack (a figure in the log: a benchmark, not an assertion).
func TestAStuckTenantModuleCostsOnlyItself(t *testing.T) {
	// Not parallel: spinningHost looks at every plugin host of the test binary.
	if testing.Short() {
		t.Skip("starts a kube-apiserver")
	}
	c := hostileTenantSetup(t, map[string][]byte{"stuck": wasmtest.Spec{Initialize: wasmtest.HeavyFillLoop, Pages: 1024}.Bytes()},
		plugin.Config{Timeout: 10 * time.Minute})
	calmUbuntu := renderIn(t, c, tenantB, "calm-ubuntu", "ubuntu", "osp-ubuntu")
	calmTestos := renderIn(t, c, tenantB, "calm-testos", "testos", "osp-testos")

	stuck := testOSP("osp-stuck", "v1.0.0")
	stuck.Namespace = tenantA
	stuck.Spec.Plugin = &osmv1alpha1.PluginReference{Builtin: "stuck"}
	if err := c.Create(context.Background(), stuck); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), tenantMD(t, tenantA, "attack", "osp-stuck", tenantA)); err != nil {
		t.Fatal(err)
	}
	var host int
	eventually(t, wait, "the stuck module's host spinning", func() error {
		if host = spinningHost(t, time.Second); host == 0 {
			return errNotYet
		}
		return nil
	})
	duringUbuntu := renderIn(t, c, tenantB, "during-ubuntu", "ubuntu", "osp-ubuntu")
	duringTestos := renderIn(t, c, tenantB, "during-testos", "testos", "osp-testos")
	if _, err := os.Stat("/proc/" + strconv.Itoa(host) + "/stat"); err != nil {
		t.Errorf("the stuck module's host %d ended before the other tenant's renders did: the test proves nothing", host)
	}
	if cond := oscReady(t, c, tenantA, "attack"); cond != nil && cond.Status == "True" {
		t.Errorf("the stuck module's MachineDeployment rendered: %+v", cond)
	}
	t.Logf("another tenant's renders, before and during the attack: ubuntu %s -> %s (%.2fx), testos %s -> %s (%.2fx)",
		calmUbuntu.Round(time.Millisecond), duringUbuntu.Round(time.Millisecond), duringUbuntu.Seconds()/calmUbuntu.Seconds(),
		calmTestos.Round(time.Millisecond), duringTestos.Round(time.Millisecond), duringTestos.Seconds()/calmTestos.Seconds())
}

// TestAQuarantineExpires: a tenant's module whose render outlasts every iteration check (the plugin timeout is
// 1 s) gets its own host killed, one strike per death: the first two MachineDeployments on it fail with a
// timeout, the third at once with "quarantined" (PluginFailed); once the quarantine (20 s here) expires, a new
// one runs the module again (a timeout again) instead of being refused until the controller restarts. The
// shipped ubuntu plugin renders afterwards and no other tenant's object hears of a quarantine.
func TestAQuarantineExpires(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a kube-apiserver")
	}
	c := hostileTenantSetup(t, map[string][]byte{"fill": wasmtest.Plugin(nil, wasmtest.HeavyFillLoop, 1024)},
		plugin.Config{Timeout: time.Second, Host: plugin.HostConfig{Grace: 500 * time.Millisecond, Quarantine: 20 * time.Second}})
	fill := testOSP("osp-fill", "v1.0.0")
	fill.Namespace = tenantA
	fill.Spec.Plugin = &osmv1alpha1.PluginReference{Builtin: "fill"}
	if err := c.Create(context.Background(), fill); err != nil {
		t.Fatal(err)
	}
	attack := func(i int) *metav1.Condition {
		t.Helper()
		name := "attack-" + strconv.Itoa(i)
		if err := c.Create(context.Background(), tenantMD(t, tenantA, name, "osp-fill", tenantA)); err != nil {
			t.Fatal(err)
		}
		var cond *metav1.Condition
		eventually(t, wait, name+" failing", func() error {
			if cond = oscReady(t, c, tenantA, name); cond == nil || cond.Reason != osmv1alpha1.ReasonPluginFailed {
				return errNotYet
			}
			return nil
		})
		return cond
	}
	for i := range 2 {
		if cond := attack(i); strings.Contains(cond.Message, "quarantined") || !strings.Contains(cond.Message, "killed") {
			t.Fatalf("MachineDeployment %d: %s, want its host killed, not a quarantine", i, cond.Message)
		}
	}
	if cond := attack(2); !strings.Contains(cond.Message, "quarantined") {
		t.Fatalf("the MachineDeployment after two host deaths: %s, want quarantined", cond.Message)
	}
	i := 3
	eventually(t, 3*wait, "the quarantine to expire", func() error {
		cond := attack(i)
		i++
		if strings.Contains(cond.Message, "quarantined") {
			return errNotYet
		}
		if !strings.Contains(cond.Message, "killed") {
			t.Errorf("once the quarantine expired: %s, want the module run again (its host killed)", cond.Message)
		}
		return nil
	})
	renderIn(t, c, tenantB, "after-ubuntu", "ubuntu", "osp-ubuntu")
	events := &corev1.EventList{}
	if err := c.List(context.Background(), events); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.InvolvedObject.Namespace == tenantB && strings.Contains(e.Message, "quarantined") {
			t.Errorf("another tenant's MachineDeployment was told of a quarantine: %s", e.Message)
		}
	}
}

// TestATamperedCacheNeverRunsOtherCode: the ubuntu plugin's cached snapshot (the code its instances start
// from, seeded from the build's precompiled cache) is replaced by flatcar's, ubuntu's digest unchanged. The
// control shows that a runtime reading that cache unchecked loads flatcar's plugin for ubuntu's bytes; through
// the real controller, a MachineDeployment on ubuntu renders ubuntu's cloud-config: the built-in host checks
// the cache against the build's digests before it reads a module and, finding a mismatch, compiles ubuntu
// from its own bytes.
func TestATamperedCacheNeverRunsOtherCode(t *testing.T) {
	// Not parallel: it waits for every plugin host of the test binary to stop (pluginHosts).
	if testing.Short() {
		t.Skip("starts a kube-apiserver")
	}
	cache := t.TempDir()
	c := hostileTenantSetup(t, nil, plugin.Config{CacheDir: cache})
	// A test binary's hosts key snapshots by wazero version "unknown" (see hack/build-plugins.sh).
	hosts := pluginHosts(t)
	snapshot := func(dir, name string) string {
		t.Helper()
		wasm, err := os.ReadFile(filepath.Join("..", "..", "plugins", "dist", name+".wasm"))
		if err != nil {
			t.Fatal(err)
		}
		files, err := filepath.Glob(filepath.Join(dir, "osm-snapshots", "unknown", strings.TrimPrefix(runtime.Digest(wasm), "sha256:")+"-*.wasm"))
		if err != nil || len(files) != 1 {
			t.Fatalf("%s's snapshot in %s: %v, %v", name, dir, files, err)
		}
		return files[0]
	}
	builtin := pluginhost.BuiltinDir(filepath.Join(cache, "wazero"))
	ubuntu := snapshot(builtin, "ubuntu")
	flatcar, err := os.ReadFile(snapshot(filepath.Join("..", "..", "plugins", "compiled"), "flatcar"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(ubuntu); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ubuntu, flatcar, 0o600); err != nil {
		t.Fatal(err)
	}
	// Hosts started before the tamper may hold ubuntu already: the render must come from a host started after.
	eventually(t, wait, "the plugin hosts started before the tamper to stop", func() error {
		for _, pid := range hosts {
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
				return errNotYet
			}
		}
		return nil
	})

	rt, err := runtime.New(runtime.Config{CacheDir: builtin, ReadOnlyCache: true})
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := os.ReadFile(filepath.Join("..", "..", "plugins", "dist", "ubuntu.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := rt.Load(context.Background(), "ubuntu", wasm)
	if err != nil || mod.Metadata().Name != "flatcar" {
		var name string
		if mod != nil {
			name = mod.Metadata().Name
		}
		t.Fatalf("control: ubuntu's bytes over the tampered cache load as %q, %v; want flatcar's plugin (else the tamper is not one)", name, err)
	}
	_ = rt.Close(context.Background())

	renderIn(t, c, tenantB, "after-tamper", "ubuntu", "osp-ubuntu")
	s := waitForSecret(t, c, "after-tamper-"+tenantB+"-bootstrap-config", "1")
	if cfg := string(s.Data[render.CloudConfigKey]); !strings.HasPrefix(cfg, "#cloud-config") || strings.Contains(strings.ToLower(cfg), "flatcar") {
		t.Errorf("ubuntu over the tampered cache rendered:\n%.400s\nwant ubuntu's cloud-config", cfg)
	}
}

// pluginHosts returns the plugin host processes, children of this one running its executable or
// osm-plugin-host.
func pluginHosts(t *testing.T) []int {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		if exe, _ := os.Readlink("/proc/" + e.Name() + "/exe"); exe == self || filepath.Base(exe) == "osm-plugin-host" {
			pids = append(pids, pid)
		}
	}
	return pids
}
