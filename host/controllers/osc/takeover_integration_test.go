package osc_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/controllers/osc"
	"github.com/osmhq/osm/host/render"
)

// TestNothingRenderedFromAProfileAboutToBeTakenOver: while the profile a MachineDeployment names is one the
// profile controller is about to replace (upstream OSM's default, at start), the reconcile writes nothing —
// no finalizer, no OSC, no Secret, no credential — and looks again soon; should the replacement not come within
// TakeoverPatience, it renders from the profile after all.
func TestNothingRenderedFromAProfileAboutToBeTakenOver(t *testing.T) {
	ctx, c, _, r, md := finalizerFixture(t, "osp-template")
	r.TakesOver = func(p *osmv1alpha1.OperatingSystemProfile) bool { return p.Name == "osp-template" }
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(md)}
	res, err := r.Reconcile(ctx, req)
	if err != nil || res.RequeueAfter <= 0 {
		t.Fatalf("reconcile of a MachineDeployment whose profile is about to be replaced: %+v, %v; want a requeue", res, err)
	}
	cur := &clusterv1alpha1.MachineDeployment{}
	if err := c.Get(ctx, req.NamespacedName, cur); err != nil || controllerutil.ContainsFinalizer(cur, osc.Finalizer) {
		t.Errorf("finalizer written while waiting: %v %v", err, cur.Finalizers)
	}
	written := func() []string {
		var found []string
		for key, o := range map[client.ObjectKey]client.Object{
			{Namespace: "osm", Name: render.OSCName(md)}:                                &osmv1alpha1.OperatingSystemConfig{},
			{Namespace: "cloud-init-settings", Name: render.BootstrapSecretName(md)}:    &corev1.Secret{},
			{Namespace: "cloud-init-settings", Name: render.ProvisioningSecretName(md)}: &corev1.Secret{},
		} {
			if err := c.Get(ctx, key, o); !apierrors.IsNotFound(err) {
				found = append(found, key.Name)
			}
		}
		return found
	}
	if w := written(); len(w) != 0 {
		t.Errorf("written while waiting: %v", w)
	}
	tokens := &corev1.SecretList{}
	if err := c.List(ctx, tokens, client.InNamespace("kube-system")); err != nil || len(tokens.Items) != 0 {
		t.Errorf("bootstrap tokens issued while waiting: %d %v", len(tokens.Items), err)
	}

	// Should the takeover not come within the patience, the MachineDeployment renders after all.
	r.TakeoverPatience = time.Nanosecond
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if w := written(); len(w) != 3 {
		t.Errorf("past the patience, rendered only %v", w)
	}
}
