package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/osmhq/osm/crds"
	"github.com/osmhq/osm/host/testenv"
	"github.com/osmhq/osm/plugins"
)

// BenchmarkController measures the drop-in configuration: the controller binary built from this tree, started
// with upstream's flags (it installs its default profiles, every default plugin available), webhooks off, a
// warm plugin cache, on a fresh control plane holding N ubuntu/aws MachineDeployments created before it starts.
// It prints the time until all N bootstrap Secrets exist, peak RSS, CPU seconds, API writes and bytes per
// MachineDeployment, writes while idle, renders per MachineDeployment, and where the memory is.
// Run it with `make bench-controller`; OSM_BENCH_MDS sets N (default 500, a comma list runs each size).
//
// Diagnostics (perturb the run; not for the figures): OSM_BENCH_PPROF_DIR=dir starts the controller with
// -pprof-address and saves heap, allocs, block and mutex profiles, a 4 s trace of the start, a 5 s trace and a
// 10 s CPU profile into dir.
// Experiments: OSM_BENCH_OURS_ARGS adds flags, OSM_BENCH_OURS_ENV adds environment (e.g. "GOGC=50").
func BenchmarkController(b *testing.B) {
	ctrllog.SetLogger(logr.Discard())
	printSetup()
	ours := oursUnderTest(b)
	runBench(b, ours, len(benchOSes())) // warms the plugin cache (one MachineDeployment per OS) and the page cache; not reported
	var results []benchResult
	for range b.N {
		for _, n := range benchSizes() {
			results = append(results, runBench(b, ours, n))
		}
	}
	summarize(b, results)
}

// BenchmarkCompare runs this tree's controller and upstream OSM's (OSM_BENCH_UPSTREAM, built as
// ../shared/bench/README.md says, CRDs in the crds directory next to it) alternately, each on a fresh control
// plane with the same MachineDeployments and the same flags, OSM_BENCH_ROUNDS times (default 3), and prints
// the medians and the ratios. Run it with `make bench-compare UPSTREAM=/path/to/osm-controller`.
//
// With OSM_BENCH_BASELINE naming an osm-controller built from an earlier commit instead, it compares this tree
// with that build, run the same way as ours ("baseline"): what one change bought, measured side by side.
func BenchmarkCompare(b *testing.B) {
	ctrllog.SetLogger(logr.Discard())
	printSetup()
	rounds := 3
	if v, err := strconv.Atoi(os.Getenv("OSM_BENCH_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	ours := oursUnderTest(b)
	var upstream controllerUnderTest
	if base := os.Getenv("OSM_BENCH_BASELINE"); base != "" {
		upstream = ours
		upstream.name, upstream.bin = "baseline", shipPrecompiled(b, installBinaries(b, base, filepath.Join(filepath.Dir(base), "osm-plugin-host")))
	} else if path := os.Getenv("OSM_BENCH_UPSTREAM"); path != "" {
		upstream = upstreamUnderTest(b, path)
	} else {
		b.Fatal("OSM_BENCH_UPSTREAM must name upstream's osm-controller binary (make bench-compare UPSTREAM=...), or OSM_BENCH_BASELINE an earlier build of ours")
	}
	// Warm-up, not reported: the plugin cache (one MachineDeployment per OS) and the page cache.
	runBench(b, ours, len(benchOSes()))
	runBench(b, upstream, len(benchOSes()))
	var results []benchResult
	for _, n := range benchSizes() {
		for round := range rounds {
			// Alternate who goes first, so neither always runs on the machine the other just warmed.
			pair := []controllerUnderTest{ours, upstream}
			if round%2 == 1 {
				pair[0], pair[1] = pair[1], pair[0]
			}
			for _, c := range pair {
				results = append(results, runBench(b, c, n))
			}
		}
	}
	summarize(b, results)
}

// printSetup says what the benchmark runs on and what it runs.
func printSetup() {
	fmt.Printf("machine: %s\nMachineDeployments: %s/aws, dealt in turn over osp-<os> (OSM_BENCH_OS)\n", machineInfo(), strings.Join(benchOSes(), ","))
}

// benchOSes are the operating systems the MachineDeployments are dealt over, in turn (OSM_BENCH_OS, a comma
// list; default ubuntu). Each names its default profile, osp-<os>, which both controllers install:
// ubuntu, flatcar, rhel, rockylinux and amzn2 are default profiles of both.
func benchOSes() []string {
	v := os.Getenv("OSM_BENCH_OS")
	if v == "" {
		return []string{"ubuntu"}
	}
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func benchSizes() []int {
	v := os.Getenv("OSM_BENCH_MDS")
	if v == "" {
		return []int{500}
	}
	var sizes []int
	for _, s := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			panic(fmt.Sprintf("OSM_BENCH_MDS=%q: want positive numbers separated by commas", v))
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// controllerUnderTest is a controller binary and how to run it.
type controllerUnderTest struct {
	name    string
	bin     string
	crds    []*apiextensionsv1.CustomResourceDefinition
	crdDirs []string
	env     []string
	args    func(kubeconfig string, metricsPort, probePort int) []string
	ours    bool
}

// upstreamFlags are the flags both controllers get, as a drop-in user runs upstream.
func upstreamFlags(kubeconfig string, metricsPort, probePort int) []string {
	return []string{"-kubeconfig", kubeconfig, "-namespace", osmNamespace, "-worker-count", "10", "-leader-elect=false",
		"-metrics-address", fmt.Sprintf("127.0.0.1:%d", metricsPort), "-health-probe-address", fmt.Sprintf("127.0.0.1:%d", probePort)}
}

func oursUnderTest(b *testing.B) controllerUnderTest {
	b.Helper()
	names, err := plugins.Names(plugins.Builtin())
	if err != nil || len(names) < 6 {
		b.Fatalf("the default plugins are not all built (%v, %v): run make plugins", names, err)
	}
	defs, err := crds.OSMDefinitions()
	if err != nil {
		b.Fatal(err)
	}
	ext, err := crds.ExternalDefinitions()
	if err != nil {
		b.Fatal(err)
	}
	// The plugin cache outlives the benchmark, as a volume outlives a controller pod.
	cacheDir := filepath.Join(os.TempDir(), "osm-bench-plugin-cache")
	extra := strings.Fields(os.Getenv("OSM_BENCH_OURS_ARGS"))
	return controllerUnderTest{name: "osm", bin: buildController(b), crds: append(defs, ext...), ours: true,
		env: strings.Fields(os.Getenv("OSM_BENCH_OURS_ENV")),
		args: func(kubeconfig string, metricsPort, probePort int) []string {
			dir := cacheDir
			if emptyCache() {
				dir = emptyCacheDir(b)
			}
			args := append(upstreamFlags(kubeconfig, metricsPort, probePort), "-webhook-port", "0", "-plugin-cache-dir", dir, "-log-format", "json")
			return append(args, extra...)
		}}
}

func upstreamUnderTest(b *testing.B, bin string) controllerUnderTest {
	b.Helper()
	if _, err := os.Stat(bin); err != nil {
		b.Fatalf("upstream controller: %v", err)
	}
	dir := filepath.Join(filepath.Dir(bin), "crds")
	if _, err := os.Stat(dir); err != nil {
		b.Fatalf("upstream's CRDs (build-upstream.sh writes them next to the binary): %v", err)
	}
	return controllerUnderTest{name: "upstream", bin: installBinaries(b, bin), crdDirs: []string{dir}, args: upstreamFlags}
}

// buildController builds osm-controller, and osm-plugin-host next to it as the image ships them.
func buildController(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	for _, name := range []string{"osm-controller", "osm-plugin-host"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), "./cmd/"+name)
		cmd.Dir = testenv.RepoRoot()
		if data, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("building %s: %v\n%s", name, err, data)
		}
	}
	return shipPrecompiled(b, installBinaries(b, filepath.Join(dir, "osm-controller"), filepath.Join(dir, "osm-plugin-host")))
}

// installBinaries copies a controller's executables (the first is the controller; the others, where they exist,
// go next to it) into a directory of their own, writes them to disk and drops them from the page cache, and
// returns the controller's path there. Every controller under test is installed this way because how a file
// entered the page cache changes how much of it a process maps: this machine's kernel maps an executable's
// page-cache folios whole, and a file just written in one piece sits in large folios. Upstream's controller
// started from a fresh copy had 41 MiB of its executable resident at the peak, from its long-built binary 29
// MiB. After the drop, each binary comes back from disk through the same page faults and readahead, in the
// warm-up run, as after a node's restart.
func installBinaries(b *testing.B, controller string, others ...string) string {
	b.Helper()
	dir := b.TempDir()
	for _, src := range append([]string{controller}, others...) {
		data, err := os.ReadFile(src)
		if errors.Is(err, fs.ErrNotExist) && src != controller {
			continue
		}
		if err != nil {
			b.Fatal(err)
		}
		if err := writeUncached(filepath.Join(dir, filepath.Base(src)), data); err != nil {
			b.Fatal(err)
		}
	}
	return filepath.Join(dir, filepath.Base(controller))
}

// shipPrecompiled puts the default plugins' precompiled code (make plugins) next to the installed controller
// bin, where the image ships it (plugins.PrecompiledDirName), and, as deploy/ runs the container
// (readOnlyRootFilesystem), on a read-only mount: a bind of the copy onto itself, remounted read-only, taken
// down when the benchmark ends. Mounting needs root; without it the copy stays writable, and the run says so.
// It returns bin.
func shipPrecompiled(b *testing.B, bin string) string {
	b.Helper()
	src := filepath.Join(testenv.RepoRoot(), "plugins", "compiled")
	dst := filepath.Join(filepath.Dir(bin), plugins.PrecompiledDirName)
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		b.Fatalf("copying the precompiled plugins next to %s: %v\n%s", bin, err, out)
	}
	if err := unix.Mount(dst, dst, "", unix.MS_BIND, ""); err != nil {
		fmt.Printf("precompiled plugins next to %s stay writable (a read-only mount needs root: %v)\n", bin, err)
		return bin
	}
	b.Cleanup(func() { _ = unix.Unmount(dst, unix.MNT_DETACH) })
	if err := unix.Mount("", dst, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		b.Fatalf("remounting %s read-only: %v", dst, err)
	}
	return bin
}

// writeUncached writes an executable file, flushes it to disk and asks the kernel to drop its pages from the
// page cache (clean pages only, hence the flush).
func writeUncached(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return err
	}
	return f.Close()
}

// stallAfter is how long a run may go without a new bootstrap Secret before it is reported as stalled.
const stallAfter = time.Minute

// benchResult is one run's measurements.
type benchResult struct {
	Name string `json:"name"`
	N    int    `json:"n"`
	// Stalled runs stopped making progress with Done of N bootstrap Secrets; their time counts as infinite.
	Stalled bool
	Done    int
	// ToAll is from starting the process to the N-th bootstrap Secret; FirstAt to the first.
	ToAll, FirstAt time.Duration
	// CPU is user+system time of the controller's process tree (the controller, the plugin hosts it runs,
	// live or exited) until the N-th bootstrap Secret; APIServerCPU and EtcdCPU are the control plane's over
	// the same time. The controller shares the cores with them: what its writes cost
	// them is as much a part of its speed as its own CPU.
	CPU, APIServerCPU, EtcdCPU time.Duration
	// HostCPU is the part of CPU spent in the controller's descendants (plugin hosts: guest code, compiles).
	HostCPU time.Duration
	// PeakRSS is the largest sum of the process tree's VmRSS, sampled every 50 ms until the end of the run
	// (after 10 s idle), in KiB. ControllerHWM is the controller process's own VmHWM, HostHWM the largest of
	// its plugin hosts', Procs the most processes the tree had at once.
	PeakRSS                       int
	ControllerHWM, HostHWM, Procs int
	// AtPeak is the smaps split of the largest sampled RSS, and PeakAt when it was sampled.
	AtPeak memSplit
	PeakAt time.Duration
	// HeapInuse and GoSys are the Go runtime's figures at the end of the run, in bytes.
	HeapInuse, GoSys float64
	Writes           writeCounts
	IdleWrites       int
	// Renders and Reconciles per MachineDeployment (our controller only); RenderMS the mean render time.
	Renders, Reconciles, RenderMS float64
	// PluginCalls and MemoHits per MachineDeployment: calls that reached a plugin host, and those the
	// output memo answered.
	PluginCalls, MemoHits float64
	// ObjectKiB is the JSON size per MachineDeployment of the objects the controller's informers may hold.
	ObjectKiB map[string]float64
	Log       string
}

func runBench(b *testing.B, c controllerUnderTest, n int) benchResult {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	bc := startBenchCluster(b, c.crds, c.crdDirs)
	defer func() {
		cancel() // ends the watch, so the API server stops at once
		bc.stop(b)
	}()
	mds := bc.prepare(b, n, benchOSes())
	bw := watchBootstrapSecrets(ctx, b, bc.cfg, mds)
	before := apiServerMetrics(ctx, b, bc.cfg)

	metricsPort, probePort := freePort(b), freePort(b)
	args := c.args(bc.kubeconfig, metricsPort, probePort)
	pprofDir := os.Getenv("OSM_BENCH_PPROF_DIR")
	pprofPort := 0
	if c.ours && pprofDir != "" {
		pprofPort = freePort(b)
		args = append(args, "-pprof-address", fmt.Sprintf("127.0.0.1:%d", pprofPort))
	}
	cmd := benchCommand(b, c.name, n, c.bin, args)
	cmd.Env = append(os.Environ(), c.env...)
	logPath := filepath.Join(os.TempDir(), fmt.Sprintf("osm-bench-%s-%d.log", c.name, n))
	logFile, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	apiCPU0, etcdCPU0 := bc.controlPlaneCPU()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	pid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	rss := sampleRSS(pid, start)
	startTraced := make(chan struct{}) // the runtime takes one execution trace at a time
	if pprofPort != 0 {
		go func() {
			defer close(startTraced)
			saveStartTrace(pprofPort, filepath.Join(pprofDir, fmt.Sprintf("trace-start-%d.out", n)))
		}()
	}

	res := benchResult{Name: c.name, N: n, Log: logPath}
	traced := pprofDir == ""
	timeout := time.After(20 * time.Minute)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastCount, lastProgress := 0, time.Now()
wait:
	for {
		select {
		case at := <-bw.all:
			res.ToAll = at.Sub(start)
			res.CPU, res.HostCPU = treeCPU(pid)
			apiCPU, etcdCPU := bc.controlPlaneCPU()
			res.APIServerCPU, res.EtcdCPU = apiCPU-apiCPU0, etcdCPU-etcdCPU0
			break wait
		case err := <-exited:
			exited <- err
			b.Fatalf("%s exited (%v) after %d of %d bootstrap Secrets; log %s:\n%s", c.name, err, bw.count(), n, logPath, tailFile(logPath, 3000))
		case <-timeout:
			b.Fatalf("%s: only %d of %d bootstrap Secrets after 20 minutes; log %s", c.name, bw.count(), n, logPath)
		case <-tick.C:
			// A controller that stops making progress (upstream can end up with two bootstrap tokens for one
			// MachineDeployment and then fails it forever) is reported as stalled; the other runs still count.
			if k := bw.count(); k != lastCount {
				lastCount, lastProgress = k, time.Now()
			} else if k > 0 && time.Since(lastProgress) > stallAfter {
				res.Stalled, res.Done = true, k
				res.ToAll = time.Since(start)
				res.CPU, res.HostCPU = treeCPU(pid)
				break wait
			}
			if !traced && bw.count() >= n/10 {
				traced = true
				if pprofPort != 0 {
					go func() {
						<-startTraced
						savePprof(pprofPort, "trace?seconds=5", filepath.Join(pprofDir, fmt.Sprintf("trace-%d.out", n)))
					}()
					go savePprof(pprofPort, "profile?seconds=10", filepath.Join(pprofDir, fmt.Sprintf("cpu-%d.pb.gz", n)))
				}
				go saveAPIServerProfile(bc.debugSocket, filepath.Join(pprofDir, fmt.Sprintf("apiserver-cpu-%s-%d.pb.gz", c.name, n)))
			}
		}
	}
	if res.Stalled {
		fmt.Printf("%-8s N=%-5d STALLED: %d of %d bootstrap Secrets, none for %s; log %s\n", c.name, n, res.Done, n, stallAfter, logPath)
	}
	res.FirstAt = bw.first.Sub(start)
	if pprofPort != 0 {
		for _, p := range []string{"heap", "allocs", "block", "mutex", "goroutine"} {
			savePprof(pprofPort, p, filepath.Join(pprofDir, fmt.Sprintf("%s-%d.pb.gz", p, n)))
		}
	}
	// Events and late writes trail the last Secret: wait until the writes stop, then count what the controller
	// writes in 10 seconds with nothing to do.
	done := settleWrites(ctx, b, bc, before)
	time.Sleep(10 * time.Second) // the idle window the benchmark counts writes in
	res.IdleWrites = diffWrites(before, apiServerMetrics(ctx, b, bc.cfg)).total - done.total
	res.Writes = done
	rss.finish()
	res.PeakRSS, res.AtPeak, res.PeakAt = rss.peakRSS, rss.atPeak, rss.peakAt
	res.ControllerHWM, res.HostHWM, res.Procs = procStatus(pid, "VmHWM"), rss.hostHWM, rss.procs
	m := scrapeController(metricsPort, "go_memstats_heap_inuse_bytes", "go_memstats_sys_bytes",
		"osm_render_duration_seconds_count", "osm_render_duration_seconds_sum", "osm_machinedeployment_reconciles_total",
		"osm_plugin_call_duration_seconds_count", "osm_plugin_cache_hits_total")
	res.HeapInuse, res.GoSys = sum(m, "go_memstats_heap_inuse_bytes"), sum(m, "go_memstats_sys_bytes")
	res.Renders = sum(m, "osm_render_duration_seconds_count") / float64(n)
	res.Reconciles = sum(m, "osm_machinedeployment_reconciles_total") / float64(n)
	res.PluginCalls, res.MemoHits = sum(m, "osm_plugin_call_duration_seconds_count")/float64(n), sum(m, "osm_plugin_cache_hits_total")/float64(n)
	res.RenderMS = sum(m, "osm_render_duration_seconds_sum") / max(sum(m, "osm_render_duration_seconds_count"), 1) * 1000
	res.ObjectKiB = map[string]float64{}
	for kind, path := range map[string]string{
		"OSCs":               "/apis/operatingsystemmanager.k8c.io/v1alpha1/namespaces/kube-system/operatingsystemconfigs",
		"user-data Secrets":  "/api/v1/namespaces/" + userDataNS + "/secrets",
		"MachineDeployments": "/apis/cluster.k8s.io/v1alpha1/namespaces/kube-system/machinedeployments",
	} {
		res.ObjectKiB[kind] = float64(objectBytes(ctx, b, bc.cfg, path)) / 1024 / float64(n)
	}
	printResult(res)
	return res
}

// settleWrites waits until the API server has seen no write for 3 seconds (at most a minute) and returns the
// writes since before.
func settleWrites(ctx context.Context, b *testing.B, bc *benchCluster, before []sample) writeCounts {
	b.Helper()
	w := diffWrites(before, apiServerMetrics(ctx, b, bc.cfg))
	for quiet, waited := 0, 0; quiet < 3 && waited < 60; waited++ {
		time.Sleep(time.Second) // the quiet second the write count must hold through
		now := diffWrites(before, apiServerMetrics(ctx, b, bc.cfg))
		if now.total == w.total {
			quiet++
		} else {
			quiet = 0
		}
		w = now
	}
	return w
}

// savePprof saves one of the controller's pprof endpoints.
func savePprof(port int, what, path string) {
	save(http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/%s", port, what), path)
}

// saveStartTrace saves a 4 s execution trace from the moment the controller's pprof endpoint answers: a third of
// a run at N=500 passes before the first render.
func saveStartTrace(port int, path string) {
	for range 100 {
		if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/", port)); err == nil {
			resp.Body.Close()
			savePprof(port, "trace?seconds=4", path)
			return
		}
		time.Sleep(10 * time.Millisecond) // the endpoint starts with the manager
	}
}

// saveAPIServerProfile saves a 10-second CPU profile of kube-apiserver: with both on the same cores, what the API
// server spends per write is as much a part of the controller's speed as its own CPU.
func saveAPIServerProfile(socket, path string) {
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	save(hc, "http://apiserver/debug/pprof/profile?seconds=10", path)
}

// save writes what url answers to path; a profile that cannot be fetched is only missing.
func save(hc *http.Client, url, path string) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return
	}
	resp, err := hc.Get(url)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = io.Copy(f, resp.Body)
}

func printResult(r benchResult) {
	perMD := func(v float64) float64 { return v / float64(r.N) }
	kinds := make([]string, 0, len(r.Writes.byKind))
	for k, v := range r.Writes.byKind {
		kinds = append(kinds, fmt.Sprintf("%s %.2f", k, perMD(float64(v))))
	}
	sort.Strings(kinds)
	reads := make([]string, 0, len(r.Writes.reads))
	for k, v := range r.Writes.reads {
		reads = append(reads, fmt.Sprintf("%s %.2f", k, perMD(float64(v))))
	}
	sort.Strings(reads)
	fmt.Printf("%-8s N=%-5d all bootstrap Secrets %6.1f s (%5.1f MD/s, first at %.1f s)  peak RSS %4.0f MiB  CPU %5.1f s  writes/MD %5.2f (409s %.2f)  KiB written/MD %5.1f  idle writes %d",
		r.Name, r.N, r.ToAll.Seconds(), float64(r.N)/r.ToAll.Seconds(), r.FirstAt.Seconds(), float64(r.PeakRSS)/1024, r.CPU.Seconds(),
		perMD(float64(r.Writes.total)), perMD(float64(r.Writes.conflicts)), perMD(r.Writes.bytes)/1024, r.IdleWrites)
	if r.Name == "osm" {
		fmt.Printf("  renders/MD %.2f (%.0f ms each)  reconciles/MD %.2f  plugin calls/MD %.2f  memo hits/MD %.2f", r.Renders, r.RenderMS, r.Reconciles, r.PluginCalls, r.MemoHits)
	}
	fmt.Printf("\n         process tree: %d processes at most; peak RSS is their sum (controller's own VmHWM %.0f MiB, largest plugin host's %.0f MiB)",
		r.Procs, float64(r.ControllerHWM)/1024, float64(r.HostHWM)/1024)
	fmt.Printf("\n         CPU split: controller process %.1f s, plugin hosts %.1f s", (r.CPU - r.HostCPU).Seconds(), r.HostCPU.Seconds())
	fmt.Printf("\n         CPU per MD: controller tree %.1f ms, kube-apiserver %.1f ms, etcd %.1f ms",
		perMD(float64(r.CPU.Microseconds()))/1000, perMD(float64(r.APIServerCPU.Microseconds()))/1000, perMD(float64(r.EtcdCPU.Microseconds()))/1000)
	fmt.Printf("\n         API server time per write %.1f ms; JSON KiB per MD: OSCs %.1f, user-data Secrets %.1f, MachineDeployments %.1f",
		r.Writes.seconds/max(r.Writes.timed, 1)*1000, r.ObjectKiB["OSCs"], r.ObjectKiB["user-data Secrets"], r.ObjectKiB["MachineDeployments"])
	fmt.Printf("\n         memory at peak (%.1f s): %s; Go heap in use at end %.0f MiB, Go sys %.0f MiB\n         writes per MD: %s\n         reads per MD: %s\n         log: %s\n",
		r.PeakAt.Seconds(), r.AtPeak, r.HeapInuse/(1<<20), r.GoSys/(1<<20), strings.Join(kinds, ", "), strings.Join(reads, ", "), r.Log)
	if out := os.Getenv("OSM_BENCH_OUT"); out != "" {
		if f, err := os.OpenFile(out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			line, _ := json.Marshal(map[string]any{"name": r.Name, "n": r.N, "s": r.ToAll.Seconds(), "peak_rss_mib": float64(r.PeakRSS) / 1024, "controller_hwm_mib": float64(r.ControllerHWM) / 1024, "procs": r.Procs, "os": benchOSes(), "machine": machineInfo(),
				"cpu_s": r.CPU.Seconds(), "host_cpu_s": r.HostCPU.Seconds(), "apiserver_cpu_s": r.APIServerCPU.Seconds(), "etcd_cpu_s": r.EtcdCPU.Seconds(), "writes_per_md": perMD(float64(r.Writes.total)), "bytes_per_md": perMD(r.Writes.bytes),
				"idle_writes": r.IdleWrites, "by_kind": r.Writes.byKind, "renders_per_md": r.Renders, "at_peak_kib": r.AtPeak,
				"heap_inuse_mib": r.HeapInuse / (1 << 20)})
			_, _ = f.Write(append(line, '\n'))
			f.Close()
		}
	}
}

// summarize prints the median of each figure per controller and size, the ratios between the controllers, and
// the memory growth per MachineDeployment between sizes.
func summarize(b *testing.B, results []benchResult) {
	type key struct {
		name string
		n    int
	}
	groups := map[key][]benchResult{}
	var sizes []int
	for _, r := range results {
		k := key{r.Name, r.N}
		if len(groups[k]) == 0 && !containsInt(sizes, r.N) {
			sizes = append(sizes, r.N)
		}
		groups[k] = append(groups[k], r)
	}
	sort.Ints(sizes)
	type med struct{ s, rss, cpu, hostCPU, apiCPU, writes, kib float64 }
	medians := map[key]med{}
	fmt.Printf("\nmedians (%s; %s; MachineDeployments: %s; CPU and peak RSS of each controller's whole process tree):\n",
		time.Now().Format(time.RFC3339), machineInfo(), strings.Join(benchOSes(), ","))
	for _, n := range sizes {
		for _, name := range []string{"upstream", "baseline", "osm"} {
			rs := groups[key{name, n}]
			if len(rs) == 0 {
				continue
			}
			m := med{
				s: median(rs, func(r benchResult) float64 {
					if r.Stalled {
						return math.Inf(1)
					}
					return r.ToAll.Seconds()
				}),
				rss:     median(rs, func(r benchResult) float64 { return float64(r.PeakRSS) / 1024 }),
				cpu:     median(rs, func(r benchResult) float64 { return r.CPU.Seconds() }),
				hostCPU: median(rs, func(r benchResult) float64 { return r.HostCPU.Seconds() }),
				apiCPU:  median(rs, func(r benchResult) float64 { return r.APIServerCPU.Seconds() }),
				writes:  median(rs, func(r benchResult) float64 { return float64(r.Writes.total) / float64(n) }),
				kib:     median(rs, func(r benchResult) float64 { return r.Writes.bytes / float64(n) / 1024 }),
			}
			medians[key{name, n}] = m
			stalled := 0
			for _, r := range rs {
				if r.Stalled {
					stalled++
				}
			}
			fmt.Printf("  %-8s N=%-5d runs %d (%d stalled, counted as infinite time): %6.1f s (%5.1f MD/s)  peak RSS %4.0f MiB  CPU %5.1f s (plugin hosts %4.1f s; kube-apiserver %5.1f s)  writes/MD %5.2f  KiB written/MD %5.1f\n",
				name, n, len(rs), stalled, m.s, float64(n)/m.s, m.rss, m.cpu, m.hostCPU, m.apiCPU, m.writes, m.kib)
			b.ReportMetric(m.s, fmt.Sprintf("s-%s-%d", name, n))
			b.ReportMetric(m.rss, fmt.Sprintf("MiB-%s-%d", name, n))
		}
		other := "upstream"
		if _, ok := medians[key{"baseline", n}]; ok {
			other = "baseline"
		}
		u, uok := medians[key{other, n}]
		o, ook := medians[key{"osm", n}]
		if uok && ook {
			fmt.Printf("  N=%d osm vs %s: %.2fx the rate, %.2fx the peak RSS, %.2fx the CPU, %.2fx the kube-apiserver CPU, %.2fx the writes, %.2fx the bytes written\n",
				n, other, u.s/o.s, o.rss/u.rss, o.cpu/u.cpu, o.apiCPU/u.apiCPU, o.writes/u.writes, o.kib/u.kib)
		}
	}
	for i := 1; i < len(sizes); i++ {
		lo, hi := sizes[i-1], sizes[i]
		for _, name := range []string{"upstream", "baseline", "osm"} {
			a, aok := medians[key{name, lo}]
			z, zok := medians[key{name, hi}]
			if aok && zok {
				fmt.Printf("  %-8s peak RSS growth N=%d..%d: %.1f KiB per MachineDeployment\n", name, lo, hi, (z.rss-a.rss)*1024/float64(hi-lo))
			}
		}
		ua, uaok := medians[key{"upstream", lo}]
		uz, uzok := medians[key{"upstream", hi}]
		oa, oaok := medians[key{"osm", lo}]
		oz, ozok := medians[key{"osm", hi}]
		if uaok && uzok && oaok && ozok && uz.rss != ua.rss {
			fmt.Printf("  N=%d..%d osm vs upstream: %.2fx the peak RSS growth per MachineDeployment\n", lo, hi, (oz.rss-oa.rss)/(uz.rss-ua.rss))
		}
	}
}

func median(rs []benchResult, f func(benchResult) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func containsInt(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func freePort(b *testing.B) int {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func tailFile(path string, n int) string {
	data, _ := os.ReadFile(path)
	return tail(string(data), n)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
