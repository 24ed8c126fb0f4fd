//go:build machinecontroller

package machinecontroller

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/controllers/osc"
	"github.com/osmhq/osm/host/controllers/rollout"
	"github.com/osmhq/osm/host/plugin"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/testenv"
	"github.com/osmhq/osm/plugins/pluginstest"
)

const (
	namespace      = "kube-system" // of the MachineDeployments, the profile and OSM (-namespace)
	kubeletVersion = "1.33.2"
	replicas       = 2
	maxSurge       = 1
	wait           = 3 * time.Minute // bounds a wait for the controllers, never a performance expectation
)

var isConflict = apierrors.IsConflict

// TestRolloutWithMachineController: a profile bump drifts four MachineDeployments of the fake provider, two
// replicas each. Under a budget of one, the three with policy rollout are queued and rolled one at a time; the
// policy of a queued one is deleted, and it never rolls. machine-controller replaces the machines of the two
// others (maxSurge 1, maxUnavailable 0), and the user-data it hands the provider for each replacement is the
// bootstrap Secret OSM rendered for the new revision, <MACHINE_NAME> replaced. The manual MachineDeployment
// only reports drift: no new MachineSet, the same machines.
func TestRolloutWithMachineController(t *testing.T) {
	bin, crdsPath := os.Getenv("OSM_MACHINE_CONTROLLER"), os.Getenv("OSM_MACHINE_CONTROLLER_CRDS")
	if bin == "" || crdsPath == "" {
		t.Fatal("set OSM_MACHINE_CONTROLLER to a machine-controller binary and OSM_MACHINE_CONTROLLER_CRDS to its CRDs (make e2e-machine-controller)")
	}
	ctrllog.SetLogger(logr.Discard()) // envtest's; the controllers log to their own files
	begin := time.Now()
	dir := artifacts(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	env := testenv.Start(t, testenv.Options{SkipExternalCRDs: true})
	c := env.Client
	crdNames := installMachineControllerCRDs(t, env, crdsPath)
	for _, want := range []string{"machines.cluster.k8s.io", "machinesets.cluster.k8s.io", "machinedeployments.cluster.k8s.io"} {
		if !slices.Contains(crdNames, want) {
			t.Fatalf("%s holds CRDs %v, not %s", crdsPath, crdNames, want)
		}
	}
	for _, ns := range []string{"kube-public", render.DefaultCloudInitSettingsNamespace} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
	publishClusterInfo(t, env)
	startOSM(t, env, filepath.Join(dir, "osm.log"))
	mc := startMachineController(t, env, bin, filepath.Join(dir, "machine-controller.log"))
	mc.joinNodes(ctx, t, c)
	t.Logf("control plane, OSM and machine-controller up after %s; logs in %s", time.Since(begin).Round(time.Millisecond), dir)

	if err := c.Create(ctx, proofProfile("v1.0.0", "one")); err != nil {
		t.Fatal(err)
	}
	mds := []struct{ name, policy string }{{"manual", ""}, {"roll-a", rollout.PolicyRollout}, {"roll-b", rollout.PolicyRollout}, {"roll-c", rollout.PolicyRollout}}
	for _, m := range mds {
		if err := c.Create(ctx, machineDeployment(m.name, m.policy)); err != nil {
			t.Fatal(err)
		}
	}

	// Revision 1: machine-controller creates two machines per MachineDeployment from OSM's first render.
	initial := map[string][]string{}
	for _, m := range mds {
		md := waitComplete(t, c, m.name, "1")
		secret := bootstrapSecret(t, c, md, "1")
		initial[m.name] = checkUserData(t, c, mc, m.name, secret, "bootstrap one")
		waitCondition(t, c, m.name, "1", osmv1alpha1.ConditionDrifted, metav1.ConditionFalse, osmv1alpha1.ReasonInSync)
	}
	created, _ := mc.count()
	t.Logf("revision 1: %d machines created from OSM's user-data, all joined, after %s", created, time.Since(begin).Round(time.Millisecond))

	s := startSampler(ctx, c)
	bumped := time.Now()
	bumpProfile(t, c, "v1.1.0", "two")

	// The manual MachineDeployment reports drift, naming the profile and both versions.
	manual := waitCondition(t, c, "manual", "1", osmv1alpha1.ConditionDrifted, metav1.ConditionTrue, osmv1alpha1.ReasonConfigurationChanged)
	if d := manual.Status.Drift; d == nil || d.ProvisionedProfileVersion != "v1.0.0" || !slices.Contains(d.Inputs, osc.InputProfile) || d.ProvisionedDigest == d.CurrentDigest {
		t.Errorf("manual: status.drift = %+v", d)
	}
	if msg := meta.FindStatusCondition(manual.Status.Conditions, osmv1alpha1.ConditionDrifted).Message; !strings.Contains(msg, "v1.0.0 → v1.1.0") {
		t.Errorf("manual: Drifted message %q does not name both profile versions", msg)
	}

	// One rollout starts, the two others queue; the policy of the last queued one is deleted.
	var queued string
	eventually(t, wait, "one rollout started and two queued", func() error {
		var started, waiting []string
		for _, name := range []string{"roll-a", "roll-b", "roll-c"} {
			if getMD(t, c, name).Spec.Template.Annotations[rollout.AnnotationRollout] != "" {
				started = append(started, name)
				continue
			}
			o, err := getOSC(c, name)
			if err != nil {
				return err
			}
			if cond := meta.FindStatusCondition(o.Status.Conditions, osmv1alpha1.ConditionRollingOut); cond != nil && cond.Reason == osmv1alpha1.ReasonRolloutQueued {
				waiting = append(waiting, name)
			}
		}
		if len(started) != 1 || len(waiting) != 2 {
			return fmt.Errorf("rolling %v, queued %v", started, waiting)
		}
		queued = waiting[1]
		return nil
	})
	eventually(t, wait, "deleting the rollout policy of "+queued, func() error {
		md := getMD(t, c, queued)
		patch := client.MergeFromWithOptions(md.DeepCopy(), client.MergeFromWithOptimisticLock{})
		delete(md.Annotations, rollout.AnnotationPolicy)
		return c.Patch(ctx, md, patch)
	})
	waitCondition(t, c, queued, "1", osmv1alpha1.ConditionRollingOut, metav1.ConditionFalse, osmv1alpha1.ReasonRolloutManual)

	// The two others roll, one after the other, to revision 2; the user-data of every replacement machine is
	// the new render.
	var rolled []string
	for _, m := range mds[1:] {
		if m.name != queued {
			rolled = append(rolled, m.name)
		}
	}
	replaced := map[string][]string{}
	for _, name := range rolled {
		md := waitComplete(t, c, name, "2")
		secret := bootstrapSecret(t, c, md, "2")
		replaced[name] = checkUserData(t, c, mc, name, secret, "bootstrap two")
		for _, m := range replaced[name] {
			if slices.Contains(initial[name], m) {
				t.Errorf("%s: machine %s of revision 1 is still there", name, m)
			}
		}
		if v := string(provisioningSecret(t, c, md).Data["cloud-config"]); !strings.Contains(v, "provisioning two") || strings.Contains(v, "provisioning one") {
			t.Errorf("%s: the provisioning Secret is not the new render:\n%s", name, v)
		}
		waitCondition(t, c, name, "2", osmv1alpha1.ConditionDrifted, metav1.ConditionFalse, osmv1alpha1.ReasonInSync)
		waitCondition(t, c, name, "2", osmv1alpha1.ConditionRollingOut, metav1.ConditionFalse, osmv1alpha1.ReasonRolloutFinished)
	}
	rolledOut := time.Since(bumped)
	// machine-controller deleted the replaced machines' instances and Nodes.
	eventually(t, wait, "the replaced machines' instances and nodes deleted", func() error {
		if _, deleted := mc.count(); deleted != len(rolled)*replicas {
			return fmt.Errorf("%d instances deleted, want %d", deleted, len(rolled)*replicas)
		}
		for _, name := range rolled {
			for _, m := range initial[name] {
				err := c.Get(ctx, client.ObjectKey{Name: m}, &corev1.Node{})
				if err == nil {
					return fmt.Errorf("node %s of a replaced machine still there", m)
				}
				if !apierrors.IsNotFound(err) {
					return err
				}
			}
		}
		return nil
	})
	// A while longer, to see that nothing else starts.
	time.Sleep(5 * time.Second) // an absence window, not ordering
	s.stop()

	// The manual MachineDeployment and the one whose policy was deleted: drifted, still revision 1, one
	// MachineSet, the same machines.
	for _, name := range []string{"manual", queued} {
		md := getMD(t, c, name)
		if v := md.Spec.Template.Annotations[rollout.AnnotationRollout]; v != "" || md.Annotations[clusterv1alpha1.AnnotationRevision] != "1" {
			t.Errorf("%s was rolled: revision %s, template annotation %q", name, md.Annotations[clusterv1alpha1.AnnotationRevision], v)
		}
		if sets := machineSetsOf(t, c, name); len(sets) != 1 {
			t.Errorf("%s has MachineSets %v, want the one of revision 1", name, sets)
		}
		if got := machineNames(t, c, name); !slices.Equal(got, initial[name]) {
			t.Errorf("%s has machines %v, want those of revision 1 %v", name, got, initial[name])
		}
		waitCondition(t, c, name, "1", osmv1alpha1.ConditionDrifted, metav1.ConditionTrue, osmv1alpha1.ReasonConfigurationChanged)
	}

	res := s.result()
	if res.maxRolling != 1 {
		t.Errorf("MachineDeployments rolling at once (OSM's rollout under way, machine-controller's status not complete): at most %d, want 1", res.maxRolling)
	}
	if res.maxReplacing > 1 {
		t.Errorf("MachineDeployments replacing machines at once (machines of two MachineSets, or a machine without a node): at most %d, want at most 1", res.maxReplacing)
	}
	if res.maxMachines > replicas+maxSurge {
		t.Errorf("a MachineDeployment had %d machines at once, more than replicas %d + maxSurge %d", res.maxMachines, replicas, maxSurge)
	}
	if !slices.Equal(res.order(), rolled) && !slices.Equal(res.order(), []string{rolled[1], rolled[0]}) || len(res.order()) != 2 {
		t.Errorf("MachineDeployments seen rolling: %v, want %v", res.order(), rolled)
	}
	for i, a := range res.order() {
		for _, b := range res.order()[i+1:] {
			if res.first[b].Before(res.last[a]) && res.first[a].Before(res.last[b]) {
				t.Errorf("%s (%s–%s) and %s (%s–%s) rolled at the same time", a, res.first[a].Format(time.StampMilli), res.last[a].Format(time.StampMilli),
					b, res.first[b].Format(time.StampMilli), res.last[b].Format(time.StampMilli))
			}
		}
	}
	var spans []string
	for _, name := range res.order() {
		spans = append(spans, fmt.Sprintf("%s %s", name, res.last[name].Sub(res.first[name]).Round(100*time.Millisecond)))
	}
	t.Logf("profile bump to both rollouts finished: %s (rolling: %s); %d samples, at most %d MachineDeployment rolling and %d replacing machines at once, at most %d machines per MachineDeployment",
		rolledOut.Round(time.Millisecond), strings.Join(spans, ", "), res.samples, res.maxRolling, res.maxReplacing, res.maxMachines)
	created, deleted := mc.count()
	t.Logf("instances machine-controller had the fake provider create: %d (%d of revision 1, %d replacements, user-data checked for each), delete: %d; total %s",
		created, len(mds)*replicas, created-len(mds)*replicas, deleted, time.Since(begin).Round(time.Millisecond))
}

// startOSM runs OSM's controller in the test process, as cmd/osm-controller would with
// -rollout-max-concurrent=1, until the test ends; its log goes to logPath.
func startOSM(t *testing.T, env *testenv.Env, logPath string) {
	t.Helper()
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(f, time.Now().Format(time.RFC3339Nano), prefix, args)
	}, funcr.Options{})
	settings := render.DefaultSettings()
	settings.Namespace = namespace
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := app.New(ctx, app.Options{
		Mgmt: env.Config, Settings: settings, WorkerCount: 4, DisableDefaultOSPs: true,
		Builtins:       fstest.MapFS{}, // the profile is templates only, as upstream's are
		Plugins:        plugin.Config{CacheDir: pluginstest.CacheDir(t), Timeout: 2 * time.Second, MemoryLimit: 64 << 20},
		MetricsAddress: "0", HealthProbeAddress: "0", Logger: logger,
		RolloutMaxConcurrent: 1,
	})
	if err != nil {
		cancel()
		t.Fatalf("building OSM's controller: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("OSM's controller stopped with: %v", err)
		}
		mu.Lock()
		_ = f.Close()
		mu.Unlock()
	})
}

// publishClusterInfo writes kube-public/cluster-info as kubeadm does, pointing at env's API server.
func publishClusterInfo(t *testing.T, env *testenv.Env) {
	t.Helper()
	kubeconfig := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: \"\"\n  cluster:\n    server: %s\n    certificate-authority-data: %s\n",
		env.Config.Host, b64(env.Config.CAData))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-public", Name: "cluster-info"}, Data: map[string]string{"kubeconfig": kubeconfig}}
	if err := env.Client.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
}

// proofProfile is a templates-only profile (as upstream's are) for the fake provider whose bootstrap and
// provisioning stages each carry a file that says which content the profile version has.
func proofProfile(version, content string) *osmv1alpha1.OperatingSystemProfile {
	file := func(path, data string) osmv1alpha1.File {
		return osmv1alpha1.File{Path: path, Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{Data: data}}}
	}
	return &osmv1alpha1.OperatingSystemProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "osp-proof", Namespace: namespace},
		Spec: osmv1alpha1.OperatingSystemProfileSpec{
			OSName: "ubuntu", OSVersion: "24.04", Version: version,
			SupportedCloudProviders: []osmv1alpha1.CloudProviderSpec{{Name: "fake"}},
			BootstrapConfig: osmv1alpha1.OSPConfig{Files: []osmv1alpha1.File{
				file("/etc/osm-proof", "bootstrap "+content+"\n"),
				file("/opt/bin/fetch", "#!/bin/sh\ncurl --cacert /etc/kubernetes/ca.crt -H 'Authorization: Bearer {{ .Token }}' {{ .ServerURL }}/api/v1/namespaces/cloud-init-settings/secrets/{{ .SecretName }}\n"),
			}},
			ProvisioningConfig: osmv1alpha1.OSPConfig{Files: []osmv1alpha1.File{
				file("/etc/osm-proof", "provisioning "+content+"\n"),
				file("/etc/kubernetes/bootstrap-kubelet.conf", "{{ .BootstrapKubeconfig }}"),
			}},
		},
	}
}

func bumpProfile(t *testing.T, c client.Client, version, content string) {
	t.Helper()
	eventually(t, wait, "bumping the profile to "+version, func() error {
		p := &osmv1alpha1.OperatingSystemProfile{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: "osp-proof"}, p); err != nil {
			return err
		}
		p.Spec = proofProfile(version, content).Spec
		return c.Update(context.Background(), p)
	})
}

// machineDeployment is a MachineDeployment of the fake provider as machine-controller's defaulting webhook
// leaves it (the webhook does not run here): replicas, strategy and selector set.
func machineDeployment(name, policy string) *unstructured.Unstructured {
	labels := map[string]any{"osm-proof/machinedeployment": name}
	annotations := map[string]any{clusterv1alpha1.AnnotationOSP: "osp-proof"}
	if policy != "" {
		annotations[rollout.AnnotationPolicy] = policy
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.k8s.io/v1alpha1",
		"kind":       "MachineDeployment",
		"metadata":   map[string]any{"name": name, "namespace": namespace, "annotations": annotations},
		"spec": map[string]any{
			"replicas":                int64(replicas),
			"minReadySeconds":         int64(0),
			"revisionHistoryLimit":    int64(1),
			"progressDeadlineSeconds": int64(600),
			"selector":                map[string]any{"matchLabels": labels},
			"strategy": map[string]any{"type": "RollingUpdate",
				"rollingUpdate": map[string]any{"maxSurge": int64(maxSurge), "maxUnavailable": int64(0)}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{
					"providerSpec": map[string]any{"value": map[string]any{
						"cloudProvider":       "fake",
						"cloudProviderSpec":   map[string]any{"passValidation": true},
						"operatingSystem":     "ubuntu",
						"operatingSystemSpec": map[string]any{},
						"sshPublicKeys":       []any{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOsmTestKey proof@osm"},
					}},
					"versions": map[string]any{"kubelet": kubeletVersion},
				},
			},
		},
	}}
	return u
}

func getMD(t *testing.T, c client.Client, name string) *clusterv1alpha1.MachineDeployment {
	t.Helper()
	md := &clusterv1alpha1.MachineDeployment{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, md); err != nil {
		t.Fatal(err)
	}
	return md
}

func getOSC(c client.Client, md string) (*osmv1alpha1.OperatingSystemConfig, error) {
	o := &osmv1alpha1.OperatingSystemConfig{}
	name := render.OSCName(&clusterv1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: md}})
	return o, c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, o)
}

// waitComplete waits until machine-controller has the MachineDeployment at revision, complete as its own
// MachineDeploymentComplete says, with only the machines of that revision's MachineSet left, each with its
// node.
func waitComplete(t *testing.T, c client.Client, name, revision string) *clusterv1alpha1.MachineDeployment {
	t.Helper()
	var md *clusterv1alpha1.MachineDeployment
	eventually(t, wait, name+" complete at revision "+revision, func() error {
		md = getMD(t, c, name)
		if md.Annotations[clusterv1alpha1.AnnotationRevision] != revision || !rollout.Finished(md) {
			return fmt.Errorf("revision %q, generation %d, status %+v", md.Annotations[clusterv1alpha1.AnnotationRevision], md.Generation, md.Status)
		}
		machines := listMachines(t, c)
		sets := machineSetsOf(t, c, name)
		var current string
		for set, rev := range sets {
			if rev == revision {
				current = set
			}
		}
		n := 0
		for _, m := range machines {
			owner := controllerOf(m)
			if _, ours := sets[owner]; !ours {
				continue
			}
			if owner != current {
				return fmt.Errorf("machine %s of MachineSet %s (not revision %s) still there", m.GetName(), owner, revision)
			}
			if node, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name"); node == "" {
				return fmt.Errorf("machine %s has no node yet", m.GetName())
			}
			n++
		}
		if n != replicas {
			return fmt.Errorf("%d machines of revision %s", n, revision)
		}
		return nil
	})
	return md
}

// waitCondition waits for the OSC of md to be at revision with condition cond in status and reason.
func waitCondition(t *testing.T, c client.Client, md, revision, cond string, status metav1.ConditionStatus, reason string) *osmv1alpha1.OperatingSystemConfig {
	t.Helper()
	var o *osmv1alpha1.OperatingSystemConfig
	eventually(t, wait, fmt.Sprintf("%s: %s=%s/%s at revision %s", md, cond, status, reason, revision), func() (err error) {
		if o, err = getOSC(c, md); err != nil {
			return err
		}
		got := meta.FindStatusCondition(o.Status.Conditions, cond)
		if o.Status.MachineDeploymentRevision != revision || got == nil || got.Status != status || got.Reason != reason {
			return fmt.Errorf("revision %s, %s: %+v", o.Status.MachineDeploymentRevision, cond, got)
		}
		return nil
	})
	return o
}

func bootstrapSecret(t *testing.T, c client.Client, md *clusterv1alpha1.MachineDeployment, revision string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	key := client.ObjectKey{Namespace: render.DefaultCloudInitSettingsNamespace, Name: render.BootstrapSecretName(md)}
	eventually(t, wait, "the bootstrap Secret of "+md.Name+" at revision "+revision, func() error {
		if err := c.Get(context.Background(), key, s); err != nil {
			return err
		}
		if got := s.Annotations["k8c.io/machine-deployment-revision"]; got != revision {
			return fmt.Errorf("revision %q", got)
		}
		return nil
	})
	return s
}

func provisioningSecret(t *testing.T, c client.Client, md *clusterv1alpha1.MachineDeployment) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	key := client.ObjectKey{Namespace: render.DefaultCloudInitSettingsNamespace, Name: render.ProvisioningSecretName(md)}
	if err := c.Get(context.Background(), key, s); err != nil {
		t.Fatal(err)
	}
	return s
}

// checkUserData checks that the provider was handed, for each machine of the MachineDeployment, the
// bootstrap Secret's user-data with <MACHINE_NAME> replaced by the machine's name, holding marker; it
// returns the machines' names.
func checkUserData(t *testing.T, c client.Client, mc *machineController, md string, secret *corev1.Secret, marker string) []string {
	t.Helper()
	rendered := string(secret.Data["cloud-config"])
	if !strings.Contains(rendered, render.MachineNamePlaceholder) || !strings.Contains(rendered, marker) {
		t.Fatalf("%s: the bootstrap Secret holds no %s or no %q:\n%s", md, render.MachineNamePlaceholder, marker, rendered)
	}
	names := machineNames(t, c, md)
	for _, name := range names {
		i, ok := mc.instance(name)
		if !ok {
			t.Errorf("%s: machine-controller created no instance for machine %s", md, name)
			continue
		}
		want := strings.ReplaceAll(rendered, render.MachineNamePlaceholder, name)
		if i.UserData != want {
			t.Errorf("%s: machine %s was handed user-data other than the bootstrap Secret of revision %s:\n--- handed\n%s\n--- rendered\n%s",
				md, name, secret.Annotations["k8c.io/machine-deployment-revision"], i.UserData, want)
		}
		var doc struct {
			Hostname   string `json:"hostname"`
			WriteFiles []struct {
				Path, Content string
			} `json:"write_files"`
		}
		if err := yaml.Unmarshal([]byte(i.UserData), &doc); err != nil {
			t.Errorf("%s: machine %s: the user-data is not YAML: %v", md, name, err)
		}
		named := doc.Hostname == name
		for _, f := range doc.WriteFiles {
			if f.Path == render.MachineNameFile {
				named = named && f.Content == name
			}
		}
		if !named || strings.Contains(i.UserData, render.MachineNamePlaceholder) {
			t.Errorf("%s: machine %s: the user-data does not name the machine (hostname, %s):\n%s", md, name, render.MachineNameFile, i.UserData)
		}
	}
	return names
}

func listMachines(t *testing.T, c client.Client) []unstructured.Unstructured {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion("cluster.k8s.io/v1alpha1")
	list.SetKind("MachineList")
	if err := c.List(context.Background(), list, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// machineSetsOf returns the MachineSets of a MachineDeployment with their revisions.
func machineSetsOf(t *testing.T, c client.Client, md string) map[string]string {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion("cluster.k8s.io/v1alpha1")
	list.SetKind("MachineSetList")
	if err := c.List(context.Background(), list, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	sets := map[string]string{}
	for _, s := range list.Items {
		if controllerOf(s) == md {
			sets[s.GetName()] = s.GetAnnotations()[clusterv1alpha1.AnnotationRevision]
		}
	}
	return sets
}

// machineNames are the names of the MachineDeployment's machines that are not being deleted, sorted.
func machineNames(t *testing.T, c client.Client, md string) []string {
	t.Helper()
	sets := machineSetsOf(t, c, md)
	var names []string
	for _, m := range listMachines(t, c) {
		if _, ours := sets[controllerOf(m)]; ours && m.GetDeletionTimestamp() == nil {
			names = append(names, m.GetName())
		}
	}
	sort.Strings(names)
	return names
}

func controllerOf(o unstructured.Unstructured) string {
	for _, ref := range o.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller {
			return ref.Name
		}
	}
	return ""
}

// eventually is testenv.Eventually.
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	testenv.Eventually(t, timeout, what, check)
}
