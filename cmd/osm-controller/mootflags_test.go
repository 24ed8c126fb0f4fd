package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/osmhq/osm/host/testenv"
)

// mootFlag is one of upstream's flags that OSM accepts and that its design makes moot.
type mootFlag struct {
	name, value string
	// replacedBy are what the start's log line, and docs/migration.md where it names the flag, say replaces it.
	replacedBy []string
}

// TestMootFlagsLoggedOnceAndDocumented starts the real binary against a real API server with every flag OSM
// accepts only for compatibility (its usage says "Accepted for compatibility"): each must be logged exactly
// once with what replaces it, the replacement must serve (one metrics endpoint and one set of probes, none on
// upstream's worker addresses), and docs/migration.md must name each, with its replacement.
func TestMootFlagsLoggedOnceAndDocumented(t *testing.T) {
	// The worker addresses are given at their default values (upstream's): a moot flag is reported whenever
	// it is given, not only when it differs from the default.
	workerMetrics, workerProbes := "127.0.0.1:8081", "127.0.0.1:8086"
	moot := []mootFlag{
		{"-worker-metrics-address", workerMetrics, []string{"-metrics-address"}},
		{"-worker-health-probe-address", workerProbes, []string{"-health-probe-address"}},
		{"-bootstrap-token-service-account-name", "cloud-init-getter", []string{"bootstrap token per MachineDeployment"}},
		{"-provisioning-token-ttl", "30m", []string{"-bootstrap-token-ttl"}},
		// A file that does not exist: an ignored flag reads nothing.
		{"-ca-bundle", "/etc/kubernetes/pki/ca-bundle/ca-bundle.pem", []string{"-host-ca-bundle", "-kubernetes-ca-bundle"}},
	}

	// The list is every flag whose usage says it is there for compatibility only.
	fs := flag.NewFlagSet("osm-controller", flag.ContinueOnError)
	(&flags{}).register(fs)
	fs.VisitAll(func(f *flag.Flag) {
		if strings.Contains(f.Usage, "Accepted for compatibility") && !slices.ContainsFunc(moot, func(m mootFlag) bool { return m.name == "-"+f.Name }) {
			t.Errorf("-%s is accepted for compatibility only, and this test does not check it: %s", f.Name, f.Usage)
		}
	})

	doc, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "migration.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range moot {
		var named []string
		for _, para := range strings.Split(string(doc), "\n\n") {
			if strings.Contains(para, "`"+m.name+"`") {
				named = append(named, para)
			}
		}
		if len(named) == 0 {
			t.Errorf("docs/migration.md does not name `%s`", m.name)
			continue
		}
		for _, r := range m.replacedBy {
			if !slices.ContainsFunc(named, func(p string) bool { return strings.Contains(strings.Join(strings.Fields(p), " "), r) }) {
				t.Errorf("docs/migration.md names `%s` but not, with it, what replaces it (%s)", m.name, r)
			}
		}
	}

	bin := filepath.Join(t.TempDir(), "osm-controller")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	env := testenv.Start(t, testenv.Options{})
	metrics, probes := testenv.FreeAddress(t), testenv.FreeAddress(t)
	args := []string{"-kubeconfig", env.Kubeconfig, "-namespace", "kube-system", "-leader-elect=false",
		"-disable-default-osps", "-plugin-cache-dir", t.TempDir(), "-webhooks=false",
		"-metrics-address", metrics, "-health-probe-address", probes}
	for _, m := range moot {
		args = append(args, m.name+"="+m.value)
	}
	var out testenv.SyncBuffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("exited with %v after SIGTERM:\n%s", err, out.String())
			}
		case <-time.After(40 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("still running 40s after SIGTERM:\n%s", out.String())
		}
	}
	t.Cleanup(stop)

	hc := &http.Client{Timeout: 5 * time.Second}
	get := func(addr, path string) (string, error) {
		resp, err := hc.Get("http://" + addr + path)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return body.String(), fmt.Errorf("%s%s: %s", addr, path, resp.Status)
		}
		return body.String(), nil
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, err := get(probes, "/readyz")
		if err == nil {
			break
		}
		select {
		case werr := <-exited:
			stopped = true
			t.Fatalf("exited (%v) before it was ready:\n%s", werr, out.String())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready after 2m: %v\n%s", err, out.String())
		}
	}
	// What replaces upstream's worker endpoints serves: the reconciles of MachineDeployments, which upstream
	// counts on its worker manager's endpoint, are on -metrics-address once the controllers run. Nothing
	// answers on upstream's worker addresses.
	const workerSeries = `controller_runtime_reconcile_total{controller="operatingsystemconfig"`
	testenv.Eventually(t, time.Until(deadline), "-metrics-address serving "+workerSeries, func() error {
		body, err := get(metrics, "/metrics")
		if err != nil {
			t.Fatalf("-metrics-address does not serve /metrics: %v", err)
		}
		if !strings.Contains(body, workerSeries) {
			return fmt.Errorf("no %s yet", workerSeries)
		}
		return nil
	})
	if _, err := get(probes, "/healthz"); err != nil {
		t.Errorf("-health-probe-address does not serve /healthz: %v", err)
	}
	for _, addr := range []string{workerMetrics, workerProbes} {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.Close()
			t.Errorf("something listens on the moot worker address %s", addr)
		}
	}
	stop()

	// Each flag once, in the log of the whole run, with what replaces it.
	var msgs []string
	for _, line := range strings.Split(out.String(), "\n") {
		var entry struct {
			Msg string `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg != "" {
			msgs = append(msgs, entry.Msg)
		}
	}
	if len(msgs) == 0 {
		t.Fatalf("no JSON log lines:\n%s", out.String())
	}
	for _, m := range moot {
		word := regexp.MustCompile(`(^|[^a-z-])` + regexp.QuoteMeta(m.name) + `($|[^a-z-])`)
		var lines []string
		for _, msg := range msgs {
			if word.MatchString(msg) {
				lines = append(lines, msg)
			}
		}
		if len(lines) != 1 {
			t.Errorf("%s is logged %d times, want once: %q", m.name, len(lines), lines)
			continue
		}
		for _, r := range m.replacedBy {
			if !strings.Contains(lines[0], r) {
				t.Errorf("the log line of %s does not say what replaces it (%s): %s", m.name, r, lines[0])
			}
		}
	}
}
