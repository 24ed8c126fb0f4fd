package osc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/controllers/internal/failure"
	"github.com/osmhq/osm/host/extension"
)

// loadExtensions finds the extensions that apply to the MachineDeployment's profile and folds them, and the
// digests of the plugins of the profile's pipeline and of the extensions, into the render hash: a created,
// changed or deleted extension re-renders exactly the machines it applies to. A profile without extensions or
// pipeline keeps the hash it had before extensions existed, so upgrading OSM re-renders nothing.
func (r *Reconciler) loadExtensions(ctx context.Context, st *state) error {
	list := &osmv1alpha1.OperatingSystemProfileExtensionList{}
	if err := r.Mgmt.List(ctx, list, ctrl.InNamespace(st.osp.Namespace)); err != nil {
		return fmt.Errorf("listing OperatingSystemProfileExtensions in %s: %w", st.osp.Namespace, err)
	}
	provider := ""
	if pc, err := st.md.ProviderConfig(); err == nil {
		provider = pc.CloudProvider
	}
	xs, err := extension.For(st.osp, provider, list.Items)
	if err != nil {
		return failure.Stalled(osmv1alpha1.ReasonExtensionInvalid, err)
	}
	st.extensions = xs
	if len(xs) == 0 && len(st.osp.Spec.Plugins) == 0 {
		return nil
	}
	type applied struct {
		UID        types.UID
		Generation int64
		Digests    []string
	}
	in := struct {
		Base       string
		Pipeline   []string
		Extensions []applied
	}{Base: st.hash}
	for i := range st.osp.Spec.Plugins {
		in.Pipeline = append(in.Pipeline, r.pluginDigest(ctx, st.osp.Namespace, &st.osp.Spec.Plugins[i]))
	}
	for _, x := range xs {
		a := applied{UID: x.UID, Generation: x.Generation}
		for i := range x.Spec.Plugins {
			a.Digests = append(a.Digests, r.pluginDigest(ctx, x.Namespace, &x.Spec.Plugins[i]))
		}
		in.Extensions = append(in.Extensions, a)
	}
	st.pipelineDigests, st.extensionInputs = in.Pipeline, in.Extensions
	data, _ := json.Marshal(in)
	sum := sha256.Sum256(data)
	st.hash = hex.EncodeToString(sum[:16])
	return nil
}

// machinesOfExtension enqueues the MachineDeployments of every profile an extension selects, before or after a
// change, so that a selector that stops matching re-renders the machines it leaves as well.
func (r *Reconciler) machinesOfExtension(mgmt ctrl.Reader, worker ctrl.Reader) handler.EventHandler {
	enqueue := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], xs ...*osmv1alpha1.OperatingSystemProfileExtension) {
		profiles := &osmv1alpha1.OperatingSystemProfileList{}
		if err := mgmt.List(ctx, profiles, ctrl.InNamespace(xs[0].Namespace)); err != nil {
			return
		}
		for i := range profiles.Items {
			osp := &profiles.Items[i]
			for _, x := range xs {
				if ok, _ := extension.SelectsProfile(x.Spec.Selector, osp); ok {
					for _, req := range r.machinesOfProfile(worker)(ctx, osp) {
						q.Add(req)
					}
					break
				}
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, e.Object.(*osmv1alpha1.OperatingSystemProfileExtension))
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if e.ObjectOld.GetGeneration() == e.ObjectNew.GetGeneration() && e.ObjectOld.GetDeletionTimestamp().Equal(e.ObjectNew.GetDeletionTimestamp()) {
				return // a status update
			}
			enqueue(ctx, q, e.ObjectOld.(*osmv1alpha1.OperatingSystemProfileExtension), e.ObjectNew.(*osmv1alpha1.OperatingSystemProfileExtension))
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if x, ok := e.Object.(*osmv1alpha1.OperatingSystemProfileExtension); ok {
				enqueue(ctx, q, x)
			}
		},
	}
}
