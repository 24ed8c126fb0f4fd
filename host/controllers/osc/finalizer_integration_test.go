package osc_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	"github.com/osmhq/osm/host/controllers/osc"
	"github.com/osmhq/osm/host/credentials"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/testenv"
)

// staleReads serves one read of a MachineDeployment from a snapshot taken earlier, as an informer cache that
// has not yet seen another controller's write does; everything else goes to the real API server.
type staleReads struct {
	client.Client
	snapshot *clusterv1alpha1.MachineDeployment
}

func (s *staleReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if md, ok := obj.(*clusterv1alpha1.MachineDeployment); ok && s.snapshot != nil && key == client.ObjectKeyFromObject(s.snapshot) {
		s.snapshot.DeepCopyInto(md)
		s.snapshot = nil
		return nil
	}
	return s.Client.Get(ctx, key, obj, opts...)
}

// TestFinalizerKeepsOtherControllersFinalizers replays the lost-finalizer race against the real API server:
// another controller adds (and later a third adds) its finalizer to a MachineDeployment after OSM's cache last
// saw it. OSM adding and removing its own finalizer must keep theirs.
func TestFinalizerKeepsOtherControllersFinalizers(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := ctrl.LoggerInto(context.Background(), ctrl.Log)
	c := env.Client
	for _, ns := range []string{"cloud-init-settings", "osm"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	pc, _ := json.Marshal(map[string]any{"cloudProvider": "aws", "operatingSystem": "ubuntu", "cloudProviderSpec": map[string]any{}})
	md := &clusterv1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "workers",
			Annotations: map[string]string{clusterv1alpha1.AnnotationOSP: "osp-missing", clusterv1alpha1.AnnotationRevision: "1"}},
		Spec: clusterv1alpha1.MachineDeploymentSpec{Template: clusterv1alpha1.MachineTemplateSpec{Spec: clusterv1alpha1.MachineSpec{
			ProviderSpec: clusterv1alpha1.ProviderSpec{Value: &runtime.RawExtension{Raw: pc}},
			Versions:     clusterv1alpha1.MachineVersionInfo{Kubelet: "1.33.2"},
		}}},
	}
	if err := c.Create(ctx, md); err != nil {
		t.Fatal(err)
	}
	stale := &staleReads{Client: c}
	settings := render.DefaultSettings()
	settings.Namespace = "osm"
	r := &osc.Reconciler{
		Mgmt: c, Worker: stale, WorkerAPIReader: c, Renderer: &render.Renderer{},
		Issuer:   &credentials.Issuer{Client: c, Namespace: "cloud-init-settings"},
		Settings: settings, Recorder: record.NewFakeRecorder(100), StalledRetry: time.Hour,
		ClusterInfo: func(context.Context) (render.ClusterInfo, error) {
			return render.ClusterInfo{ServerURL: "https://api", CACert: "ca"}, nil
		},
		RegistryAuth: func(context.Context) (string, error) { return "", nil },
	}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(md)}
	// addFinalizer makes another controller add its finalizer after OSM's cache took the snapshot.
	addFinalizer := func(name string) {
		t.Helper()
		snapshot := &clusterv1alpha1.MachineDeployment{}
		if err := c.Get(ctx, req.NamespacedName, snapshot); err != nil {
			t.Fatal(err)
		}
		stale.snapshot = snapshot
		fresh := snapshot.DeepCopy()
		fresh.Finalizers = append(fresh.Finalizers, name)
		if err := c.Update(ctx, fresh); err != nil {
			t.Fatal(err)
		}
	}
	reconcileUntil := func(what string, done func([]string) bool) []string {
		t.Helper()
		got := &clusterv1alpha1.MachineDeployment{}
		for range 5 {
			if _, err := r.Reconcile(ctx, req); err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			if err := c.Get(ctx, req.NamespacedName, got); err != nil {
				t.Fatal(err)
			}
			if done(got.Finalizers) {
				return got.Finalizers
			}
		}
		t.Fatalf("%s: finalizers are %v", what, got.Finalizers)
		return nil
	}

	addFinalizer("example.com/other")
	reconcileUntil("adding ours keeps the other", func(f []string) bool {
		return slices.Contains(f, osc.Finalizer) && slices.Contains(f, "example.com/other")
	})

	// The MachineDeployment stops naming a profile: OSM cleans up and removes its finalizer, while a third
	// controller adds one its cache had not seen.
	current := &clusterv1alpha1.MachineDeployment{}
	if err := c.Get(ctx, req.NamespacedName, current); err != nil {
		t.Fatal(err)
	}
	delete(current.Annotations, clusterv1alpha1.AnnotationOSP)
	if err := c.Update(ctx, current); err != nil {
		t.Fatal(err)
	}
	addFinalizer("example.com/third")
	final := reconcileUntil("removing ours keeps the others", func(f []string) bool { return !slices.Contains(f, osc.Finalizer) })
	if !slices.Contains(final, "example.com/other") || !slices.Contains(final, "example.com/third") {
		t.Errorf("finalizers after OSM removed its own: %v, want example.com/other and example.com/third", final)
	}
}
