package osc_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/render"
)

// statusReads counts the reads of whole OSCs, the reads past the metadata-only cache.
type statusReads struct {
	client.Reader
	n int
}

func (s *statusReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*osmv1alpha1.OperatingSystemConfig); ok {
		s.n++
	}
	return s.Reader.Get(ctx, key, obj, opts...)
}

// TestOSCReadinessFromMetadata checks, against a real API server, what the reconciler relies on to keep OSCs
// out of its cache: an OSC still as it was created says Ready through its metadata alone, and a status write
// bumps the generation, after which the reconciler reads the status and corrects it.
func TestOSCReadinessFromMetadata(t *testing.T) {
	ctx, c, _, r, md := finalizerFixture(t, "osp-template")
	reads := &statusReads{Reader: c}
	r.MgmtAPIReader = reads
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(md)}
	key := client.ObjectKey{Namespace: "osm", Name: render.OSCName(md)}
	get := func() *osmv1alpha1.OperatingSystemConfig {
		t.Helper()
		o := &osmv1alpha1.OperatingSystemConfig{}
		if err := c.Get(ctx, key, o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	for range 2 {
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	created := get()
	if created.Generation != 1 {
		t.Fatalf("a rendered OSC has generation %d after a reconcile that found it current, want 1", created.Generation)
	}
	if reads.n != 0 {
		t.Errorf("%d whole OSCs read for a MachineDeployment whose OSC is as it was created", reads.n)
	}

	// A failure reported on the OSC (as report does for a failed Secret write).
	failed := created.DeepCopy()
	meta.SetStatusCondition(&failed.Status.Conditions, metav1.Condition{Type: osmv1alpha1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: osmv1alpha1.ReasonWriteFailed, Message: "writing the bootstrap Secret: the server is unavailable"})
	if err := c.Patch(ctx, failed, client.MergeFrom(created)); err != nil {
		t.Fatal(err)
	}
	if g := get().Generation; g != 2 {
		t.Fatalf("a status write left the generation at %d: the reconciler could not tell the OSC is no longer as created", g)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if reads.n != 1 {
		t.Errorf("%d whole OSCs read after a status write, want 1", reads.n)
	}
	after := get()
	if after.UID != created.UID {
		t.Error("the OSC was replaced; its status only needed correcting")
	}
	if ready := meta.FindStatusCondition(after.Status.Conditions, osmv1alpha1.ConditionReady); ready == nil || ready.Status != metav1.ConditionTrue {
		t.Errorf("Ready condition after the next reconcile: %+v", ready)
	}
}
