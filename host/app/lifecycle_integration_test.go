package app_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/app"
	"github.com/osmhq/osm/host/controllers/osp"
	"github.com/osmhq/osm/host/credentials"
	"github.com/osmhq/osm/host/testenv"
)

// TestWorkerMode runs OSM with two real API servers: profiles and OSCs in the management cluster, and
// MachineDeployments, Secrets and credentials in the worker cluster, as -kubeconfig and
// -worker-cluster-kubeconfig set it up.
func TestWorkerMode(t *testing.T) {
	t.Parallel()
	mgmt := testenv.Start(t, testenv.Options{SkipExternalCRDs: true})
	worker := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	ensureNamespace(t, worker, userDataNS)
	clusterInfo(t, worker)
	startOSM(t, mgmt, worker, app.Options{Builtins: os.DirFS(builtins(t, nil)), DisableDefaultOSPs: true})

	if err := mgmt.Client.Create(ctx, testOSP("osp-testos", "v1.0.0")); err != nil {
		t.Fatal(err)
	}
	md := newMD(t, "remote", "testos", "aws", "osp-testos")
	if err := worker.Client.Create(ctx, md); err != nil {
		t.Fatal(err)
	}
	waitForSecret(t, worker.Client, "remote-kube-system-bootstrap-config", "1")
	waitForSecret(t, worker.Client, "remote-kube-system-provisioning-config", "1")
	eventually(t, wait, "OSC in the management cluster", func() error {
		return mgmt.Client.Get(ctx, client.ObjectKey{Namespace: osmNamespace, Name: "remote.kube-system-config"}, &osmv1alpha1.OperatingSystemConfig{})
	})
	// Nothing of the worker side leaks into the management cluster, and the other way round.
	if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: userDataNS, Name: "remote-kube-system-bootstrap-config"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("user-data Secret found in the management cluster: %v", err)
	}
	bootstrapTokenOf(t, worker.Client, md) // exactly one, in the worker cluster
	// The bootstrap user-data points nodes at the worker cluster's API server.
	boot := &corev1.Secret{}
	if err := worker.Client.Get(ctx, client.ObjectKey{Namespace: userDataNS, Name: "remote-kube-system-bootstrap-config"}, boot); err != nil {
		t.Fatal(err)
	}
	if got := userDataFiles(t, boot)["/opt/bin/fetch"]; !containsAll(got, worker.Config.Host, "remote-kube-system-provisioning-config") {
		t.Errorf("bootstrap fetch script does not target the worker cluster:\n%s", got)
	}

	if err := worker.Client.Delete(ctx, md); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "cleanup in both clusters", func() error {
		if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: osmNamespace, Name: "remote.kube-system-config"}, &osmv1alpha1.OperatingSystemConfig{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("OSC still there: %w", err)
		}
		if err := worker.Client.Get(ctx, client.ObjectKeyFromObject(md), md); !apierrors.IsNotFound(err) {
			return fmt.Errorf("MachineDeployment still there")
		}
		return nil
	})
}

// TestRestartConverges kills the controller while it is working through a batch of MachineDeployments,
// starts a new one, and checks that the end state is complete and has no duplicates; then restarts once more
// and checks that a controller with nothing to do writes nothing.
func TestRestartConverges(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	c := env.Client
	ensureNamespace(t, env, userDataNS)
	clusterInfo(t, env)
	dir := builtins(t, nil)
	if err := c.Create(ctx, testOSP("osp-testos", "v1.0.0")); err != nil {
		t.Fatal(err)
	}
	const n = 30
	var mds []*clusterv1alpha1.MachineDeployment
	for i := range n {
		md := newMD(t, fmt.Sprintf("batch-%02d", i), "testos", "aws", "osp-testos")
		if err := c.Create(ctx, md); err != nil {
			t.Fatal(err)
		}
		mds = append(mds, md)
	}

	stop := startStoppable(t, env, nil, app.Options{Builtins: os.DirFS(dir), DisableDefaultOSPs: true, WorkerCount: 2})
	eventually(t, wait, "some progress before the kill", func() error {
		list := &corev1.SecretList{}
		if err := c.List(ctx, list, client.InNamespace(userDataNS)); err != nil {
			return err
		}
		if len(list.Items) < 3 {
			return fmt.Errorf("%d Secrets", len(list.Items))
		}
		return nil
	})
	stop()

	stop = startStoppable(t, env, nil, app.Options{Builtins: os.DirFS(dir), DisableDefaultOSPs: true, WorkerCount: 4})
	for _, md := range mds {
		waitForSecret(t, c, md.Name+"-kube-system-bootstrap-config", "1")
		waitForSecret(t, c, md.Name+"-kube-system-provisioning-config", "1")
	}
	for _, md := range mds {
		bootstrapTokenOf(t, c, md) // fails unless exactly one
		list := &osmv1alpha1.OperatingSystemConfigList{}
		if err := c.List(ctx, list, client.InNamespace(osmNamespace), client.MatchingLabels(credentials.Labels(md))); err != nil || len(list.Items) != 1 {
			t.Errorf("%s: %d OSCs (err %v)", md.Name, len(list.Items), err)
		}
	}
	before := resourceVersions(t, c)
	stop()

	stop = startStoppable(t, env, nil, app.Options{Builtins: os.DirFS(dir), DisableDefaultOSPs: true, WorkerCount: 4})
	defer stop()
	// Give the new controller time to reconcile every MachineDeployment once (it starts with a full resync).
	eventually(t, wait, "the third controller to see all MachineDeployments", func() error {
		for _, md := range mds {
			got := &osmv1alpha1.OperatingSystemConfig{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: osmNamespace, Name: md.Name + ".kube-system-config"}, got); err != nil {
				return err
			}
			if !meta.IsStatusConditionTrue(got.Status.Conditions, osmv1alpha1.ConditionReady) {
				return fmt.Errorf("%s not ready: %+v", md.Name, got.Status)
			}
		}
		return nil
	})
	absenceWindow(3 * time.Second)
	after := resourceVersions(t, c)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s was written by a controller that had nothing to do (resourceVersion %s -> %s)", k, v, after[k])
		}
	}
}

// TestDefaultProfiles checks that the shipped profiles are installed, restored when deleted, upgraded when
// the shipped version is newer and never downgraded, and that their status reports the resolved plugin.
func TestDefaultProfiles(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	c := env.Client
	ensureNamespace(t, env, userDataNS)
	clusterInfo(t, env)

	// An operator's copy of one default, at a newer version than shipped: it must be left alone.
	adopted := testOSP("osp-adopted", "v9.0.0")
	if err := c.Create(ctx, adopted); err != nil {
		t.Fatal(err)
	}
	// An old copy of another default, installed by an earlier OSM: it must be upgraded.
	old := testOSP("osp-old", "v0.1.0")
	old.Labels = map[string]string{osp.LabelDefault: "true"}
	if err := c.Create(ctx, old); err != nil {
		t.Fatal(err)
	}
	// The operator's own profile under a default's name, at an older version: never replaced.
	custom := testOSP("osp-custom", "v0.1.0")
	if err := c.Create(ctx, custom); err != nil {
		t.Fatal(err)
	}
	shipped := []*osmv1alpha1.OperatingSystemProfile{testOSP("osp-new", "v1.0.0"), testOSP("osp-adopted", "v1.0.0"), testOSP("osp-old", "v1.0.0"),
		testOSP("osp-custom", "v1.0.0")}
	for _, s := range shipped {
		s.Namespace = ""
	}
	startOSM(t, env, nil, app.Options{Builtins: os.DirFS(builtins(t, nil)), Defaults: shipped})

	get := func(name string) *osmv1alpha1.OperatingSystemProfile {
		o := &osmv1alpha1.OperatingSystemProfile{}
		eventually(t, wait, "profile "+name, func() error { return c.Get(ctx, client.ObjectKey{Namespace: osmNamespace, Name: name}, o) })
		return o
	}
	eventually(t, wait, "defaults installed and upgraded", func() error {
		if v := get("osp-old").Spec.Version; v != "v1.0.0" {
			return fmt.Errorf("osp-old at %s", v)
		}
		return c.Get(ctx, client.ObjectKey{Namespace: osmNamespace, Name: "osp-new"}, &osmv1alpha1.OperatingSystemProfile{})
	})
	if v := get("osp-adopted").Spec.Version; v != "v9.0.0" {
		t.Errorf("a newer profile was downgraded to %s", v)
	}
	if v := get("osp-custom").Spec.Version; v != "v0.1.0" {
		t.Errorf("the operator's own profile under a default's name was replaced by %s", v)
	}
	eventually(t, wait, "status of a default profile", func() error {
		o := get("osp-new")
		if !meta.IsStatusConditionTrue(o.Status.Conditions, osmv1alpha1.ConditionReady) || o.Status.Plugin == nil ||
			o.Status.Plugin.Name != "selective" || len(o.Status.Plugin.Digest) != len("sha256:")+64 || o.Status.ObservedGeneration != o.Generation {
			return fmt.Errorf("status = %+v", o.Status)
		}
		if o.Labels[osp.LabelDefault] != "true" {
			return fmt.Errorf("labels = %v", o.Labels)
		}
		return nil
	})
	if err := c.Delete(ctx, get("osp-new")); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "deleted default restored", func() error {
		o := &osmv1alpha1.OperatingSystemProfile{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: osmNamespace, Name: "osp-new"}, o); err != nil {
			return err
		}
		if !o.DeletionTimestamp.IsZero() {
			return fmt.Errorf("still deleting")
		}
		return nil
	})

	// A profile whose plugin does not exist is reported, not hidden.
	broken := testOSP("osp-missing-plugin", "v1.0.0")
	broken.Spec.Plugin.Builtin = "nope"
	if err := c.Create(ctx, broken); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "missing plugin reported", func() error {
		o := get("osp-missing-plugin")
		cond := meta.FindStatusCondition(o.Status.Conditions, osmv1alpha1.ConditionPluginResolved)
		if cond == nil || cond.Reason != osmv1alpha1.ReasonPluginNotFound {
			return fmt.Errorf("conditions = %+v", o.Status.Conditions)
		}
		return nil
	})
}

// resourceVersions records the resourceVersion of every object OSM writes.
func resourceVersions(t *testing.T, c client.Client) map[string]string {
	t.Helper()
	out := map[string]string{}
	secrets := &corev1.SecretList{}
	if err := c.List(context.Background(), secrets, client.InNamespace(userDataNS)); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		out["Secret "+s.Name] = s.ResourceVersion
	}
	tokens := &corev1.SecretList{}
	if err := c.List(context.Background(), tokens, client.InNamespace("kube-system"), client.HasLabels{credentials.LabelMachineDeployment}); err != nil {
		t.Fatal(err)
	}
	for _, s := range tokens.Items {
		out["Token "+s.Name] = s.ResourceVersion
	}
	oscs := &osmv1alpha1.OperatingSystemConfigList{}
	if err := c.List(context.Background(), oscs, client.InNamespace(osmNamespace)); err != nil {
		t.Fatal(err)
	}
	for _, o := range oscs.Items {
		out["OSC "+o.Name] = o.ResourceVersion
	}
	return out
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
