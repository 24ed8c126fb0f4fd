package app_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/testenv"
	"github.com/osmhq/osm/plugins"
)

// BenchmarkController500 measures what issue 5 asks for: 500 MachineDeployments exist before the controller
// starts; how long until all 500 bootstrap Secrets exist, the controller's peak RSS, and how many API writes
// it spends per MachineDeployment. The controller runs as its own process (the real binary, with the embedded
// plugins), so its memory is measured alone. Run it with `make bench-controller`.
//
// OSM_BENCH_MDS changes the number of MachineDeployments; OSM_BENCH_PROFILE picks the profile (default: the
// embedded osp-ubuntu, rendered by the ubuntu plugin; "upstream" uses upstream's templates-only osp-ubuntu).
func BenchmarkController500(b *testing.B) {
	n := 500
	if v, err := strconv.Atoi(os.Getenv("OSM_BENCH_MDS")); err == nil && v > 0 {
		n = v
	}
	bin := buildController(b)
	for range b.N {
		runThroughput(b, bin, n)
	}
}

func runThroughput(b *testing.B, bin string, n int) {
	opts := testenv.Options{}
	if path := os.Getenv("OSM_BENCH_AUDIT_LOG"); path != "" {
		// Records every write the API server sees, for a breakdown by resource: OSM_BENCH_AUDIT_LOG=/tmp/audit.log
		policy := filepath.Join(b.TempDir(), "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n  verbs: [create, update, patch, delete, deletecollection]\n"), 0o600); err != nil {
			b.Fatal(err)
		}
		opts.APIServerFlags = map[string]string{"audit-policy-file": policy, "audit-log-path": path}
	}
	env := testenv.Start(b, opts)
	ctx := context.Background()
	c := env.Client
	ensureNamespace(b, env, userDataNS)
	clusterInfo(b, env)
	osp, name := benchProfile(b)
	if err := c.Create(ctx, osp); err != nil {
		b.Fatal(err)
	}
	createMDs(b, c, n, osp.Spec.OSName, name)

	port := freePort(b)
	cmd := exec.Command(bin, "-kubeconfig", env.Kubeconfig, "-namespace", osmNamespace, "-webhook-port", "0",
		"-leader-elect=false", "-health-probe-address", "0", "-metrics-address", fmt.Sprintf("127.0.0.1:%d", port),
		"-plugin-cache-dir", filepath.Join(b.TempDir(), "cache"), "-disable-default-osps", "-log-format", "json")
	// The log outlives the benchmark, for a look at what the controller did.
	logFile, err := os.Create(filepath.Join(os.TempDir(), "osm-bench-controller.log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() { _ = cmd.Process.Kill(); <-exited }()

	for {
		list := &corev1.SecretList{}
		if err := c.List(ctx, list, client.InNamespace(userDataNS)); err != nil {
			b.Fatal(err)
		}
		boot := 0
		for _, s := range list.Items {
			if strings.HasSuffix(s.Name, "-bootstrap-config") && !strings.Contains(s.Name, "kubelet") {
				boot++
			}
		}
		if boot == n {
			break
		}
		select {
		case err := <-exited:
			exited <- err
			log, _ := os.ReadFile(logFile.Name())
			b.Fatalf("osm-controller exited (%v) after %d of %d bootstrap Secrets:\n%s", err, boot, n, tail(string(log), 3000))
		default:
		}
		if time.Since(start) > 20*time.Minute {
			b.Fatalf("only %d of %d bootstrap Secrets after 20 minutes; controller log: %s", boot, n, logFile.Name())
		}
		time.Sleep(200 * time.Millisecond)
	}
	elapsed := time.Since(start)
	// Events are sent in the background; wait until the writes stop (the work is done, events included), then
	// count what a controller with nothing to do writes in 10 seconds.
	writes := controllerWrites(b, port)
	for settled := 0; settled < 3; {
		time.Sleep(time.Second)
		if now := controllerWrites(b, port); now != writes {
			writes, settled = now, 0
		} else {
			settled++
		}
	}
	time.Sleep(10 * time.Second)
	idleWrites := controllerWrites(b, port) - writes
	rss := peakRSS(b, cmd.Process.Pid)
	metrics := scrape(b, port, "osm_render_duration_seconds_sum", "osm_render_duration_seconds_count", "osm_render_skipped_total",
		"osm_machinedeployment_reconciles_total")

	b.ReportMetric(elapsed.Seconds(), "s-to-all-secrets")
	b.ReportMetric(float64(n)/elapsed.Seconds(), "mds/s")
	b.ReportMetric(float64(rss)/1024, "peak-rss-MiB")
	b.ReportMetric(float64(writes)/float64(n), "api-writes/md")
	b.ReportMetric(float64(idleWrites), "idle-writes")
	if c := metrics["osm_render_duration_seconds_count"]; c > 0 {
		b.ReportMetric(metrics["osm_render_duration_seconds_sum"]/c*1000, "ms/render")
	}
	b.Logf("%d MachineDeployments (%s): all bootstrap Secrets after %.1fs (%.1f MD/s), peak RSS %.0f MiB, %.1f API writes per MD, %d writes in 10s idle, %.1f reconciles and %.1f renders per MD, %.2f ms per render",
		n, osp.Name, elapsed.Seconds(), float64(n)/elapsed.Seconds(), float64(rss)/1024, float64(writes)/float64(n), idleWrites,
		metrics["osm_machinedeployment_reconciles_total"]/float64(n), metrics["osm_render_duration_seconds_count"]/float64(n),
		metrics["osm_render_duration_seconds_sum"]/max(metrics["osm_render_duration_seconds_count"], 1)*1000)
}

func buildController(b *testing.B) string {
	b.Helper()
	if _, err := plugins.Names(plugins.Builtin()); err != nil {
		b.Fatal(err)
	}
	out := filepath.Join(b.TempDir(), "osm-controller")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/osm-controller")
	cmd.Dir = testenv.RepoRoot()
	if data, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("building osm-controller: %v\n%s", err, data)
	}
	return out
}

func benchProfile(b *testing.B) (*osmv1alpha1.OperatingSystemProfile, string) {
	b.Helper()
	if os.Getenv("OSM_BENCH_PROFILE") != "upstream" {
		defaults, err := plugins.DefaultProfiles()
		if err != nil {
			b.Fatal(err)
		}
		names, _ := plugins.Names(plugins.Builtin())
		for _, d := range defaults {
			if d.Name == "osp-ubuntu" && d.Spec.Plugin != nil && contains(names, d.Spec.Plugin.Builtin) {
				d = d.DeepCopy()
				d.Namespace = osmNamespace
				return d, d.Name
			}
		}
		b.Log("the embedded osp-ubuntu or its plugin is not built (run make plugins); using upstream's templates-only profile")
	}
	osp := &osmv1alpha1.OperatingSystemProfile{}
	readYAMLFile(b, filepath.Join(testenv.RepoRoot(), "crds", "testdata", "upstream", "osp-ubuntu.yaml"), osp)
	return osp, osp.Name
}

func createMDs(b *testing.B, c client.Client, n int, osName osmv1alpha1.OperatingSystem, osp string) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			provider := []string{"aws", "openstack", "vsphere", "azure"}[i%4]
			errs <- c.Create(context.Background(), newMD(b, fmt.Sprintf("md-%04d", i), string(osName), provider, osp))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}

// controllerWrites is the number of create, update, patch and delete requests the controller has sent, from
// client-go's rest_client_requests_total in its own metrics.
func controllerWrites(b *testing.B, port int) int {
	b.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		b.Fatalf("scraping controller metrics: %v", err)
	}
	defer resp.Body.Close()
	total := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "rest_client_requests_total{") {
			continue
		}
		write := false
		for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
			write = write || strings.Contains(line, `method="`+m+`"`)
		}
		if !write {
			continue
		}
		if f := strings.Fields(line); len(f) == 2 {
			v, _ := strconv.ParseFloat(f[1], 64)
			total += int(v)
		}
	}
	return total
}

// peakRSS is the high-water mark of a process's resident memory, in KiB.
func peakRSS(b *testing.B, pid int) int {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			v, _ := strconv.Atoi(strings.Fields(line)[1])
			return v
		}
	}
	b.Fatal("no VmHWM")
	return 0
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

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// scrape sums the named series of the controller's metrics endpoint.
func scrape(b *testing.B, port int, names ...string) map[string]float64 {
	b.Helper()
	out := map[string]float64{}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		b.Logf("scraping controller metrics: %v", err)
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		name, _, _ := strings.Cut(f[0], "{")
		for _, want := range names {
			if name == want {
				v, _ := strconv.ParseFloat(f[1], 64)
				out[name] += v
			}
		}
	}
	return out
}
