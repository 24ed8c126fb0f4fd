package osc

import (
	"context"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// FirstOfProfilePriority is the work queue priority of the first MachineDeployment a changed profile enqueues
// (controller-runtime's default is 0, an unchanged object's handler.LowPriority).
//
// That MachineDeployment's render loads the profile's plugin; the output memo answers the others of the
// profile from it, without a plugin. Profiles arrive together (the default profiles at a first start,
// upstream OSM's as they are taken over), each enqueuing all its MachineDeployments; in queue order, each
// profile's plugin was loaded only when the queue reached it, the last one while the controller's caches
// were at their largest (at 500 MachineDeployments over five OSes the process tree peaked then, with the
// last plugin's host beside a full controller). First in the queue, each profile renders at once: the
// built-in plugins load one after another at start (Config.MaxBuiltinModules in package pluginhost), and a
// profile's failure shows on its first MachineDeployment without waiting behind every other profile's.
//
// Only profiles of the controller's own namespace get it: the default profiles and the operator's, which the
// API server's RBAC keeps tenants from writing. The queue serves a higher priority strictly first, so a tenant
// who edited its profiles in a loop would otherwise keep one MachineDeployment per profile ahead of every
// other tenant's work (TestATenantsProfileEditsDoNotJumpTheQueue).
const FirstOfProfilePriority = 1

// profileMachines enqueues the MachineDeployments of a profile that changed, the first of them at
// FirstOfProfilePriority when the profile is in the controller's namespace. An object from the initial list or
// a resync enqueues them at handler.LowPriority, as controller-runtime's own handlers do.
func (r *Reconciler) profileMachines(c client.Reader) handler.EventHandler {
	machines := r.machinesOfProfile(c)
	enqueue := func(ctx context.Context, o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request], unchanged bool) {
		reqs := machines(ctx, o)
		pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
		if !ok || len(reqs) == 0 {
			for _, req := range reqs {
				q.Add(req)
			}
			return
		}
		if unchanged {
			pq.AddWithOpts(priorityqueue.AddOpts{Priority: new(handler.LowPriority)}, reqs...)
			return
		}
		if o.GetNamespace() != r.Settings.Namespace {
			pq.AddWithOpts(priorityqueue.AddOpts{}, reqs...)
			return
		}
		pq.AddWithOpts(priorityqueue.AddOpts{Priority: new(FirstOfProfilePriority)}, reqs[0])
		pq.AddWithOpts(priorityqueue.AddOpts{}, reqs[1:]...)
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q, e.IsInInitialList)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			// A profile's MachineDeployments are found by its namespace and name, which an update keeps.
			enqueue(ctx, e.ObjectNew, q, e.ObjectOld.GetResourceVersion() == e.ObjectNew.GetResourceVersion())
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q, false)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q, false)
		},
	}
}
