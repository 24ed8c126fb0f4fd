package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/controllers/nodereport"
	"github.com/osmhq/osm/host/controllers/osc"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/testenv"
	"github.com/osmhq/osm/plugins"
	"github.com/osmhq/osm/sdk/node"
)

// TestNodeReports drives the nodes' bootstrap reports through a real API server: the osm-report script of a
// MachineDeployment's real provisioning user-data (its real token substituted) runs in bash as osm-setup runs
// it; the controller folds what arrives into the OSC. The API server, not the node, enforces who may write what
// and how much.
func TestNodeReports(t *testing.T) {
	// Not parallel: labelledGauge reads metrics.Registry, whose gauges the controller started last replaces.
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	c := env.Client
	ensureNamespace(t, env, userDataNS)
	clusterInfo(t, env)
	installMachineCRDs(t, env)
	defaults, err := plugins.DefaultProfiles()
	if err != nil {
		t.Fatal(err)
	}
	startOSM(t, env, nil, app.Options{Builtins: plugins.Builtin(), Defaults: defaults, WorkerCount: 2})
	bootA, a := renderedMD(t, c, "reports-a")
	_, b := renderedMD(t, c, "reports-b")
	reportKey := func(md *clusterv1alpha1.MachineDeployment) client.ObjectKey {
		return client.ObjectKey{Namespace: userDataNS, Name: render.ProvisioningSecretName(md)}
	}
	for _, md := range []*clusterv1alpha1.MachineDeployment{a, b} {
		eventually(t, wait, "the report object of "+md.Name, func() error {
			return c.Get(ctx, reportKey(md), &osmv1alpha1.OperatingSystemNodeReport{})
		})
	}
	machines := map[string]bool{"reports-a-1": true, "reports-a-2": true, "reports-a-3": true}
	for name := range machines {
		createMachine(t, c, a, name)
	}
	tokenA := bootstrapTokenOf(t, c, a)
	run := newReporter(t, env, a)

	t.Run("the bootstrap reports Fetched", func(t *testing.T) {
		// The bootstrap's report lines, as osm-bootstrap runs them after its fetch (which set $tok).
		script := userDataFiles(t, bootA)[node.BootstrapScriptPath]
		start := strings.Index(script, "m=$(cat "+node.MachineNamePath)
		if start < 0 {
			t.Fatalf("no Fetched report in osm-bootstrap:\n%s", script)
		}
		lines := strings.SplitN(script[start:], "\n", 3)
		run(t, "reports-a-1", "tok="+shellQuote(string(bootA.Data[osc.KeyProvisioningToken]))+"\n"+lines[0]+"\n"+lines[1])
		eventually(t, wait, "reports-a-1 Fetched", func() error {
			report := &osmv1alpha1.OperatingSystemNodeReport{}
			if err := c.Get(ctx, reportKey(a), report); err != nil {
				return err
			}
			if got := report.Status.Machines["reports-a-1"].Phase; got != osmv1alpha1.PhaseFetched {
				return fmt.Errorf("phase %q", got)
			}
			return nil
		})
	})
	t.Run("every phase and a failure reach the OSC, redacted", func(t *testing.T) {
		run(t, "reports-a-1", "osm_report Applied; osm_report PackagesInstalled; osm_report RuntimeUp; osm_report KubeletStarted; osm_report NodeRegistered")
		run(t, "reports-a-2", "osm_report Applied; osm_report RuntimeUp")
		logLines := "Reading package lists...\nE: Unable to locate package jq\ncurl -H 'Authorization: Bearer " + tokenA + "' https://10.0.0.1\n" +
			"registry password=osm-leak-registry-password\nusing " + tokenA + "\n"
		run(t, "reports-a-3", "printf %s "+shellQuote(logLines)+" >$OSM_DIR/setup.log; osm_report Applied; osm_report Failed packages 100 $OSM_DIR/setup.log")
		osc := &osmv1alpha1.OperatingSystemConfig{}
		eventually(t, wait, "status.nodes of reports-a", func() error {
			if err := c.Get(ctx, client.ObjectKey{Namespace: osmNamespace, Name: render.OSCName(a)}, osc); err != nil {
				return err
			}
			n := osc.Status.Nodes
			if n == nil || n.Joined != 1 || n.Booting != 1 || n.Failed != 1 || len(n.Failing) != 1 || n.Phases[osmv1alpha1.PhaseRuntimeUp] != 1 {
				return fmt.Errorf("status.nodes = %+v", n)
			}
			return nil
		})
		f := osc.Status.Nodes.Failing[0]
		want := []string{"Reading package lists...", "E: Unable to locate package jq", "curl -H 'Authorization: <redacted>", "registry password= <redacted>",
			"using " + tokenA[:strings.Index(tokenA, ".")] + ".<redacted>"}
		if f.Name != "reports-a-3" || f.Step != "packages" || f.ExitCode == nil || *f.ExitCode != 100 || strings.Join(f.LogTail, "\n") != strings.Join(want, "\n") {
			t.Errorf("failing machine %+v, log tail %q, want %q", f, f.LogTail, want)
		}
		report := &osmv1alpha1.OperatingSystemNodeReport{}
		if err := c.Get(ctx, reportKey(a), report); err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal([]any{report, osc.Status})
		for _, secret := range []string{tokenA[strings.Index(tokenA, ".")+1:], "osm-leak-registry-password"} {
			if strings.Contains(string(raw), secret) {
				t.Errorf("a credential arrived in the cluster: %s", raw)
			}
		}
		waitForEvent(t, c, a.Name, nodereport.ReasonMachineBootstrapFailed)
		// kubectl get osc: the columns an operator starts from (docs/operations.md).
		out, err := exec.Command(testenv.Kubectl(t), "--kubeconfig", env.Kubeconfig, "get", "osc", "-n", osmNamespace, render.OSCName(a)).CombinedOutput()
		if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); err != nil || len(lines) != 2 ||
			!strings.HasSuffix(strings.Join(strings.Fields(lines[0]), " "), "JOINED BOOTING FAILED AGE") || !strings.Contains(strings.Join(strings.Fields(lines[1]), " "), " 1 1 1 ") {
			t.Errorf("kubectl get osc: %v\n%s", err, out)
		}
		if got := labelledGauge(t, "osm_node_bootstrap_phase", map[string]string{"machinedeployment": a.Name, "phase": "Failed"}); got != 1 {
			t.Errorf("osm_node_bootstrap_phase{phase=Failed} = %v", got)
		}

		// The same failure again (osm-setup retries): still one event, counted once.
		run(t, "reports-a-3", "osm_report Applied; osm_report Failed packages 100 $OSM_DIR/setup.log")
		run(t, "reports-a-2", "osm_report KubeletStarted")
		eventually(t, wait, "KubeletStarted counted", func() error {
			if err := c.Get(ctx, client.ObjectKey{Namespace: osmNamespace, Name: render.OSCName(a)}, osc); err != nil {
				return err
			}
			if osc.Status.Nodes.Phases[osmv1alpha1.PhaseKubeletStarted] != 1 {
				return fmt.Errorf("status.nodes = %+v", osc.Status.Nodes)
			}
			return nil
		})
		events := &corev1.EventList{}
		if err := c.List(ctx, events, client.InNamespace(a.Namespace)); err != nil {
			t.Fatal(err)
		}
		var count int32
		for _, e := range events.Items {
			if e.InvolvedObject.Name == a.Name && e.Reason == nodereport.ReasonMachineBootstrapFailed {
				count += max(e.Count, 1)
			}
		}
		if count != 1 {
			t.Errorf("%d %s events, want 1", count, nodereport.ReasonMachineBootstrapFailed)
		}
	})

	nodeA := nodeClient(t, env, tokenA)
	apply := func(key client.ObjectKey, entry map[string]any) error {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": osmv1alpha1.GroupVersion.String(), "kind": "OperatingSystemNodeReport",
			"metadata": map[string]any{"name": key.Name, "namespace": key.Namespace},
			"status":   map[string]any{"machines": map[string]any{"reports-a-1": entry}},
		}}
		return nodeA.Status().Patch(ctx, obj, client.Apply, client.FieldOwner("osm-node-reports-a-1"), client.ForceOwnership) //nolint:staticcheck // the nodes send exactly this apply patch
	}
	t.Run("a node credential writes only its own MachineDeployment's report", func(t *testing.T) {
		if err := apply(reportKey(b), map[string]any{"phase": "NodeRegistered"}); !apierrors.IsForbidden(err) {
			t.Errorf("writing reports-b's report with reports-a's credential: %v, want Forbidden", err)
		}
		other := &osmv1alpha1.OperatingSystemNodeReport{ObjectMeta: metav1.ObjectMeta{Namespace: userDataNS, Name: "made-up"}}
		if err := nodeA.Create(ctx, other); !apierrors.IsForbidden(err) {
			t.Errorf("creating a report: %v, want Forbidden", err)
		}
		own := &osmv1alpha1.OperatingSystemNodeReport{ObjectMeta: metav1.ObjectMeta{Namespace: userDataNS, Name: reportKey(a).Name}}
		if err := nodeA.Patch(ctx, own, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`))); !apierrors.IsForbidden(err) {
			t.Errorf("changing its report's metadata: %v, want Forbidden", err)
		}
		if err := nodeA.Delete(ctx, own); !apierrors.IsForbidden(err) {
			t.Errorf("deleting its report: %v, want Forbidden", err)
		}
		if err := apply(reportKey(a), map[string]any{"phase": "NodeRegistered"}); err != nil {
			t.Errorf("writing its own report: %v", err)
		}
	})
	t.Run("the API server enforces the bounds", func(t *testing.T) {
		lines := make([]any, node.ReportLogLines+1)
		for i := range lines {
			lines[i] = "line"
		}
		for name, entry := range map[string]map[string]any{
			"too many lines":   {"phase": "Failed", "step": "packages", "logTail": lines},
			"too long a line":  {"phase": "Failed", "step": "packages", "logTail": []any{strings.Repeat("x", node.ReportLineLength+1)}},
			"unsafe character": {"phase": "Failed", "step": "packages", "logTail": []any{`a "quoted" line`}},
			"unknown phase":    {"phase": "Bogus"},
			"step not a name":  {"phase": "Failed", "step": "$(reboot)"},
			"exit code 256":    {"phase": "Failed", "step": "packages", "exitCode": 256},
		} {
			if err := apply(reportKey(a), entry); !apierrors.IsInvalid(err) {
				t.Errorf("%s: %v, want Invalid (422)", name, err)
			}
		}
	})
	t.Run("the API server's flow control takes the reports apart (deploy/flowcontrol.yaml)", func(t *testing.T) {
		flowSchema := ""
		for _, o := range deployDocs(t) {
			if o.GroupVersionKind().Group != "flowcontrol.apiserver.k8s.io" {
				continue
			}
			if err := c.Create(ctx, o); err != nil {
				t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
			}
			if o.GetKind() == "FlowSchema" {
				flowSchema = string(o.GetUID())
			}
		}
		if flowSchema == "" {
			t.Fatal("deploy/ has no FlowSchema")
		}
		cfg := rest.AnonymousClientConfig(env.Config)
		cfg.BearerToken = tokenA
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		key := reportKey(a)
		url := fmt.Sprintf("%s/apis/%s/namespaces/%s/operatingsystemnodereports/%s/status?fieldManager=osm-node-reports-a-1&force=true",
			strings.TrimSuffix(env.Config.Host, "/"), osmv1alpha1.GroupVersion.String(), key.Namespace, key.Name)
		body := fmt.Sprintf(`{"apiVersion":%q,"kind":"OperatingSystemNodeReport","metadata":{"name":%q,"namespace":%q},"status":{"machines":{"reports-a-1":{"phase":"NodeRegistered"}}}}`,
			osmv1alpha1.GroupVersion.String(), key.Name, key.Namespace)
		// The API server reads new flow control objects in the background; it names the FlowSchema that
		// classified each request in a response header.
		eventually(t, wait, "a node's report classified by OSM's FlowSchema", func() error {
			req, err := http.NewRequestWithContext(ctx, http.MethodPatch, url, strings.NewReader(body))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/apply-patch+yaml")
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("HTTP %d", resp.StatusCode)
			}
			if got := resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID"); got != flowSchema {
				return fmt.Errorf("classified by FlowSchema %q, want osm-node-reports (%s)", got, flowSchema)
			}
			return nil
		})
	})
	t.Run("a deleted machine's report goes with it", func(t *testing.T) {
		m := &unstructured.Unstructured{}
		m.SetGroupVersionKind(machineGVK)
		m.SetNamespace(a.Namespace)
		m.SetName("reports-a-2")
		if err := c.Delete(ctx, m); err != nil {
			t.Fatal(err)
		}
		eventually(t, wait, "reports-a-2's entry pruned", func() error {
			report := &osmv1alpha1.OperatingSystemNodeReport{}
			if err := c.Get(ctx, reportKey(a), report); err != nil {
				return err
			}
			if _, ok := report.Status.Machines["reports-a-2"]; ok || len(report.Status.Machines) != 2 {
				return fmt.Errorf("machines %v", report.Status.Machines)
			}
			return nil
		})
	})
	t.Run("the report goes with its MachineDeployment", func(t *testing.T) {
		if err := c.Delete(ctx, b); err != nil {
			t.Fatal(err)
		}
		eventually(t, wait, "reports-b's report deleted", func() error {
			err := c.Get(ctx, reportKey(b), &osmv1alpha1.OperatingSystemNodeReport{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("still there: %w", err)
		})
	})
}

// newReporter returns a function that runs shell with osm-report of md's provisioning user-data sourced, as
// osm-setup does, its fixed paths pointed into a directory of the test ($OSM_DIR) and the machine's name in
// its /etc/machine-name.
func newReporter(t *testing.T, env *testenv.Env, md *clusterv1alpha1.MachineDeployment) func(t *testing.T, machine, shell string) {
	t.Helper()
	prov := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: userDataNS, Name: render.ProvisioningSecretName(md)}, prov); err != nil {
		t.Fatal(err)
	}
	script, ok := userDataFiles(t, prov)[node.ReportScriptPath]
	if !ok {
		t.Fatalf("the provisioning user-data has no %s", node.ReportScriptPath)
	}
	return func(t *testing.T, machine, shell string) {
		t.Helper()
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "ca.crt"), env.Config.CAData, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "machine-name"), []byte(machine), 0o600); err != nil {
			t.Fatal(err)
		}
		paths := strings.NewReplacer(node.CACertPath, filepath.Join(dir, "ca.crt"), node.MachineNamePath, filepath.Join(dir, "machine-name"), "/run/osm", dir)
		s, shell := paths.Replace(script), paths.Replace(shell)
		path := filepath.Join(dir, "osm-report")
		if err := os.WriteFile(path, []byte(s), 0o700); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", "-c", "set -euo pipefail\nlog() { echo \"$*\" >&2; }\n. "+path+"\n"+shell)
		cmd.Env = append(os.Environ(), "OSM_DIR="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Fatalf("%s: %v\n%s", shell, err, out)
		}
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

var machineGVK = clusterv1alpha1.GroupVersion.WithKind("Machine")

// installMachineCRDs installs machine-controller's Machine and MachineSet kinds, schema-less: enough for OSM
// to find a MachineDeployment's machines by their owner references.
func installMachineCRDs(t *testing.T, env *testenv.Env) {
	t.Helper()
	for _, kind := range []string{"Machine", "MachineSet"} {
		plural := strings.ToLower(kind) + "s"
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: plural + ".cluster.k8s.io", Annotations: map[string]string{"api-approved.kubernetes.io": "unapproved, legacy API"}},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "cluster.k8s.io", Scope: apiextensionsv1.NamespaceScoped,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind)},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1alpha1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
						XPreserveUnknownFields: ptr.To(true)}}}},
			},
		}
		if err := env.Client.Create(context.Background(), crd); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, wait, "the Machine kind served", func() error {
		return env.Client.List(context.Background(), &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "cluster.k8s.io/v1alpha1", "kind": "MachineList"}})
	})
}

// createMachine creates a Machine of md the way machine-controller does: owned by a MachineSet owned by md.
func createMachine(t *testing.T, c client.Client, md *clusterv1alpha1.MachineDeployment, name string) {
	t.Helper()
	ctx := context.Background()
	set := &unstructured.Unstructured{}
	set.SetGroupVersionKind(clusterv1alpha1.GroupVersion.WithKind("MachineSet"))
	set.SetNamespace(md.Namespace)
	set.SetName(md.Name + "-set")
	if err := c.Get(ctx, client.ObjectKeyFromObject(set), set); apierrors.IsNotFound(err) {
		set.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: clusterv1alpha1.GroupVersion.String(), Kind: "MachineDeployment", Name: md.Name, UID: md.UID}})
		if err := c.Create(ctx, set); err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	m := &unstructured.Unstructured{}
	m.SetGroupVersionKind(machineGVK)
	m.SetNamespace(md.Namespace)
	m.SetName(name)
	m.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: clusterv1alpha1.GroupVersion.String(), Kind: "MachineSet", Name: set.GetName(), UID: set.GetUID()}})
	if err := c.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
}

// labelledGauge reads a gauge of the controller's registry by labels.
func labelledGauge(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if matches(m, labels) {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

func matches(m *dto.Metric, labels map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := labels[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(labels)
}
