package app_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/plugin"
	"github.com/osmhq/osm/host/testenv"
	"github.com/osmhq/osm/sdk/wasmtest"
)

// hostilePlugin is a module a test attacks the controller with, the reason its MachineDeployments must fail
// with, and what the condition's message must say (if anything in particular).
type hostilePlugin struct {
	wasm   []byte
	reason string
	want   []string
}

// hostilePlugins are modules that took the whole controller down, or froze it, while plugins ran in its
// process: loops whose every iteration is a bulk memory operation or a host call (a 64 MiB memory.fill loop
// reported its 5 s timeout after 131 s and stopped every goroutine at the first garbage collection), the same
// in osm_metadata and _initialize, a compile bomb (1.35 GB to compile), endless recursion; and modules that
// are refused before they compile, each of which once ended the process or grew it by gigabytes (sdk/runtime
// TestModulesRefusedBeforeCompiling replays them in the runtime alone). Each must fail only its own
// MachineDeployments, with the reason given.
func hostilePlugins() map[string]hostilePlugin {
	oneFunc := []wasmtest.RawSection{{ID: 1, Entries: [][]byte{{0x60, 0, 0}}}, {ID: 3, Entries: [][]byte{{0}}}} // type () -> (), one function of it
	grow := []byte{0xd0, 0x70, 0x41, 0xff, 0xff, 0xff, 0xff, 0x07, 0xfc, 0x0f, 0x00, 0x1a}
	failed, invalid := osmv1alpha1.ReasonPluginFailed, osmv1alpha1.ReasonPluginInvalid
	return map[string]hostilePlugin{
		"spin":        {wasmtest.Plugin(nil, wasmtest.SpinRender, 1), failed, nil},
		"fill":        {wasmtest.Plugin(nil, wasmtest.FillLoop, 1024), failed, nil},
		"heavy-fill":  {wasmtest.Plugin(nil, wasmtest.HeavyFillLoop, 1024), failed, nil},
		"copy":        {wasmtest.Plugin(nil, wasmtest.CopyLoop, 1024), failed, nil},
		"random":      {wasmtest.Plugin(nil, wasmtest.RandomLoop, 1024, wasmtest.RandomGet), failed, nil},
		"recursion":   {wasmtest.Plugin(nil, wasmtest.SelfRecursiveRender, 1), failed, nil},
		"metadata":    {wasmtest.Plugin(wasmtest.HeavyFillLoop, nil, 1024), failed, nil},
		"initialize":  {wasmtest.Spec{Initialize: wasmtest.HeavyFillLoop, Pages: 1024}.Bytes(), failed, nil},
		"compilebomb": {wasmtest.Raw(append(oneFunc, wasmtest.RawSection{ID: 4, Entries: [][]byte{{0x70, 0x00, 0x01}}}, wasmtest.RawSection{ID: 10, Entries: [][]byte{wasmtest.Body(bytes.Repeat([]byte{0x41, 0x00, 0x11, 0x00, 0x00}, 100_000))}})...), failed, nil},
		// 15 bytes claiming 2^32 data segments: "fatal error: runtime: out of memory".
		"lying-count": {[]byte("\x00asm\x01\x00\x00\x00\x0b\x05\xff\xff\xff\xff\x0f"), invalid, []string{"4294967295 entries declared in 0 bytes"}},
		// Grows a table by 2^31 entries (16 GiB) on the Go heap: "fatal error: out of memory" under ulimit -v 8000000.
		"table-grow": {wasmtest.Raw(append(oneFunc, wasmtest.RawSection{ID: 4, Entries: [][]byte{{0x70, 0x00, 0x00}}},
			wasmtest.RawSection{ID: 10, Entries: [][]byte{wasmtest.Body(grow)}})...), invalid, []string{"table.grow on table 0, which declares no maximum"}},
		// A million globals in 5 MB held 1.3 GiB once loaded.
		"globals": {wasmtest.Raw(wasmtest.RawSection{ID: 6, Entries: slices.Repeat([][]byte{{0x7f, 0x00, 0x41, 0x00, 0x0b}}, 1_001)}), invalid, []string{"globals 1001 exceeds the limit of 1000"}},
	}
}

// TestHostilePluginsCannotStopTheController runs the real controller (the drop-in start, no admission in
// front) against a real API server, with profiles whose plugins are the hostile modules above, all at once.
// Plugins run in the plugin host process: each hostile MachineDeployment fails with its reason and an event
// within three plugin timeouts (or the load timeout, for loads), gets no user-data, and meanwhile /healthz,
// probed every 100 ms, never misses for a second, healthy MachineDeployments created during the attack get
// their Secrets, and the controller's own memory stays flat.
func TestHostilePluginsCannotStopTheController(t *testing.T) {
	// Not parallel: it bounds the process's memory growth and its /healthz outages, which other tests' work
	// would add to.
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	c := env.Client
	ensureNamespace(t, env, userDataNS)
	clusterInfo(t, env)
	modules := hostilePlugins()
	dir := builtins(t, nil)
	for name, m := range modules {
		if err := os.WriteFile(filepath.Join(dir, name+".wasm"), m.wasm, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const timeout = 2 * time.Second // fillDefaults' plugin timeout
	// A real plugin's cold compile on two cores busy with the rest of the suite takes seconds.
	const loadTimeout = 20 * time.Second
	addr := testenv.FreeAddress(t)
	startOSM(t, env, nil, app.Options{Builtins: os.DirFS(dir), DisableDefaultOSPs: true, WorkerCount: 4, HealthProbeAddress: addr,
		Plugins: plugin.Config{Host: plugin.HostConfig{LoadTimeout: loadTimeout, Grace: time.Second}}})

	if err := c.Create(ctx, testOSP("osp-testos", "v1.0.0")); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, newMD(t, "before", "testos", "aws", "osp-testos")); err != nil {
		t.Fatal(err)
	}
	waitForSecret(t, c, "before-kube-system-bootstrap-config", "1")
	rssBefore := processRSS(t)

	stopProbe := probeHealth(t, "http://"+addr+"/healthz")
	started := time.Now()
	for name := range modules {
		osp := testOSP("osp-"+name, "v1.0.0")
		osp.Spec.Plugin = &osmv1alpha1.PluginReference{Builtin: name}
		if err := c.Create(ctx, osp); err != nil {
			t.Fatalf("creating osp-%s: %v", name, err)
		}
		if err := c.Create(ctx, newMD(t, name, "testos", "aws", "osp-"+name)); err != nil {
			t.Fatal(err)
		}
	}
	// Healthy work arriving during the attack.
	for i := range 3 {
		if err := c.Create(ctx, newMD(t, fmt.Sprintf("during-%d", i), "testos", "openstack", "osp-testos")); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		waitForSecret(t, c, fmt.Sprintf("during-%d-kube-system-bootstrap-config", i), "1")
	}
	t.Logf("healthy MachineDeployments created during the attack rendered %s after it began", time.Since(started).Round(time.Millisecond))

	var failedBy time.Duration
	for name, m := range modules {
		waitForNotReady(t, c, name+".kube-system-config", m.reason, m.want...)
		failedBy = max(failedBy, time.Since(started))
		waitForEvent(t, c, name, m.reason)
		secret := name + "-kube-system-bootstrap-config"
		if err := c.Get(ctx, client.ObjectKey{Namespace: userDataNS, Name: secret}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: a bootstrap Secret exists for a hostile plugin (err=%v)", name, err)
		}
	}
	t.Logf("every hostile MachineDeployment reported its failure within %s", failedBy.Round(time.Millisecond))
	// Twelve at once on four workers: at most three rounds of workers, each bounded by the load timeout (the
	// hostile loads) or three call timeouts (the hostile renders).
	if limit := 3 * max(loadTimeout, 3*timeout); failedBy > limit {
		t.Errorf("the hostile MachineDeployments took %s to fail; bound %s", failedBy, limit)
	}
	longest := stopProbe()
	t.Logf("longest /healthz outage during the attack: %s", longest)
	if longest > time.Second {
		t.Errorf("/healthz did not answer for %s during the attack", longest)
	}
	if grown := int64(processRSS(t)) - int64(rssBefore); grown > 64<<20 {
		t.Errorf("the controller's process grew by %d MiB during the attack", grown>>20)
	}
	if err := c.Create(ctx, newMD(t, "after", "testos", "aws", "osp-testos")); err != nil {
		t.Fatal(err)
	}
	waitForSecret(t, c, "after-kube-system-bootstrap-config", "1")
}

// probeHealth GETs url every 100 ms until the returned function is called, which returns the longest time
// without a successful answer.
func probeHealth(t *testing.T, url string) func() time.Duration {
	t.Helper()
	stop := make(chan struct{})
	var mu sync.Mutex
	var longest time.Duration
	last := time.Now()
	done := make(chan struct{})
	client := &http.Client{Timeout: 2 * time.Second}
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			resp, err := client.Get(url)
			now := time.Now()
			if err == nil {
				ok := resp.StatusCode == http.StatusOK
				_ = resp.Body.Close()
				if ok {
					mu.Lock()
					longest = max(longest, now.Sub(last))
					last = now
					mu.Unlock()
				}
			}
		}
	}()
	return func() time.Duration {
		close(stop)
		<-done
		mu.Lock()
		defer mu.Unlock()
		return max(longest, time.Since(last))
	}
}

// processRSS is this process's resident memory after a collection: the controller's, which runs in the test.
func processRSS(t *testing.T) uint64 {
	t.Helper()
	goruntime.GC()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Fatal(err)
	}
	var size, rss uint64
	if _, err := fmt.Sscan(string(b), &size, &rss); err != nil {
		t.Fatal(err)
	}
	return rss * uint64(os.Getpagesize())
}
