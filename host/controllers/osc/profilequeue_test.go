package osc

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/scheme"
)

// TestAChangedProfilesFirstMachineDeploymentGoesFirst: when two profiles change one after the other, the first
// MachineDeployment of each comes out of the queue before the others of either; profiles from the initial
// list enqueue theirs behind everything else.
func TestAChangedProfilesFirstMachineDeploymentGoesFirst(t *testing.T) {
	r := &Reconciler{}
	r.Settings.Namespace = "kube-system"
	var objs []client.Object
	for i := range 6 {
		objs = append(objs, &clusterv1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: fmt.Sprintf("md-%d", i),
			Annotations: map[string]string{clusterv1alpha1.AnnotationOSP: []string{"osp-a", "osp-b"}[i%2]}}})
	}
	c := indexedByProfile(r, objs)
	profile := func(name string) *osmv1alpha1.OperatingSystemProfile {
		return &osmv1alpha1.OperatingSystemProfile{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, ResourceVersion: "1"}}
	}
	h := r.profileMachines(c)
	ctx := context.Background()

	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	h.Create(ctx, event.CreateEvent{Object: profile("osp-a")}, q)
	h.Create(ctx, event.CreateEvent{Object: profile("osp-b")}, q)
	firstTwo := map[string]bool{}
	for range 2 {
		req, _, _ := q.GetWithPriority()
		firstTwo[req.Name] = true
	}
	byProfile := map[string]int{}
	for name := range firstTwo {
		byProfile[profileOf(objs, name)]++
	}
	if byProfile["osp-a"] != 1 || byProfile["osp-b"] != 1 {
		t.Errorf("first out of the queue: %v (by profile %v), want one of osp-a and one of osp-b", firstTwo, byProfile)
	}
	for q.Len() > 0 {
		_, prio, _ := q.GetWithPriority()
		if prio != 0 {
			t.Errorf("a later MachineDeployment has priority %d, want the default 0", prio)
		}
	}

	initial := priorityqueue.New[reconcile.Request]("initial")
	defer initial.ShutDown()
	h.Create(ctx, event.CreateEvent{Object: profile("osp-a"), IsInInitialList: true}, initial)
	for initial.Len() > 0 {
		if _, prio, _ := initial.GetWithPriority(); prio >= 0 {
			t.Errorf("a MachineDeployment of a profile from the initial list has priority %d, want a low one", prio)
		}
	}
}

// indexedByProfile is a fake client of objs with the index the controller's handlers list by.
func indexedByProfile(r *Reconciler, objs []client.Object) client.Reader {
	return fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).
		WithIndex(&clusterv1alpha1.MachineDeployment{}, IndexProfile, r.profileIndex).Build()
}

func profileOf(objs []client.Object, name string) string {
	for _, o := range objs {
		if o.GetName() == name {
			return o.GetAnnotations()[clusterv1alpha1.AnnotationOSP]
		}
	}
	return ""
}

// TestATenantsProfileEditsDoNotJumpTheQueue: a profile of a tenant's namespace, edited again and again, puts
// none of its MachineDeployments ahead of the queue, which serves higher priorities strictly first; another
// tenant's MachineDeployment queued before the edits comes out first.
func TestATenantsProfileEditsDoNotJumpTheQueue(t *testing.T) {
	r := &Reconciler{}
	r.Settings.Namespace = "kube-system"
	var objs []client.Object
	for i := range 3 {
		objs = append(objs, &clusterv1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: fmt.Sprintf("a-%d", i),
			Annotations: map[string]string{clusterv1alpha1.AnnotationOSP: "osp-a", clusterv1alpha1.AnnotationOSPNamespace: "tenant-a"}}})
	}
	c := indexedByProfile(r, objs)
	h := r.profileMachines(c)
	ctx := context.Background()
	q := priorityqueue.New[reconcile.Request]("tenant")
	defer q.ShutDown()
	other := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "tenant-b", Name: "b-0"}}
	q.Add(other)
	for v := range 20 {
		old := &osmv1alpha1.OperatingSystemProfile{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "osp-a", ResourceVersion: fmt.Sprint(v + 1)}}
		edited := old.DeepCopy()
		edited.ResourceVersion = fmt.Sprint(v + 2)
		h.Update(ctx, event.UpdateEvent{ObjectOld: old, ObjectNew: edited}, q)
	}
	if q.Len() != 4 {
		t.Fatalf("queue holds %d requests, want 4 (three of tenant-a, one of tenant-b)", q.Len())
	}
	if first, prio, _ := q.GetWithPriority(); first != other {
		t.Errorf("first out of the queue: %v at priority %d, want %v, queued before the edits", first, prio, other)
	}
	for q.Len() > 0 {
		if req, prio, _ := q.GetWithPriority(); prio != 0 {
			t.Errorf("%v has priority %d, want the default 0", req, prio)
		}
	}
}
