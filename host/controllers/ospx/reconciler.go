// Package ospx is the OperatingSystemProfileExtension controller: it reports in each extension's status which
// profiles it applies to and whether they render with it.
package ospx

import (
	"context"
	"slices"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/extension"
	"github.com/osmhq/osm/host/validation"
)

// Reconciler reconciles OperatingSystemProfileExtensions.
type Reconciler struct {
	Client    client.Client
	Validator *validation.ExtensionValidator
}

// Reconcile lists the profiles the extension selects and trial-renders them with it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	x := &osmv1alpha1.OperatingSystemProfileExtension{}
	if err := r.Client.Get(ctx, req.NamespacedName, x); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !x.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	profiles := &osmv1alpha1.OperatingSystemProfileList{}
	if err := r.Client.List(ctx, profiles, client.InNamespace(x.Namespace)); err != nil {
		return ctrl.Result{}, err
	}
	others := &osmv1alpha1.OperatingSystemProfileExtensionList{}
	if err := r.Client.List(ctx, others, client.InNamespace(x.Namespace)); err != nil {
		return ctrl.Result{}, err
	}
	before := x.Status.DeepCopy()
	x.Status.Profiles = nil
	for i := range profiles.Items {
		if ok, _ := extension.SelectsProfile(x.Spec.Selector, &profiles.Items[i]); ok {
			x.Status.Profiles = append(x.Status.Profiles, profiles.Items[i].Name)
		}
	}
	slices.Sort(x.Status.Profiles)
	cond := metav1.Condition{Type: osmv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: osmv1alpha1.ReasonSucceeded,
		Message: "renders with every profile it selects", ObservedGeneration: x.Generation}
	if errs := r.Validator.Validate(ctx, x, profiles.Items, others.Items); len(errs) > 0 {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, osmv1alpha1.ReasonExtensionInvalid, errs.ToAggregate().Error()
		for _, e := range errs {
			if strings.HasSuffix(e.Field, ".overrides") {
				cond.Reason = osmv1alpha1.ReasonExtensionConflict // the validator reports conflicts on the overrides field
			}
		}
	}
	meta.SetStatusCondition(&x.Status.Conditions, cond)
	x.Status.ObservedGeneration = x.Generation
	if apiequality.Semantic.DeepEqual(before, &x.Status) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, client.IgnoreNotFound(r.Client.Status().Update(ctx, x))
}

// SetupWithManager registers the controller: an extension is re-checked when it changes, and every extension
// of a namespace when one of its profiles or extensions changes (a new profile may be selected; another
// extension may now conflict).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("operatingsystemprofileextension").
		For(&osmv1alpha1.OperatingSystemProfileExtension{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&osmv1alpha1.OperatingSystemProfile{}, handler.EnqueueRequestsFromMapFunc(r.extensionsOfNamespace),
			builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		Watches(&osmv1alpha1.OperatingSystemProfileExtension{}, handler.EnqueueRequestsFromMapFunc(r.extensionsOfNamespace),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

func (r *Reconciler) extensionsOfNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	list := &osmv1alpha1.OperatingSystemProfileExtensionList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, x := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: x.Namespace, Name: x.Name}})
	}
	return reqs
}
