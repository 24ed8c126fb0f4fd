// Package rollout acts on drift (docs/drift.md): under the rollout policy it has machine-controller replace a
// drifted MachineDeployment's machines, at most MaxConcurrent MachineDeployments at a time and only inside the
// maintenance window. It triggers machine-controller's own rolling update by changing the MachineDeployment's
// template (annotation osm.k8c.io/rollout in spec.template.metadata): machine-controller creates a new
// MachineSet and revision and replaces machines by the MachineDeployment's maxSurge and maxUnavailable.
package rollout

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
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
	"github.com/osmhq/osm/host/controllers/osc"
	"github.com/osmhq/osm/host/credentials"
	"github.com/osmhq/osm/host/render"
)

const (
	// AnnotationPolicy on a MachineDeployment, or else on its profile, is "manual" (the default: drift is
	// reported, nothing else) or "rollout".
	AnnotationPolicy = "osm.k8c.io/rollout-policy"
	// AnnotationWindow on a MachineDeployment, or else on its profile, overrides -rollout-window (see Window).
	AnnotationWindow = "osm.k8c.io/rollout-window"
	// AnnotationRollout in a MachineDeployment's spec.template.metadata is what OSM changes to start a
	// rollout: "<configuration digest>@<revision replaced>".
	AnnotationRollout = "osm.k8c.io/rollout"

	PolicyManual  = "manual"
	PolicyRollout = "rollout"
)

// Reconciler decides, per MachineDeployment, whether to start a rollout. It runs with one worker, so
// that the budget is counted by one decision at a time.
type Reconciler struct {
	// Worker reads and patches MachineDeployments (cache).
	Worker client.Client
	// Mgmt reads profiles and OSC metadata (cache) and patches OSC status.
	Mgmt client.Client
	// MgmtAPIReader reads OSC status, which the cache does not hold.
	MgmtAPIReader client.Reader
	// Namespace is where OSCs and, by default, profiles are (-namespace).
	Namespace string
	// MaxConcurrent is how many MachineDeployments OSM rolls at once (-rollout-max-concurrent; 1 when zero).
	MaxConcurrent int
	// Window is the default maintenance window (-rollout-window); nil is always open.
	Window   *Window
	Recorder record.EventRecorder
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	mu sync.Mutex
	// started are the template annotations OSM wrote, until the cache shows them.
	started map[types.UID]string
	// inflight are the MachineDeployments seen rolling, to report when they finish.
	inflight map[types.NamespacedName]bool
	// queued are the MachineDeployments waiting for the budget, with since when.
	queued map[types.NamespacedName]time.Time
	// reported is the RollingOut reason last written on an OSC (by UID).
	reported map[types.UID]string
	wake     chan event.TypedGenericEvent[*clusterv1alpha1.MachineDeployment]
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// SetupWithManager registers the controller and its metrics.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, worker cluster.Cluster, reg prometheus.Registerer) error {
	if r.MaxConcurrent <= 0 {
		r.MaxConcurrent = 1
	}
	r.started, r.inflight, r.queued, r.reported = map[types.UID]string{}, map[types.NamespacedName]bool{}, map[types.NamespacedName]time.Time{}, map[types.UID]string{}
	r.wake = make(chan event.TypedGenericEvent[*clusterv1alpha1.MachineDeployment], 1024)
	if reg != nil {
		r.registerMetrics(reg)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("rollout").
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		WatchesRawSource(source.Kind(worker.GetCache(), &clusterv1alpha1.MachineDeployment{},
			&handler.TypedEnqueueRequestForObject[*clusterv1alpha1.MachineDeployment]{},
			predicate.TypedFuncs[*clusterv1alpha1.MachineDeployment]{
				UpdateFunc: func(e event.TypedUpdateEvent[*clusterv1alpha1.MachineDeployment]) bool {
					o, n := e.ObjectOld, e.ObjectNew
					return o.Generation != n.Generation || o.Status != n.Status || o.Annotations[AnnotationPolicy] != n.Annotations[AnnotationPolicy] ||
						o.Annotations[AnnotationWindow] != n.Annotations[AnnotationWindow] ||
						o.Annotations[clusterv1alpha1.AnnotationRevision] != n.Annotations[clusterv1alpha1.AnnotationRevision]
				},
			})).
		WatchesRawSource(source.Channel(r.wake, &handler.TypedEnqueueRequestForObject[*clusterv1alpha1.MachineDeployment]{})).
		Watches(osc.OSCMeta(), handler.EnqueueRequestsFromMapFunc(ownerOf), builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				o, n := e.ObjectOld.GetAnnotations(), e.ObjectNew.GetAnnotations()
				return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() || o[osc.AnnotationDriftedSince] != n[osc.AnnotationDriftedSince] ||
					o[osc.AnnotationRenderHash] != n[osc.AnnotationRenderHash]
			},
		})).
		Watches(&osmv1alpha1.OperatingSystemProfile{}, handler.EnqueueRequestsFromMapFunc(r.machinesOfProfile(worker.GetClient())),
			builder.WithPredicates(predicate.AnnotationChangedPredicate{})).
		Complete(r)
}

func ownerOf(_ context.Context, o client.Object) []reconcile.Request {
	ns, name, ok := strings.Cut(credentials.Owner(o), "/")
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

func (r *Reconciler) machinesOfProfile(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		list := &clusterv1alpha1.MachineDeploymentList{}
		if err := c.List(ctx, list, client.MatchingFields{osc.IndexProfile: o.GetNamespace() + "/" + o.GetName()}); err != nil {
			return nil
		}
		var reqs []reconcile.Request
		for _, md := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: md.Namespace, Name: md.Name}})
		}
		return reqs
	}
}

// Finished reports whether machine-controller completed the MachineDeployment's rollout, as its own
// MachineDeploymentComplete says: every replica updated and available, the latest generation observed.
func Finished(md *clusterv1alpha1.MachineDeployment) bool {
	want := int32(1)
	if md.Spec.Replicas != nil {
		want = *md.Spec.Replicas
	}
	s := md.Status
	return s.ObservedGeneration >= md.Generation && s.UpdatedReplicas == want && s.Replicas == want && s.AvailableReplicas == want
}

// rolling reports whether a rollout OSM started on md is under way (r.mu held).
func (r *Reconciler) rolling(md *clusterv1alpha1.MachineDeployment) bool {
	have := md.Spec.Template.Annotations[AnnotationRollout]
	if want, ok := r.started[md.UID]; ok {
		if have != want {
			return true // written moments ago; the cache has not caught up
		}
		delete(r.started, md.UID)
	}
	return have != "" && !Finished(md)
}

// Reconcile decides about one MachineDeployment.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logr.FromContextOrDiscard(ctx)
	md := &clusterv1alpha1.MachineDeployment{}
	if err := r.Worker.Get(ctx, req.NamespacedName, md); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !md.DeletionTimestamp.IsZero() || md.Annotations[clusterv1alpha1.AnnotationOSP] == "" {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	cfg := r.oscMeta(ctx, md)

	r.mu.Lock()
	rolling := r.rolling(md)
	wasInflight := r.inflight[req.NamespacedName]
	if rolling {
		r.inflight[req.NamespacedName] = true
	} else {
		delete(r.inflight, req.NamespacedName)
	}
	r.mu.Unlock()

	if rolling {
		r.dequeue(req.NamespacedName)
		return ctrl.Result{}, r.setCondition(ctx, cfg, metav1.ConditionTrue, osmv1alpha1.ReasonRolloutInProgress,
			"machine-controller replaces the machines (template annotation "+AnnotationRollout+"="+md.Spec.Template.Annotations[AnnotationRollout]+")")
	}
	if wasInflight {
		r.Recorder.Event(md, corev1.EventTypeNormal, osmv1alpha1.ReasonRolloutFinished, "every replica runs the current configuration")
		r.wakeQueued()
		if err := r.setCondition(ctx, cfg, metav1.ConditionFalse, osmv1alpha1.ReasonRolloutFinished, "every replica is updated and available"); err != nil {
			return ctrl.Result{}, err
		}
	}

	// Drifted: the OSC rendered for the MachineDeployment's current revision records drift.
	if cfg == nil || cfg.Annotations[osc.AnnotationRenderHash] == "" || cfg.Annotations[osc.AnnotationRevision] != md.Annotations[clusterv1alpha1.AnnotationRevision] ||
		cfg.Annotations[osc.AnnotationDriftedSince] == "" {
		r.dequeue(req.NamespacedName) // not drifted (any more): a change that flipped back does not roll
		return ctrl.Result{}, nil
	}
	since, _ := time.Parse(time.RFC3339, cfg.Annotations[osc.AnnotationDriftedSince])
	policy, window, err := r.policy(ctx, md)
	if err != nil {
		r.Recorder.Event(md, corev1.EventTypeWarning, "RolloutPolicyInvalid", err.Error())
		log.Info("rollout policy invalid", "error", err.Error())
		r.dequeue(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	if policy != PolicyRollout {
		r.dequeue(req.NamespacedName)
		return ctrl.Result{}, r.setConditionIfReported(ctx, cfg, metav1.ConditionFalse, osmv1alpha1.ReasonRolloutManual,
			"the rollout policy is manual: drift is reported, the machines are not replaced")
	}
	now := r.now()
	if !window.Open(now) {
		r.dequeue(req.NamespacedName)
		next := window.NextOpen(now)
		err := r.setCondition(ctx, cfg, metav1.ConditionFalse, osmv1alpha1.ReasonRolloutWindowClosed,
			fmt.Sprintf("the maintenance window %q opens at %s", window.String(), next.UTC().Format(time.RFC3339)))
		return ctrl.Result{RequeueAfter: next.Sub(now) + time.Second}, err
	}
	ready, err := r.renderReady(ctx, cfg)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !ready {
		r.dequeue(req.NamespacedName)
		return ctrl.Result{}, r.setCondition(ctx, cfg, metav1.ConditionFalse, osmv1alpha1.ReasonRolloutRenderNotReady,
			"the current configuration did not render (see the Ready condition): a rollout never starts for a render that failed")
	}
	if n, first := r.budget(ctx, req.NamespacedName, since); n >= r.MaxConcurrent || !first {
		return ctrl.Result{RequeueAfter: time.Minute}, r.setCondition(ctx, cfg, metav1.ConditionFalse, osmv1alpha1.ReasonRolloutQueued,
			fmt.Sprintf("%d of -rollout-max-concurrent=%d rollouts under way; this one starts when one finishes", n, r.MaxConcurrent))
	}
	return ctrl.Result{}, r.start(ctx, md, cfg)
}

// budget counts the rollouts under way and queues name; first says name is the longest waiting of the
// queued ones that may start now (the others wait for their turn).
func (r *Reconciler) budget(ctx context.Context, name types.NamespacedName, since time.Time) (n int, first bool) {
	list := &clusterv1alpha1.MachineDeploymentList{}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.queued[name]; !ok {
		r.queued[name] = since
	}
	if err := r.Worker.List(ctx, list); err != nil {
		return r.MaxConcurrent, false
	}
	for i := range list.Items {
		if r.rolling(&list.Items[i]) {
			n++
		}
	}
	free := r.MaxConcurrent - n
	ahead := 0
	for other, t := range r.queued {
		if other != name && (t.Before(r.queued[name]) || (t.Equal(r.queued[name]) && other.String() < name.String())) {
			ahead++
		}
	}
	return n, ahead < free
}

// start changes the MachineDeployment's template, which makes machine-controller roll it.
func (r *Reconciler) start(ctx context.Context, md *clusterv1alpha1.MachineDeployment, cfg *metav1.PartialObjectMetadata) error {
	value := cfg.Annotations[osc.AnnotationConfigDigest] + "@" + md.Annotations[clusterv1alpha1.AnnotationRevision]
	patched := md.DeepCopy()
	if patched.Spec.Template.Annotations == nil {
		patched.Spec.Template.Annotations = map[string]string{}
	}
	patched.Spec.Template.Annotations[AnnotationRollout] = value
	if err := r.Worker.Patch(ctx, patched, client.MergeFromWithOptions(md, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			return nil // the watch brings the newer MachineDeployment
		}
		return fmt.Errorf("starting the rollout of MachineDeployment %s: %w", client.ObjectKeyFromObject(md), err)
	}
	name := client.ObjectKeyFromObject(md)
	r.mu.Lock()
	r.started[md.UID] = value
	r.inflight[name] = true
	delete(r.queued, name)
	r.mu.Unlock()
	msg := fmt.Sprintf("rolling out configuration %s to the machines of revision %s (%s)", cfg.Annotations[osc.AnnotationConfigDigest],
		md.Annotations[clusterv1alpha1.AnnotationRevision], AnnotationRollout+"="+value)
	r.Recorder.Event(md, corev1.EventTypeNormal, "RolloutStarted", msg)
	logr.FromContextOrDiscard(ctx).Info("rollout started", "machinedeployment", name, "value", value)
	return r.setCondition(ctx, cfg, metav1.ConditionTrue, osmv1alpha1.ReasonRolloutInProgress, msg)
}

// policy is the MachineDeployment's rollout policy and window: its own annotations, else its profile's, else
// manual and -rollout-window.
func (r *Reconciler) policy(ctx context.Context, md *clusterv1alpha1.MachineDeployment) (string, *Window, error) {
	policy, window := md.Annotations[AnnotationPolicy], md.Annotations[AnnotationWindow]
	if policy == "" || window == "" {
		ns, name := render.ProfileKey(md, r.Namespace)
		profile := &osmv1alpha1.OperatingSystemProfile{}
		if err := r.Mgmt.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, profile); err == nil {
			if policy == "" {
				policy = profile.Annotations[AnnotationPolicy]
			}
			if window == "" {
				window = profile.Annotations[AnnotationWindow]
			}
		}
	}
	switch policy {
	case "", PolicyManual:
		policy = PolicyManual
	case PolicyRollout:
	default:
		return "", nil, fmt.Errorf("%s %q: want %s or %s", AnnotationPolicy, policy, PolicyManual, PolicyRollout)
	}
	if window == "" {
		return policy, r.Window, nil
	}
	w, err := ParseWindow(window)
	return policy, w, err
}

// oscMeta is the MachineDeployment's OSC as the cache has it (metadata only), or nil.
func (r *Reconciler) oscMeta(ctx context.Context, md *clusterv1alpha1.MachineDeployment) *metav1.PartialObjectMetadata {
	m := osc.OSCMeta()
	if err := r.Mgmt.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: render.OSCName(md)}, m); err != nil || !credentials.Owns(md, m) {
		return nil
	}
	return m
}

// renderReady reports whether the OSC's Ready condition is True: as osc.Reconciler tells it, an OSC of
// generation 1 with a render hash is as its render created it; any other's status is read.
func (r *Reconciler) renderReady(ctx context.Context, cfg *metav1.PartialObjectMetadata) (bool, error) {
	if cfg.Generation == 1 {
		return true, nil
	}
	live, err := r.readOSC(ctx, cfg)
	if err != nil || live == nil {
		return false, err
	}
	return meta.IsStatusConditionTrue(live.Status.Conditions, osmv1alpha1.ConditionReady), nil
}

func (r *Reconciler) readOSC(ctx context.Context, cfg *metav1.PartialObjectMetadata) (*osmv1alpha1.OperatingSystemConfig, error) {
	live := &osmv1alpha1.OperatingSystemConfig{}
	if err := r.MgmtAPIReader.Get(ctx, client.ObjectKeyFromObject(cfg), live); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if live.UID != cfg.UID {
		return nil, nil // replaced: the watch brings the new one
	}
	return live, nil
}

// setConditionIfReported writes the RollingOut condition only where OSM had written one before.
func (r *Reconciler) setConditionIfReported(ctx context.Context, cfg *metav1.PartialObjectMetadata, s metav1.ConditionStatus, reason, msg string) error {
	if cfg == nil {
		return nil
	}
	r.mu.Lock()
	_, known := r.reported[cfg.UID]
	r.mu.Unlock()
	if !known && cfg.Generation == 1 {
		return nil // as rendered: no RollingOut condition
	}
	return r.setCondition(ctx, cfg, s, reason, msg)
}

// setCondition writes the RollingOut condition on the OSC when it says something new. The OSC has no status
// subresource; the patch carries the resourceVersion it was computed from.
func (r *Reconciler) setCondition(ctx context.Context, cfg *metav1.PartialObjectMetadata, s metav1.ConditionStatus, reason, msg string) error {
	if cfg == nil {
		return nil
	}
	r.mu.Lock()
	last := r.reported[cfg.UID]
	r.mu.Unlock()
	if last == reason {
		return nil
	}
	live, err := r.readOSC(ctx, cfg)
	if err != nil || live == nil {
		return err
	}
	if c := meta.FindStatusCondition(live.Status.Conditions, osmv1alpha1.ConditionRollingOut); c != nil && c.Reason == reason && c.Status == s {
		r.noteReported(cfg.UID, reason)
		return nil
	}
	patched := live.DeepCopy()
	meta.SetStatusCondition(&patched.Status.Conditions, metav1.Condition{Type: osmv1alpha1.ConditionRollingOut, Status: s, Reason: reason, Message: msg, ObservedGeneration: 1})
	if err := r.Mgmt.Patch(ctx, patched, client.MergeFromWithOptions(live, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil // the OSC changed: the watch brings it back here
		}
		return fmt.Errorf("writing the RollingOut condition of OperatingSystemConfig %s: %w", live.Name, err)
	}
	r.noteReported(cfg.UID, reason)
	return nil
}

func (r *Reconciler) noteReported(uid types.UID, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reported[uid] = reason
}

func (r *Reconciler) dequeue(name types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.queued, name)
}

func (r *Reconciler) forget(name types.NamespacedName) {
	r.mu.Lock()
	_, wasInflight := r.inflight[name]
	delete(r.queued, name)
	delete(r.inflight, name)
	r.mu.Unlock()
	if wasInflight {
		r.wakeQueued()
	}
}

// wakeQueued reconciles the queued MachineDeployments, longest waiting first, when a rollout finished.
func (r *Reconciler) wakeQueued() {
	r.mu.Lock()
	names := make([]types.NamespacedName, 0, len(r.queued))
	for n := range r.queued {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := r.queued[names[i]], r.queued[names[j]]
		return a.Before(b) || (a.Equal(b) && names[i].String() < names[j].String())
	})
	r.mu.Unlock()
	for _, n := range names {
		md := &clusterv1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: n.Namespace, Name: n.Name}}
		select {
		case r.wake <- event.TypedGenericEvent[*clusterv1alpha1.MachineDeployment]{Object: md}:
		default: // full: the periodic requeue of queued MachineDeployments gets it
		}
	}
}
