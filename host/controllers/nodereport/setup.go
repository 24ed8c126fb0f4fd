package nodereport

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/controllers/osc"
	"github.com/osmhq/osm/host/credentials"
)

// Resync is how often a MachineDeployment's reports are looked at without an event: it bounds how long the
// entry of a deleted machine outlives it where Machines are not watched.
const Resync = 5 * time.Minute

// Reconcile is reconcile.Reconciler over MachineDeployments.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if err := r.reconcile(ctx, req.NamespacedName); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: Resync}, nil
}

// Served reports whether the worker cluster serves OperatingSystemNodeReports; the controller runs only if it
// does (a worker cluster that lacks the CRD gets no reports, and the controller still starts).
func Served(worker cluster.Cluster) bool {
	_, err := worker.GetRESTMapper().RESTMapping(osmv1alpha1.GroupVersion.WithKind("OperatingSystemNodeReport").GroupKind(), osmv1alpha1.GroupVersion.Version)
	return err == nil
}

// SetupWithManager registers the controller: a report's change, an OSC's creation (a new render replaces the
// OSC, whose status.nodes is then written again) and a Machine's deletion bring the MachineDeployment here.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, worker cluster.Cluster, reg prometheus.Registerer) error {
	r.NewMetrics(reg)
	b := ctrl.NewControllerManagedBy(mgr).
		Named("nodereport").
		WatchesRawSource(source.Kind(worker.GetCache(), &osmv1alpha1.OperatingSystemNodeReport{},
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, o *osmv1alpha1.OperatingSystemNodeReport) []reconcile.Request {
				return ownerOf(o)
			}))).
		WatchesRawSource(source.Kind(mgr.GetCache(), client.Object(osc.OSCMeta()),
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request { return ownerOf(o) }),
			predicate.TypedFuncs[client.Object]{
				UpdateFunc: func(event.TypedUpdateEvent[client.Object]) bool { return false },
				DeleteFunc: func(event.TypedDeleteEvent[client.Object]) bool { return false },
			}))
	if machinesServed(worker) {
		m := &unstructured.Unstructured{}
		m.SetGroupVersionKind(machineList.GroupVersion().WithKind("Machine"))
		b = b.WatchesRawSource(source.Kind(worker.GetCache(), client.Object(m),
			handler.TypedEnqueueRequestsFromMapFunc(r.reportsInNamespace(worker.GetClient())),
			predicate.TypedFuncs[client.Object]{
				CreateFunc: func(event.TypedCreateEvent[client.Object]) bool { return false },
				UpdateFunc: func(event.TypedUpdateEvent[client.Object]) bool { return false },
			}))
	}
	return b.Complete(r)
}

func machinesServed(worker cluster.Cluster) bool {
	_, err := worker.GetRESTMapper().RESTMapping(machineList.GroupKind(), machineList.Version)
	return err == nil
}

// reportsInNamespace maps a deleted Machine to the MachineDeployments of its namespace that have reports.
func (r *Reconciler) reportsInNamespace(c client.Reader) handler.TypedMapFunc[client.Object, reconcile.Request] {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		list := &osmv1alpha1.OperatingSystemNodeReportList{}
		if err := c.List(ctx, list, client.InNamespace(r.Issuer.Namespace), client.MatchingLabels{credentials.LabelMDNamespace: o.GetNamespace()}); err != nil {
			return nil
		}
		var reqs []reconcile.Request
		for i := range list.Items {
			reqs = append(reqs, ownerOf(&list.Items[i])...)
		}
		return reqs
	}
}

func ownerOf(o client.Object) []reconcile.Request {
	ns, name, ok := cutOwner(credentials.Owner(o))
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

func cutOwner(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return s[:i], s[i+1:], i > 0 && i < len(s)-1
		}
	}
	return "", "", false
}
