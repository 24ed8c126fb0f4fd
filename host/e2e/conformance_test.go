//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ignconfig "github.com/coreos/ignition/v2/config/v3_3"
	igntypes "github.com/coreos/ignition/v2/config/v3_3/types"
	"github.com/google/go-containerregistry/pkg/registry"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/encode/cloudinit/cloudinittest"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/testenv"
)

// The conformance run boots a node from a vendor's plugin and profile on the vendor's root file system, under
// the node e2e's harness (a real kube-apiserver, the controller, the binary mirror, systemd-nspawn), and
// reports each step of the boot contract (sdk/SPEC.md §9) as a table, in the test log and in a report file.
//
//	make conformance PLUGIN=myos.wasm PROFILE=osp.yaml ROOTFS=myos-rootfs.tar.zst
//
// runs TestConformance with these variables:
//
//	OSM_CONFORMANCE_PROFILE     the OperatingSystemProfile (YAML); required
//	OSM_CONFORMANCE_PLUGIN      a .wasm module (pushed to a registry in the test process) or an OCI reference
//	                            (a tag is resolved and pinned); default: the profile's spec.plugin.image
//	OSM_CONFORMANCE_ROOTFS      the node's root file system: a directory or a tarball (.tar, .tar.gz, .tgz,
//	                            .tar.zst, .tar.xz) whose init is systemd; default: the harness's Debian 12 image
//	OSM_CONFORMANCE_PROVIDER    the MachineDeployment's cloud provider; default edge if the profile supports it
//	                            (or lists none), else the profile's first
//	OSM_CONFORMANCE_SETUP_UNIT  the unit that provisions the node; default osm-setup.service (the Go kit's)
//	OSM_CONFORMANCE_REPORT      where the report goes; default <artifacts>/conformance-report.md
//
// TestNodes runs the same conformance run on the plugins `osmctl plugin init` scaffolds: ScaffoldedPluginJoins
// (apt family, the Debian image) and ScaffoldedIgnitionPluginConforms (ignition family, Fedora CoreOS shape,
// the Ignition-shaped image of hack/e2e-node/rootfs-ignition.sh), and on sdk/examples/microos:
// MicroOSPluginConforms (the MicroOS-shaped image of hack/e2e-node/rootfs-microos.sh).

// conformanceRun is one node booted for the conformance report.
type conformanceRun struct {
	// Name names the MachineDeployment, the profile's copy ("conformance-<name>") and the node.
	Name string
	// Profile is the vendor's profile; its copy in the cluster refers to Plugin and carries Config.
	Profile *osmv1alpha1.OperatingSystemProfile
	// Plugin is a .wasm file or an OCI reference; empty for the profile's own image.
	Plugin string
	// Rootfs is a directory or tarball; empty for the harness's Debian image.
	Rootfs string
	// Provider is the MachineDeployment's cloud provider; empty to choose (edge when the profile allows it).
	Provider string
	// SetupUnit is the unit that provisions the node; empty for the Go kit's osm-setup.service.
	SetupUnit string
	// Report is the report file; empty for <artifacts>/conformance-<name>.md.
	Report string
}

// conformanceStep is one line of the report.
type conformanceStep struct {
	Name   string
	Status string // PASS, FAIL or "not reached"
	Detail string
}

// conformanceResult is the report of a run.
type conformanceResult struct {
	Header []string
	Steps  []conformanceStep
	// Why names the units that failed on the node, with their last journal lines (see explain).
	Why string
	MD  *clusterv1alpha1.MachineDeployment
	Ref string
	// Node is the node that booted, stopped and with its report read; nil when the run ended before.
	Node  *node
	start time.Time
}

// The steps of the report, in the order of a node's boot.
const (
	stepUserData = iota
	stepCA
	stepBootstrapRan
	stepFetch
	stepHandoff
	stepDoneMarker
	stepSetup
	stepUnits
	stepCSR
	stepRegistered
	stepCount
)

func newConformanceResult() *conformanceResult {
	names := [stepCount]string{
		stepUserData:     "user-data: the controller rendered both stages with the plugin; the utility's parser accepts them",
		stepCA:           "§9.1 the bootstrap user-data ran: the node trusts the cluster CA",
		stepBootstrapRan: "§9.1 the bootstrap unit started and exited successfully",
		stepFetch:        "§9.2 the provisioning config was fetched with the node's own credential, TLS verified",
		stepHandoff:      "§9.3 handoff: the provisioning config was applied by the provisioning utility",
		stepDoneMarker:   "§9.4 the bootstrap's done marker is written; the fetch ran once",
		stepSetup:        "the setup unit started and finished",
		stepUnits:        "units: enabled and masked as configured, containerd runs, the kubelet started, none failed",
		stepCSR:          "the kubelet asked for its certificate with the bootstrap token",
		stepRegistered:   "the kubelet got its certificate and the Node registered",
	}
	r := &conformanceResult{start: time.Now()}
	for _, n := range names {
		r.Steps = append(r.Steps, conformanceStep{Name: n, Status: "not reached"})
	}
	return r
}

// table is the report: the run's header and one line per step.
func (r *conformanceResult) table() string {
	var b strings.Builder
	b.WriteString("# OSM conformance run\n\n")
	for _, h := range r.Header {
		b.WriteString("- " + h + "\n")
	}
	b.WriteString("\n| # | step | result | detail |\n|---|---|---|---|\n")
	passed := 0
	for i, s := range r.Steps {
		if s.Status == "PASS" {
			passed++
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s |\n", i+1, s.Name, s.Status, strings.ReplaceAll(s.Detail, "|", `\|`))
	}
	verdict := "CONFORMANT"
	if passed != len(r.Steps) {
		verdict = "NOT CONFORMANT"
	}
	fmt.Fprintf(&b, "\n%s: %d of %d steps passed in %s\n", verdict, passed, len(r.Steps), time.Since(r.start).Round(time.Second))
	if r.Why != "" && passed != len(r.Steps) {
		b.WriteString("\n## Why\n\n" + r.Why)
	}
	return b.String()
}

// recorder is a testing.TB that keeps the messages of failed checks for the report.
type recorder struct {
	testing.TB
	msgs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.Helper()
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
	r.TB.Errorf(format, args...)
}

func (r *recorder) Error(args ...any) {
	r.Helper()
	r.msgs = append(r.msgs, fmt.Sprint(args...))
	r.TB.Error(args...)
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Helper()
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
	r.TB.Fatalf(format, args...)
}

func (r *recorder) Fatal(args ...any) {
	r.Helper()
	r.msgs = append(r.msgs, fmt.Sprint(args...))
	r.TB.Fatal(args...)
}

// check runs step i as a subtest; it passes when check reports no error, and the report keeps the first
// error (or, when it passed, what check returned).
func (r *conformanceResult) check(t *testing.T, i int, check func(t testing.TB) string) {
	t.Helper()
	t.Run(r.Steps[i].Name, func(t *testing.T) {
		rec := &recorder{TB: t}
		detail := ""
		defer func() {
			switch {
			case t.Failed() && len(rec.msgs) > 0:
				r.Steps[i].Status, r.Steps[i].Detail = "FAIL", oneLine(rec.msgs[0])
			case t.Failed():
				r.Steps[i].Status = "FAIL"
			default:
				r.Steps[i].Status, r.Steps[i].Detail = "PASS", detail
			}
		}()
		detail = check(rec)
	})
}

// fail marks step i failed without running it (what it needs did not happen).
func (r *conformanceResult) fail(t *testing.T, i int, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	r.Steps[i].Status, r.Steps[i].Detail = "FAIL", oneLine(msg)
	t.Errorf("%s: %s", r.Steps[i].Name, msg)
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	if len(s) > 220 {
		s = s[:220] + "…"
	}
	return s
}

// TestConformance is the vendor's conformance run (make conformance): see the comment at the top of this file.
func TestConformance(t *testing.T) {
	path := os.Getenv("OSM_CONFORMANCE_PROFILE")
	if path == "" {
		t.Skip("OSM_CONFORMANCE_PROFILE is not set: run `make conformance PLUGIN=<.wasm or OCI reference> PROFILE=<osp.yaml> ROOTFS=<directory or tarball>`")
	}
	osp := readProfile(t, path)
	run := conformanceRun{
		Name: "conformance", Profile: osp, Plugin: os.Getenv("OSM_CONFORMANCE_PLUGIN"), Rootfs: os.Getenv("OSM_CONFORMANCE_ROOTFS"),
		Provider: os.Getenv("OSM_CONFORMANCE_PROVIDER"), SetupUnit: os.Getenv("OSM_CONFORMANCE_SETUP_UNIT"),
		Report: os.Getenv("OSM_CONFORMANCE_REPORT"),
	}
	if run.Report == "" {
		run.Report = filepath.Join(harness.Artifacts, "conformance-report.md")
	}
	c := startCluster(t)
	c.startOSM(t, func(o *app.Options) {
		// A .wasm module is pushed to a registry in this process, which speaks plain HTTP, as registries on
		// the machine itself (osmctl registry serve) do.
		o.Plugins.Registry.PlainHTTP = plainHTTPPlugin(run.Plugin, osp)
	})
	c.conformance(t, run)
}

// plainHTTPPlugin reports whether the plugin is pulled over plain HTTP: a module pushed by the harness, or an
// image on this machine.
func plainHTTPPlugin(plugin string, osp *osmv1alpha1.OperatingSystemProfile) bool {
	ref := plugin
	if ref == "" && osp.Spec.Plugin != nil {
		ref = osp.Spec.Plugin.Image
	}
	if _, err := os.Stat(ref); err == nil {
		return true
	}
	host, _, _ := strings.Cut(ref, "/")
	name, _, _ := strings.Cut(host, ":")
	return name == "localhost" || name == "127.0.0.1" || name == "[::1]"
}

func readProfile(t *testing.T, path string) *osmv1alpha1.OperatingSystemProfile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var osp osmv1alpha1.OperatingSystemProfile
	if err := yaml.UnmarshalStrict(data, &osp); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if osp.Kind != "OperatingSystemProfile" {
		t.Fatalf("%s: kind %q, want an OperatingSystemProfile", path, osp.Kind)
	}
	return &osp
}

// osmctl is built once per test process.
var osmctl struct {
	once sync.Once
	path string
	err  error
}

func osmctlBinary(t *testing.T) string {
	t.Helper()
	osmctl.once.Do(func() {
		dir, err := os.MkdirTemp("", "osm-e2e-osmctl-")
		if err != nil {
			osmctl.err = err
			return
		}
		osmctl.path = filepath.Join(dir, "osmctl")
		out, err := runIn(testenv.RepoRoot(), "go", "build", "-o", osmctl.path, "./cmd/osmctl")
		if err != nil {
			osmctl.err = fmt.Errorf("building osmctl: %w\n%s", err, out)
		}
	})
	if osmctl.err != nil {
		t.Fatal(osmctl.err)
	}
	return osmctl.path
}

// pluginRegistry is an OCI registry in the test process, on 127.0.0.1, for the modules runs push; it lives as
// long as the process.
var pluginRegistry = sync.OnceValue(func() string {
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	return strings.TrimPrefix(reg.URL, "http://")
})

// pluginMetadata is the part of `osmctl plugin inspect -o json` the run reads.
type pluginMetadata struct {
	Name                  string   `json:"name"`
	Version               string   `json:"version"`
	ProvisioningUtilities []string `json:"provisioningUtilities"`
	ConfigSchema          []struct {
		Name string `json:"name"`
	} `json:"configSchema"`
	Artifact *struct {
		ManifestDigest string `json:"manifestDigest"`
	} `json:"artifact"`
}

// resolvePlugin returns the plugin as a reference pinned by digest, and its metadata: a .wasm file is pushed
// to the harness's registry with `osmctl plugin push`, a tag is resolved with `osmctl plugin inspect`.
func (c *cluster) resolvePlugin(t *testing.T, run conformanceRun) (string, pluginMetadata) {
	t.Helper()
	bin := osmctlBinary(t)
	ref := run.Plugin
	if ref == "" {
		if run.Profile.Spec.Plugin == nil || run.Profile.Spec.Plugin.Image == "" {
			t.Fatal("no plugin: the profile has no spec.plugin.image and OSM_CONFORMANCE_PLUGIN is not set")
		}
		ref = run.Profile.Spec.Plugin.Image
	}
	if info, err := os.Stat(ref); err == nil && !info.IsDir() {
		out, err := runIn("", bin, "plugin", "push", "-q", ref, pluginRegistry()+"/osm/"+run.Name+":conformance")
		if err != nil {
			t.Fatalf("osmctl plugin push %s: %v\n%s", ref, err, out)
		}
		ref = strings.TrimSpace(out)
	}
	out, err := runIn("", bin, "plugin", "inspect", "-o", "json", ref)
	if err != nil {
		t.Fatalf("osmctl plugin inspect %s: %v\n%s", ref, err, out)
	}
	var md pluginMetadata
	if err := json.Unmarshal([]byte(out), &md); err != nil {
		t.Fatalf("osmctl plugin inspect -o json: %v\n%s", err, out)
	}
	if !strings.Contains(ref, "@sha256:") {
		if md.Artifact == nil || md.Artifact.ManifestDigest == "" {
			t.Fatalf("%s: no manifest digest to pin", ref)
		}
		repo := ref
		if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
			repo = repo[:i]
		}
		ref = repo + "@" + md.Artifact.ManifestDigest
	}
	return ref, md
}

// conformance boots a node from run's plugin, profile and root file system and checks each step of the boot
// contract. The report is written (and logged) however the run ends.
func (c *cluster) conformance(t *testing.T, run conformanceRun) *conformanceResult {
	t.Helper()
	res := newConformanceResult()
	if run.Report == "" {
		run.Report = filepath.Join(harness.Artifacts, "conformance-"+run.Name+".md")
	}
	defer func() {
		table := res.table()
		t.Logf("conformance report (%s):\n%s", run.Report, table)
		if err := os.MkdirAll(filepath.Dir(run.Report), 0o755); err == nil {
			err = os.WriteFile(run.Report, []byte(table), 0o644)
			if err != nil {
				t.Errorf("writing the conformance report: %v", err)
			}
		}
	}()

	ref, meta := c.resolvePlugin(t, run)
	res.Ref = ref
	osp := run.Profile.DeepCopy()
	osp.ObjectMeta = metav1.ObjectMeta{Name: "conformance-" + run.Name, Namespace: osmNamespace}
	if osp.Spec.Plugin == nil {
		osp.Spec.Plugin = &osmv1alpha1.PluginReference{}
	}
	osp.Spec.Plugin.Image, osp.Spec.Plugin.Builtin = ref, ""
	// The node reaches no site but the harness's: the node kit's download locations point at its mirror,
	// unless the profile sets them (the Kubernetes binaries follow the controller's -node-binary-base-url).
	config := map[string]string{}
	for k, v := range osp.Spec.Plugin.Config {
		config[k] = v
	}
	declared := map[string]bool{}
	for _, o := range meta.ConfigSchema {
		declared[o.Name] = true
	}
	for k, v := range map[string]string{"cniBaseURL": c.mirror.URL + "/cni", "criToolsBaseURL": c.mirror.URL + "/cri-tools"} {
		if _, set := config[k]; declared[k] && !set {
			config[k] = v
		}
	}
	osp.Spec.Plugin.Config = config
	provider := run.Provider
	if provider == "" {
		provider = "edge"
		var names []string
		for _, p := range osp.Spec.SupportedCloudProviders {
			names = append(names, p.Name)
		}
		if len(names) > 0 && !slices.Contains(names, "edge") {
			provider = names[0]
		}
	}
	setupUnitName := run.SetupUnit
	if setupUnitName == "" {
		setupUnitName = setupUnit
	}
	utility := string(osp.Spec.ProvisioningUtility)
	rootfs := run.Rootfs
	if rootfs == "" {
		rootfs = harness.Rootfs
	}
	res.Header = []string{
		fmt.Sprintf("plugin: %s %s, %s", meta.Name, meta.Version, ref),
		fmt.Sprintf("profile: %s (%s %s, %s, cloud provider %s)", run.Profile.Name, osp.Spec.OSName, osp.Spec.OSVersion, utility, provider),
		fmt.Sprintf("root file system: %s", rootfs),
		fmt.Sprintf("kubelet %s, API server %s, binary mirror %s", harness.KubeVersion, c.cfg.Host, c.mirror.URL),
	}
	if err := c.c.Create(context.Background(), osp); err != nil {
		t.Fatalf("creating profile %s: %v", osp.Name, err)
	}
	md := c.createMDFor(t, run.Name, string(osp.Spec.OSName), osp.Name, provider)
	res.MD = md
	reports := c.watchReports(t, md)

	// 1. The controller rendered both stages; the utility's own parser accepts them.
	var boot, prov *corev1.Secret
	var osc osmv1alpha1.OperatingSystemConfig
	var provIgn igntypes.Config
	res.check(t, stepUserData, func(t testing.TB) string {
		boot, prov = c.userData(t, md)
		// The controller may write the user-data Secrets before the OperatingSystemConfig.
		key := client.ObjectKey{Namespace: osmNamespace, Name: render.OSCName(md)}
		testenv.Eventually(t, 30*time.Second, "OperatingSystemConfig "+key.String()+" with its plugin status", func() error {
			if err := c.c.Get(context.Background(), key, &osc); err != nil {
				return err
			}
			if osc.Status.Plugin == nil {
				return fmt.Errorf("status %+v", osc.Status)
			}
			return nil
		})
		b, p := boot.Data[render.CloudConfigKey], prov.Data[render.CloudConfigKey]
		switch utility {
		case "cloud-init":
			cloudinittest.Validate(t, boot.Name, b)
			cloudinittest.Validate(t, prov.Name, p)
		case "ignition":
			for i, data := range [][]byte{b, p} {
				cfg, rpt, err := ignconfig.ParseCompatibleVersion(data)
				if err != nil || rpt.IsFatal() {
					t.Fatalf("Ignition rejects the %s config: %v %s", []string{"bootstrap", "provisioning"}[i], err, rpt)
				}
				if i == 1 {
					provIgn = cfg
				}
			}
		default:
			t.Fatalf("provisioning utility %q: the harness boots cloud-init and Ignition nodes", utility)
		}
		return fmt.Sprintf("bootstrap %d bytes, provisioning %d bytes (%s)", len(b), len(p), utility)
	})
	if res.Steps[stepUserData].Status != "PASS" {
		return res
	}
	if osc.Status.Plugin == nil || osc.Status.Plugin.Source != ref {
		t.Errorf("OSC %s was not rendered by %s: %+v", osc.Name, ref, osc.Status.Plugin)
	}

	// What the boot is checked against: the bootstrap unit (the one the bootstrap config enables with a
	// ConditionPathExists=! done marker), the setup unit and its marker.
	bootstrapUnitName, bootstrapDone := doneMarkerUnit(osc.Spec.BootstrapConfig.Units)
	setupDoneMarker := conditionNotExists(osc.Spec.ProvisioningConfig.Units, setupUnitName)
	bootstrapUser := "system:bootstrap:" + c.bootstrapTokenID(t, md)
	nodeName := run.Name
	units := []string{containerd, kubeletUnit}
	for _, u := range append(slices.Clone(osc.Spec.BootstrapConfig.Units), osc.Spec.ProvisioningConfig.Units...) {
		if !slices.Contains(units, u.Name) {
			units = append(units, u.Name)
		}
	}
	opts := nodeOptions{Name: nodeName, Rootfs: run.Rootfs, Lifetime: 12 * time.Minute}
	userData := machineUserData(boot.Data[render.CloudConfigKey], nodeName)
	failFast := []string{setupUnitName}
	if utility == "ignition" {
		// machine-controller substitutes the name in Ignition's data URLs too.
		opts.Ignition = bytes.ReplaceAll(userData, []byte("%3CMACHINE_NAME%3E"), []byte(nodeName))
	} else {
		opts.UserData = userData
		units = append(units, "cloud-init-local.service", "cloud-init.service", "cloud-config.service", "cloud-final.service")
		// A cloud-init node does not reboot: a failed bootstrap unit is final. An Ignition node's bootstrap
		// unit is stopped by the reboot it asks for.
		failFast = append(failFast, bootstrapUnitName)
	}
	opts.Units = units
	n := bootNode(t, opts)

	// A node whose bootstrap is done but whose setup never starts (a handoff that applies nothing, units
	// nobody enables) would wait for the whole timeout: give up when that lasts stallAfter.
	var doneSince time.Time
	stall := func(st map[string]unitState) error {
		// A kubelet or containerd that fails at every start (an ExecStartPre such as osm-node-env) never
		// gets the node further.
		if err := restartLoop(st, kubeletUnit, containerd); err != nil {
			return err
		}
		if bootstrapDone == "" || setupDoneMarker == "" || !n.file(bootstrapDone).exists || n.file(setupDoneMarker).exists || st[setupUnitName].active() {
			doneSince = time.Time{}
			return nil
		}
		if doneSince.IsZero() {
			doneSince = time.Now()
		}
		if time.Since(doneSince) > stallAfter {
			return fmt.Errorf("%s exists since %s, but %s has not run (no %s)", bootstrapDone, stallAfter, setupUnitName, setupDoneMarker)
		}
		return nil
	}
	csr, csrErr := c.waitForCSRUnless(n, bootstrapUser, 9*time.Minute, stall, failFast...)
	var certErr error
	var registered *corev1.Node
	if csrErr == nil {
		registered, certErr = c.signUntilRegistered(t, n, bootstrapUser, nodeName)
	}
	reportErr := csrErr
	if csrErr == nil {
		reportErr = reports.waitFor(nodeName, osmv1alpha1.PhaseNodeRegistered, 2*time.Minute)
	}
	r := n.collect()
	res.Node = n
	res.Header = append(res.Header, fmt.Sprintf("node %s: %d boot(s); report %s", nodeName, n.boots(), r.dir))
	if n.label != nil {
		res.Header = append(res.Header, fmt.Sprintf("node %s: a file system labelled %s (%s) at /dev/disk/by-label/%s", nodeName, n.label.name, n.label.dev, n.label.name))
	}

	res.check(t, stepCA, func(t testing.TB) string {
		var paths []string
		for _, f := range osc.Spec.BootstrapConfig.Files {
			if f.Content.Inline != nil && strings.TrimSpace(f.Content.Inline.Data) == strings.TrimSpace(string(c.cfg.CAData)) {
				paths = append(paths, f.Path)
			}
		}
		if len(paths) == 0 {
			t.Fatal("no file of the bootstrap config holds the cluster CA (context.cluster.caCert)")
		}
		for _, p := range paths {
			if got := n.file(p); !bytes.Equal(bytes.TrimSpace(got.content), bytes.TrimSpace(c.cfg.CAData)) {
				t.Errorf("%s on the node is not the cluster CA (exists: %v)", p, got.exists)
			}
		}
		return strings.Join(paths, ", ")
	})
	res.check(t, stepBootstrapRan, func(t testing.TB) string {
		if bootstrapUnitName == "" {
			t.Fatal("the bootstrap config enables no unit with a ConditionPathExists=! done marker (sdk/SPEC.md §9.4)")
		}
		j := r.unitJournal(bootstrapUnitName)
		if !regexp.MustCompile(`Start(ed|ing) ` + regexp.QuoteMeta(bootstrapUnitName)).MatchString(j) {
			t.Fatalf("%s never started:\n%s", bootstrapUnitName, tail(j, 15))
		}
		if bad := grepLines(j, `Failed with result|code=exited, status=[1-9]|code=killed`); len(bad) > 0 {
			t.Errorf("%s failed: %s", bootstrapUnitName, strings.Join(bad, "; "))
		}
		return bootstrapUnitName
	})
	res.check(t, stepFetch, func(t testing.TB) string {
		return checkFetchedWithOwnCredential(t, c, md, osc, bootstrapUser)
	})
	res.check(t, stepHandoff, func(t testing.TB) string {
		switch utility {
		case "cloud-init":
			checkProvisioningFiles(t, c, md, n, boot, prov)
			checkCloudInitFinished(t, r)
			return fmt.Sprintf("%d files of the provisioning config on the node; cloud-init's run finished without errors", len(cloudConfigFiles(t, prov.Data[render.CloudConfigKey])))
		default:
			log, _ := os.ReadFile(filepath.Join(n.dir, "initramfs.log"))
			stored := regexp.MustCompile(`initramfs \(boot ([2-9]|\d\d+)\): Ignition applies the stored (\S+) `).FindStringSubmatch(string(log))
			if stored == nil {
				t.Fatalf("Ignition never applied a config the node stored and flagged for a first boot:\n%s", log)
			}
			checkIgnitionResult(t, provIgn, n.root)
			return fmt.Sprintf("Ignition applied the stored %s at boot %s: %d files and %d units on the node, the enabled ones enabled", stored[2], stored[1], len(provIgn.Storage.Files), len(provIgn.Systemd.Units))
		}
	})
	res.check(t, stepDoneMarker, func(t testing.TB) string {
		if bootstrapDone == "" {
			t.Fatal("the bootstrap unit has no ConditionPathExists=! done marker")
		}
		if !n.file(bootstrapDone).exists {
			t.Errorf("%s is missing on the node", bootstrapDone)
		}
		reads := c.audit(t, func(e auditEvent) bool {
			return e.Verb == "get" && e.ObjectRef != nil && e.ObjectRef.Name == render.ProvisioningSecretName(md) && e.User.Username == bootstrapUser &&
				e.ResponseStatus != nil && e.ResponseStatus.Code == 200
		})
		if len(reads) != 1 {
			t.Errorf("the node read its provisioning Secret %d times, want once: %v", len(reads), reads)
		}
		return bootstrapDone
	})
	res.check(t, stepSetup, func(t testing.TB) string {
		j := r.unitJournal(setupUnitName)
		if !regexp.MustCompile(`Start(ed|ing) ` + regexp.QuoteMeta(setupUnitName)).MatchString(j) {
			t.Fatalf("%s never started (set OSM_CONFORMANCE_SETUP_UNIT if the plugin names it otherwise):\n%s", setupUnitName, tail(j, 15))
		}
		if st := r.units[setupUnitName]; st["Result"] != "success" || st.restarts() != 0 {
			t.Errorf("%s: %s\n%s", setupUnitName, st, tail(j, 15))
		}
		if setupDoneMarker != "" && !n.file(setupDoneMarker).exists {
			t.Errorf("%s is missing: %s did not finish", setupDoneMarker, setupUnitName)
		}
		return strings.TrimSpace(setupUnitName + " " + setupDoneMarker)
	})
	res.check(t, stepUnits, func(t testing.TB) string {
		enabled := 0
		for _, u := range osc.Spec.ProvisioningConfig.Units {
			switch {
			case u.Mask != nil && *u.Mask:
				if !n.masked(u.Name) {
					t.Errorf("%s: the OSC masks it; not masked on the node", u.Name)
				}
			case u.Enable != nil && *u.Enable:
				enabled++
				if ok, _ := n.enabledIn(u.Name); !ok {
					t.Errorf("%s: the OSC enables it; not enabled on the node", u.Name)
				}
			}
		}
		if st := r.units[containerd]; !st.active() {
			t.Errorf("%s: %s", containerd, st)
		}
		if j := r.unitJournal(kubeletUnit); !strings.Contains(j, "Started kubelet.service") {
			t.Errorf("kubelet.service was never started:\n%s", tail(j, 10))
		}
		env := environmentFailures()
		for _, u := range r.failed {
			if _, ok := env[u]; !ok {
				t.Errorf("unit %s failed:\n%s", u, tail(r.unitJournal(u), 10))
			}
		}
		return fmt.Sprintf("%d enabled units enabled; containerd active; no unit failed", enabled)
	})
	if csrErr != nil {
		res.fail(t, stepCSR, "%v", csrErr)
		res.Why = explain(r, bootstrapUnitName, setupUnitName, containerd, kubeletUnit)
		r.diagnose(t, bootstrapUnitName, setupUnitName, containerd, kubeletUnit)
		return res
	}
	res.check(t, stepCSR, func(t testing.TB) string {
		checkCSR(t, c, csr, bootstrapUser, nodeName)
		return fmt.Sprintf("CSR %s by %s, signer %s", csr.Name, csr.Spec.Username, csr.Spec.SignerName)
	})
	res.check(t, stepRegistered, func(t testing.TB) string {
		checkRegistration(t, c, n, r, certErr, registered, nodeName)
		return fmt.Sprintf("Node %s, kubelet %s", nodeName, registered.Status.NodeInfo.KubeletVersion)
	})
	t.Run("§11 the node reported every phase of its bootstrap", func(t *testing.T) {
		t.Logf("%s (%v)", checkReportedPhases(t, c, reports, nodeName), reportErr)
	})
	if t.Failed() {
		res.Why = explain(r, bootstrapUnitName, setupUnitName, containerd, kubeletUnit)
		r.diagnose(t, bootstrapUnitName, setupUnitName, containerd, kubeletUnit)
	}
	return res
}

// restartLoopAfter is how many restarts of a unit that should run for good (the kubelet, containerd) mean
// the node cannot progress: systemd restarts them after every failed start, an ExecStartPre included, and a
// node that joins restarts neither even once.
const restartLoopAfter = 3

// restartLoop reports a unit of units that systemd has restarted restartLoopAfter times: the run ends then,
// rather than when the CSR wait times out.
func restartLoop(st map[string]unitState, units ...string) error {
	for _, u := range units {
		if s, ok := st[u]; ok && s.restarts() >= restartLoopAfter {
			return fmt.Errorf("%s fails to start again and again (%s); see its journal in the report", u, s)
		}
	}
	return nil
}

// explain is the report's "Why" section: each unit of focus, or any other unit, that failed at least once on
// the node, with its state and its last journal lines, so that a failing step names the unit and shows why
// (an ExecStartPre that exits 1 before the kubelet starts, a setup script stopped by set -e).
func explain(r *report, focus ...string) string {
	var b strings.Builder
	seen := map[string]bool{}
	units := append(append(append([]string{}, focus...), r.failed...), slices.Sorted(maps.Keys(r.units))...)
	for _, u := range units {
		st, known := r.units[u]
		failed := slices.Contains(r.failed, u) || known && st.failedOnce()
		if u == "" || seen[u] || !failed {
			continue
		}
		seen[u] = true
		state := "failed"
		if known {
			state = st.String()
		}
		fmt.Fprintf(&b, "### %s: %s\n\n```\n%s```\n\n", u, state, tail(r.unitJournal(u), 20))
	}
	if b.Len() == 0 {
		return fmt.Sprintf("No unit failed on the node; the report directory %s has its unit states and journal.\n", r.dir)
	}
	return b.String()
}

// stallAfter is how long a conformance node may sit with its bootstrap done and its setup not started.
const stallAfter = 3 * time.Minute

// waitForCSRUnless is waitForCSR that also gives up when stalled (if not nil) reports an error.
func (c *cluster) waitForCSRUnless(n *node, username string, timeout time.Duration, stalled func(map[string]unitState) error, units ...string) (*certificatesv1.CertificateSigningRequest, error) {
	var csr *certificatesv1.CertificateSigningRequest
	err := n.waitUntil("a CSR from "+username, timeout, func(st map[string]unitState) (bool, error) {
		for _, u := range units {
			if s, ok := st[u]; ok && s.failedOnce() {
				return false, fmt.Errorf("%s failed: %s", u, s)
			}
		}
		if csrs, err := c.csrsBy(username); err == nil && len(csrs) > 0 {
			csr = &csrs[0]
			return true, nil
		}
		if stalled == nil {
			return false, nil
		}
		return false, stalled(st)
	})
	return csr, err
}

// doneMarkerUnit finds the bootstrap unit: the enabled unit with a ConditionPathExists=! done marker.
func doneMarkerUnit(units []osmv1alpha1.Unit) (name, marker string) {
	for _, u := range units {
		if u.Enable == nil || !*u.Enable {
			continue
		}
		if m := conditionNotExists(units, u.Name); m != "" {
			return u.Name, m
		}
	}
	return "", ""
}

var conditionNotExistsLine = regexp.MustCompile(`(?m)^ConditionPathExists=!(\S+)`)

// conditionNotExists is the path of the unit's ConditionPathExists=! (its done marker), if any.
func conditionNotExists(units []osmv1alpha1.Unit, name string) string {
	for _, u := range units {
		if u.Name == name && u.Content != nil {
			if m := conditionNotExistsLine.FindStringSubmatch(*u.Content); m != nil {
				return m[1]
			}
		}
	}
	return ""
}

// checkFetchedWithOwnCredential: the API server saw the node read its provisioning Secret with its
// MachineDeployment's bootstrap token (200), and no file of the bootstrap config turns TLS verification off.
func checkFetchedWithOwnCredential(t testing.TB, c *cluster, md *clusterv1alpha1.MachineDeployment, osc osmv1alpha1.OperatingSystemConfig, bootstrapUser string) string {
	secret := render.ProvisioningSecretName(md)
	reads := c.audit(t, func(e auditEvent) bool {
		return e.Verb == "get" && e.ObjectRef != nil && e.ObjectRef.Name == secret && strings.HasPrefix(e.User.Username, "system:bootstrap:")
	})
	var ok []auditEvent
	for _, e := range reads {
		switch {
		case e.User.Username != bootstrapUser:
			t.Errorf("read with another MachineDeployment's token: %s", e)
		case e.ResponseStatus != nil && e.ResponseStatus.Code == 200:
			ok = append(ok, e)
		case e.ResponseStatus != nil && (e.ResponseStatus.Code == 401 || e.ResponseStatus.Code == 403):
			t.Errorf("refused: %s", e)
		}
	}
	if len(ok) == 0 {
		t.Fatalf("the audit log has no successful GET of %s/%s by %s: %v", userDataNS, secret, bootstrapUser, reads)
	}
	insecure := regexp.MustCompile(`(^|\s)(-k|--insecure|--no-check-certificate)(\s|$)`)
	for _, f := range osc.Spec.BootstrapConfig.Files {
		if f.Content.Inline != nil && strings.Contains(f.Content.Inline.Data, secret) && insecure.MatchString(f.Content.Inline.Data) {
			t.Errorf("%s fetches %s with TLS verification turned off", f.Path, secret)
		}
	}
	return fmt.Sprintf("GET %s by %s from %v (%s): 200", ok[0].RequestURI, ok[0].User.Username, ok[0].SourceIPs, ok[0].UserAgent)
}

// signUntilRegistered approves and signs the kubelet's CSRs as kube-controller-manager would (every pending
// one: a kubelet that restarted asks again with a new key) until the kubelet has its certificate, then waits
// for its Node.
func (c *cluster) signUntilRegistered(t *testing.T, n *node, bootstrapUser, nodeName string) (registered *corev1.Node, certErr error) {
	t.Helper()
	kubeletCert := filepath.Join(kubeletCertDir(n), "kubelet-client-current.pem")
	certErr = n.waitUntil("the kubelet's client certificate "+kubeletCert, 3*time.Minute, func(map[string]unitState) (bool, error) {
		if n.file(kubeletCert).exists {
			return true, nil
		}
		csrs, err := c.csrsBy(bootstrapUser)
		if err != nil {
			return false, nil
		}
		for i := range csrs {
			if len(csrs[i].Status.Certificate) == 0 {
				c.approveAndSign(t, &csrs[i])
				t.Logf("approved and signed CSR %s", csrs[i].Name)
			}
		}
		return false, nil
	})
	if certErr == nil {
		_ = n.waitUntil("Node "+nodeName+" registered", 2*time.Minute, func(map[string]unitState) (bool, error) {
			var node corev1.Node
			if c.c.Get(context.Background(), client.ObjectKey{Name: nodeName}, &node) == nil {
				registered = &node
				return true, nil
			}
			return false, nil
		})
	}
	return registered, certErr
}

// runIn runs a command (in dir, unless empty) and returns its standard output, or its error with both outputs.
func runIn(dir, name string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String() + stderr.String(), err
	}
	return stdout.String(), nil
}
