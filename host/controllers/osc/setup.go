package osc

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/credentials"
	"github.com/osmhq/osm/host/render"
)

// IndexProfile indexes MachineDeployments by the "<namespace>/<name>" of the profile they name, so a profile
// change finds its MachineDeployments without listing all of them.
const IndexProfile = "osm.k8c.io/profile"

// IndexUserDataSecret indexes MachineDeployments by the names of their user-data Secrets. Those names can be
// shared (c/a-b and b-c/a); when one owner's Secret is deleted, the others waiting for the name are found here.
const IndexUserDataSecret = "osm.k8c.io/user-data-secret"

// profileIndex is the IndexProfile value of a MachineDeployment: its profile's "<namespace>/<name>".
func (r *Reconciler) profileIndex(o client.Object) []string {
	md := o.(*clusterv1alpha1.MachineDeployment)
	if md.Annotations[clusterv1alpha1.AnnotationOSP] == "" {
		return nil
	}
	k := r.profileKey(md)
	return []string{k.Namespace + "/" + k.Name}
}

// SetupWithManager registers the controller. mgr is the management cluster (profiles, OSCs); worker is the
// cluster of MachineDeployments and Secrets, which may be mgr itself.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, worker cluster.Cluster, workers int, reg prometheus.Registerer) error {
	r.settingsHash = SettingsHash(r.Settings)
	r.metrics = newMetrics(reg)
	if err := worker.GetFieldIndexer().IndexField(ctx, &clusterv1alpha1.MachineDeployment{}, IndexProfile, r.profileIndex); err != nil {
		return fmt.Errorf("indexing MachineDeployments by profile: %w", err)
	}

	if err := worker.GetFieldIndexer().IndexField(ctx, &clusterv1alpha1.MachineDeployment{}, IndexUserDataSecret, func(o client.Object) []string {
		md := o.(*clusterv1alpha1.MachineDeployment)
		return []string{render.BootstrapSecretName(md), render.ProvisioningSecretName(md)}
	}); err != nil {
		return fmt.Errorf("indexing MachineDeployments by user-data Secret: %w", err)
	}

	if err := r.watchDeletions(ctx, mgr.GetCache(), worker.GetCache()); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("operatingsystemconfig").
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		WatchesRawSource(source.Kind(worker.GetCache(), &clusterv1alpha1.MachineDeployment{},
			&handler.TypedEnqueueRequestForObject[*clusterv1alpha1.MachineDeployment]{},
			predicate.TypedFuncs[*clusterv1alpha1.MachineDeployment]{
				CreateFunc: func(e event.TypedCreateEvent[*clusterv1alpha1.MachineDeployment]) bool { return managed(e.Object) },
				UpdateFunc: func(e event.TypedUpdateEvent[*clusterv1alpha1.MachineDeployment]) bool {
					return (managed(e.ObjectNew) || managed(e.ObjectOld)) && renderRelevant(e.ObjectOld, e.ObjectNew)
				},
				DeleteFunc:  func(e event.TypedDeleteEvent[*clusterv1alpha1.MachineDeployment]) bool { return false },
				GenericFunc: func(e event.TypedGenericEvent[*clusterv1alpha1.MachineDeployment]) bool { return true },
			})).
		Watches(&osmv1alpha1.OperatingSystemProfile{}, r.profileMachines(worker.GetClient()),
			builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, pluginDigestChanged()))).
		Watches(&osmv1alpha1.OperatingSystemProfileExtension{}, r.machinesOfExtension(mgr.GetClient(), worker.GetClient())).
		Watches(OSCMeta(), handler.EnqueueRequestsFromMapFunc(owner), builder.WithPredicates(deletedOrRenderHashChanged())).
		WatchesRawSource(source.Kind(worker.GetCache(), &corev1.Secret{},
			r.secretHandler(worker.GetClient()),
			predicate.TypedFuncs[*corev1.Secret]{
				CreateFunc: func(event.TypedCreateEvent[*corev1.Secret]) bool { return false },
				UpdateFunc: func(e event.TypedUpdateEvent[*corev1.Secret]) bool {
					return e.ObjectNew.GetNamespace() == r.Settings.CloudInitSettingsNamespace && !maps.EqualFunc(e.ObjectOld.Data, e.ObjectNew.Data, bytes.Equal)
				},
				DeleteFunc: func(e event.TypedDeleteEvent[*corev1.Secret]) bool {
					return e.Object.GetNamespace() == r.Settings.CloudInitSettingsNamespace || isBootstrapToken(e.Object)
				},
			})).
		WatchesRawSource(readerDeletions(worker, credentials.ReaderRoleMeta())).
		WatchesRawSource(readerDeletions(worker, credentials.ReaderBindingMeta())).
		Complete(r)
}

// readerDeletions enqueues the MachineDeployment whose reader Role or RoleBinding (obj's kind) was deleted, so
// that issueCredentials puts it back at once.
func readerDeletions(worker cluster.Cluster, obj *metav1.PartialObjectMetadata) source.Source {
	return source.Kind(worker.GetCache(), obj,
		handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, o *metav1.PartialObjectMetadata) []reconcile.Request {
			return owner(ctx, o)
		}),
		predicate.TypedFuncs[*metav1.PartialObjectMetadata]{
			CreateFunc: func(event.TypedCreateEvent[*metav1.PartialObjectMetadata]) bool { return false },
			UpdateFunc: func(event.TypedUpdateEvent[*metav1.PartialObjectMetadata]) bool { return false },
			DeleteFunc: func(event.TypedDeleteEvent[*metav1.PartialObjectMetadata]) bool { return true },
		})
}

// managed reports whether OSM owes md anything: it names a profile, or carries the finalizer of what OSM wrote
// for it.
func managed(md *clusterv1alpha1.MachineDeployment) bool {
	_, named := md.Annotations[clusterv1alpha1.AnnotationOSP]
	return named || slices.Contains(md.Finalizers, Finalizer)
}

// renderRelevant reports whether a MachineDeployment update can change what OSM renders or owes it: its spec
// (generation), its annotations (revision, profile, kubelet config) or its deletion. Our own finalizer patch
// and machine-controller's status updates are not, and reconciling on them would only repeat work.
func renderRelevant(oldMD, newMD *clusterv1alpha1.MachineDeployment) bool {
	return oldMD.Generation != newMD.Generation ||
		!maps.Equal(oldMD.Annotations, newMD.Annotations) ||
		!oldMD.DeletionTimestamp.Equal(newMD.DeletionTimestamp)
}

// machinesOfProfile maps a profile to the MachineDeployments that name it.
func (r *Reconciler) machinesOfProfile(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		list := &clusterv1alpha1.MachineDeploymentList{}
		if err := c.List(ctx, list, client.MatchingFields{IndexProfile: o.GetNamespace() + "/" + o.GetName()}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing MachineDeployments of a profile", "profile", o.GetNamespace()+"/"+o.GetName())
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for _, md := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: md.Namespace, Name: md.Name}})
		}
		return reqs
	}
}

// secretHandler enqueues a user-data Secret's owner when the Secret changes or goes away. When it goes away it
// also enqueues every MachineDeployment whose Secret has that name: one that was refused the name
// (SecretNameConflict) takes it over now instead of at its next retry.
func (r *Reconciler) secretHandler(c client.Reader) handler.TypedEventHandler[*corev1.Secret, reconcile.Request] {
	add := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], reqs []reconcile.Request) {
		for _, req := range reqs {
			q.Add(req)
		}
	}
	return handler.TypedFuncs[*corev1.Secret, reconcile.Request]{
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[*corev1.Secret], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, owner(ctx, e.ObjectNew))
		},
		DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[*corev1.Secret], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, owner(ctx, e.Object))
			if isBootstrapToken(e.Object) {
				return
			}
			list := &clusterv1alpha1.MachineDeploymentList{}
			if err := c.List(ctx, list, client.MatchingFields{IndexUserDataSecret: e.Object.Name}); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "listing the MachineDeployments of a Secret name", "secret", e.Object.Name)
				return
			}
			for _, md := range list.Items {
				q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: md.Namespace, Name: md.Name}})
			}
		},
	}
}

// isBootstrapToken reports whether s is one of OSM's bootstrap tokens (the Secret cache only holds OSM's own in
// kube-system). Deleting one is how an operator revokes a node credential; its MachineDeployment is reconciled
// at once so that new machines get a working token now rather than at the next refresh.
func isBootstrapToken(s *corev1.Secret) bool {
	return s.Type == corev1.SecretTypeBootstrapToken && credentials.Owner(s) != ""
}

// owner maps an object OSM created to its MachineDeployment through its ownership annotation.
func owner(_ context.Context, o client.Object) []reconcile.Request {
	ns, name, ok := strings.Cut(credentials.Owner(o), "/")
	if !ok || ns == "" || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

func pluginDigestChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		oldP, newP := e.ObjectOld.(*osmv1alpha1.OperatingSystemProfile).Status.Plugin, e.ObjectNew.(*osmv1alpha1.OperatingSystemProfile).Status.Plugin
		return (oldP == nil) != (newP == nil) || (oldP != nil && oldP.Digest != newP.Digest)
	}}
}

// OSCMeta is how the controller caches and watches OSCs: metadata only. A reconcile decides from an OSC's
// owner, render hash and generation (see oscReady); the rendered spec, 20–40 KiB, is what it wrote itself and
// never reads back. Decoding whole OSCs from the watch was a tenth of the controller's CPU at 500 new
// MachineDeployments, and serving them a share of the API server's.
func OSCMeta() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: osmv1alpha1.GroupVersion.String(), Kind: "OperatingSystemConfig"}}
}

// deletedOrRenderHashChanged passes an OSC's deletion and a change of its render hash. Not its generation: an
// OSC has no status subresource, so every status write bumps it.
func deletedOrRenderHashChanged() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetAnnotations()[AnnotationRenderHash] != e.ObjectNew.GetAnnotations()[AnnotationRenderHash]
		},
		DeleteFunc: func(event.DeleteEvent) bool { return true },
	}
}
