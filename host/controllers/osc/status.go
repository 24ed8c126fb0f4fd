package osc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/controllers/internal/failure"
	"github.com/osmhq/osm/host/credentials"
	"github.com/osmhq/osm/host/render"
)

// report writes the outcome of a reconcile where operators look — the OSC's status conditions and, for a
// failure, an event on the MachineDeployment — and returns what controller-runtime is to do next. A
// MachineDeployment that never rendered still gets an OSC, with an empty spec and a condition saying why, so
// `kubectl get osc` shows every MachineDeployment OSM manages. A rendered OSC is created with its status
// (writeConfig), so a reconcile that succeeds writes no status; any other writes it at most once.
func (r *Reconciler) report(ctx context.Context, st *state, reconcileErr error) (ctrl.Result, error) {
	f := failure.Of(reconcileErr)
	if f != nil && f.Action == failure.Outdated {
		// The cache was behind: nothing is wrong to report, and the reconcile runs again on a cache that has
		// caught up (awaitPrevious).
		return r.policy().Result(reconcileErr)
	}
	werr := r.writeStatus(ctx, st, reconcileErr)
	if failure.IsOutdated(werr) {
		return r.policy().Result(werr) // reported by the next reconcile, on a cache that has caught up
	}
	if reconcileErr == nil {
		if werr != nil {
			return r.policy().Result(werr)
		}
		return ctrl.Result{RequeueAfter: st.refreshAfter(time.Now())}, nil
	}
	if f.Action != failure.Backoff {
		logr.FromContextOrDiscard(ctx).Info("configuration cannot be rendered", "reason", f.Reason, "then", f.Action.String(), "error", f.Err.Error())
	}
	if werr != nil && f.Action == failure.Stall {
		// A stall waits for a change to a watched object, which may never come: without a retry the failure
		// would never reach the OSC's status, where operators look.
		logr.FromContextOrDiscard(ctx).Error(werr, "reporting the failure", "reason", f.Reason)
		return ctrl.Result{}, werr
	}
	return r.policy().Result(reconcileErr)
}

// writeStatus records the outcome, reconcileErr (nil for success), as an event and in the OSC's status.
func (r *Reconciler) writeStatus(ctx context.Context, st *state, reconcileErr error) error {
	if st.done && reconcileErr == nil && st.osc != nil {
		ready, err := r.oscReady(ctx, st)
		if err != nil || ready {
			return err
		}
	}
	r.notify(ctx, st, reconcileErr)
	if st.osc == nil && reconcileErr != nil {
		r.findOSC(ctx, st)
	}
	if st.osc == nil {
		if reconcileErr == nil {
			return nil
		}
		// The placeholder is OSM's object too: the finalizer must be in place before it, so that deleting the
		// MachineDeployment removes it (a reconcile that failed early has not added it yet).
		if !controllerutil.ContainsFinalizer(st.md, Finalizer) {
			if err := r.patchFinalizers(ctx, st, st.md, controllerutil.AddFinalizer); err != nil {
				return err
			}
		}
		return r.createPlaceholder(ctx, st, reconcileErr)
	}
	if err := r.readOSCStatus(ctx, st); err != nil {
		return err
	}
	osc := st.osc
	before := osc.Status.DeepCopy()
	r.setStatus(st, &osc.Status, reconcileErr)
	if equality.Semantic.DeepEqual(before, &osc.Status) {
		return nil
	}
	// A merge patch of the status alone: the status is OSM's only, so there is no other writer's change to
	// keep. It is computed from the statuses alone: diffing whole objects would marshal the rendered spec twice
	// per reconcile (a tenth of the controller's CPU in a profile of 500 new machines).
	from := &osmv1alpha1.OperatingSystemConfig{ObjectMeta: metav1.ObjectMeta{Namespace: osc.Namespace, Name: osc.Name}, Status: *before}
	to := &osmv1alpha1.OperatingSystemConfig{ObjectMeta: metav1.ObjectMeta{Namespace: osc.Namespace, Name: osc.Name}, Status: osc.Status}
	err := r.Mgmt.Patch(ctx, to, client.MergeFrom(from))
	st.expect(err, r.oscExpectation(st, versionOf(osc)))
	if err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "writing OperatingSystemConfig status")
		return client.IgnoreNotFound(err)
	}
	return nil
}

// notify records a failure as an event on the MachineDeployment, and a success in the log (not as an event: an
// event is one more API write per render, and the OSC's status already says the user-data is ready), with the
// plugin's warnings as events.
func (r *Reconciler) notify(ctx context.Context, st *state, reconcileErr error) {
	if f := failure.Of(reconcileErr); f != nil {
		if f.Event != "" {
			r.Recorder.Event(st.md, f.Event, f.Reason, oneLine(reconcileErr.Error()))
		}
		return
	}
	if len(st.wrote) > 0 {
		logr.FromContextOrDiscard(ctx).Info("wrote user-data", "revision", st.md.Annotations[clusterv1alpha1.AnnotationRevision], "objects", st.wrote)
	}
	if st.output != nil {
		for _, w := range st.output.Warnings {
			r.Recorder.Event(st.md, corev1.EventTypeWarning, "PluginWarning", oneLine(w))
		}
	}
}

// specGeneration is the generation of every OSC's spec: OSM never updates a spec (a new render replaces the
// OSC), and an OSC has no status subresource, so later generations are status writes, which the status does
// not describe.
const specGeneration = 1

// setStatus puts the outcome of the reconcile of st, reconcileErr (nil for success), into status. A failure to
// talk to the API server is one of writing the Secrets (SecretsWritten); any other is one of rendering.
func (r *Reconciler) setStatus(st *state, status *osmv1alpha1.OperatingSystemConfigStatus, reconcileErr error) {
	status.ObservedGeneration = specGeneration
	status.MachineDeploymentRevision = st.md.Annotations[clusterv1alpha1.AnnotationRevision]
	if st.osp != nil {
		status.Profile = fmt.Sprintf("%s/%s@%s", st.osp.Namespace, st.osp.Name, st.osp.Spec.Version)
	}
	if f := failure.Of(reconcileErr); f != nil {
		condType := osmv1alpha1.ConditionRendered
		if f.Action == failure.Backoff {
			condType = osmv1alpha1.ConditionSecretsWritten
		}
		msg := oneLine(reconcileErr.Error())
		setCondition(status, condType, metav1.ConditionFalse, f.Reason, msg)
		setCondition(status, osmv1alpha1.ConditionReady, metav1.ConditionFalse, f.Reason, msg)
		return
	}
	if st.output != nil {
		status.Plugin = st.output.Plugin
		status.Plugins, status.Extensions = st.output.Pipeline, st.output.Extensions
		status.BootstrapSize, status.ProvisioningSize = int64(st.bootstrapSize), int64(st.provisioningSize)
	}
	// When nothing was rendered (everything was current), the sizes in the status are still the ones written.
	status.BootstrapSecret = r.Settings.CloudInitSettingsNamespace + "/" + render.BootstrapSecretName(st.md)
	status.ProvisioningSecret = r.Settings.CloudInitSettingsNamespace + "/" + render.ProvisioningSecretName(st.md)
	setCondition(status, osmv1alpha1.ConditionRendered, metav1.ConditionTrue, osmv1alpha1.ReasonSucceeded, "rendered from "+status.Profile)
	setCondition(status, osmv1alpha1.ConditionSecretsWritten, metav1.ConditionTrue, osmv1alpha1.ReasonSucceeded,
		fmt.Sprintf("bootstrap %d bytes, provisioning %d bytes", status.BootstrapSize, status.ProvisioningSize))
	setCondition(status, osmv1alpha1.ConditionReady, metav1.ConditionTrue, osmv1alpha1.ReasonSucceeded,
		"user-data for revision "+status.MachineDeploymentRevision+" is ready")
}

// oscExpectation is the Mgmt cache showing the MachineDeployment's OSC at another version than before.
func (r *Reconciler) oscExpectation(st *state, before version) expectation {
	osc := OSCMeta()
	osc.Namespace, osc.Name = r.Settings.Namespace, render.OSCName(st.md)
	return expectation{cache: r.Mgmt, obj: osc, before: before}
}

// oscReady reports whether st.osc's Ready condition is True. An OSC still as writeConfig created it is, and
// that shows in its metadata: it has a render hash (a placeholder has none) and generation 1 (an OSC has no
// status subresource, so every status write bumps the generation). Any other OSC's status is read past the
// cache, which happens only after a failure was reported on it.
func (r *Reconciler) oscReady(ctx context.Context, st *state) (bool, error) {
	if !st.oscStatusRead && st.osc.Generation == specGeneration && st.osc.Annotations[AnnotationRenderHash] != "" {
		return true, nil
	}
	if err := r.readOSCStatus(ctx, st); err != nil {
		return false, err
	}
	c := meta.FindStatusCondition(st.osc.Status.Conditions, osmv1alpha1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue, nil
}

var oscResource = osmv1alpha1.GroupVersion.WithResource("operatingsystemconfigs").GroupResource()

// readOSCStatus reads st.osc's status from the API server, once per reconcile. The OSC read must be the one
// the reconcile decided on: another one (replaced meanwhile) is Outdated, and the reconcile runs again once
// the cache shows it.
func (r *Reconciler) readOSCStatus(ctx context.Context, st *state) error {
	if st.oscStatusRead {
		return nil
	}
	reader := r.MgmtAPIReader
	if reader == nil {
		reader = r.Mgmt
	}
	live := &osmv1alpha1.OperatingSystemConfig{}
	err := reader.Get(ctx, client.ObjectKeyFromObject(st.osc), live)
	switch {
	case apierrors.IsNotFound(err):
		err = apierrors.NewConflict(oscResource, st.osc.Name, err)
	case err != nil:
		return fmt.Errorf("reading the status of OperatingSystemConfig %s: %w", st.osc.Name, err)
	case live.UID != st.osc.UID:
		err = apierrors.NewConflict(oscResource, st.osc.Name, errors.New("replaced since it was read"))
	}
	if err != nil {
		st.expect(err, r.oscExpectation(st, versionOf(st.osc)))
		return err
	}
	st.osc.Status, st.oscStatusRead = live.Status, true
	return nil
}

// findOSC finds the MachineDeployment's OSC when the reconcile failed before reading it (a profile that does
// not exist or may not be used), so that its status shows the new reason: a placeholder created for the first
// failure would otherwise keep that failure's reason (ProfileNotFound) after the profile appeared.
func (r *Reconciler) findOSC(ctx context.Context, st *state) {
	osc := OSCMeta()
	if err := r.Mgmt.Get(ctx, client.ObjectKey{Namespace: r.Settings.Namespace, Name: render.OSCName(st.md)}, osc); err == nil && credentials.Owns(st.md, osc) {
		st.osc, st.oscStatusRead = &osmv1alpha1.OperatingSystemConfig{ObjectMeta: osc.ObjectMeta}, false
	}
}

// createPlaceholder creates an OSC with an empty spec to carry the status of a MachineDeployment that has not
// rendered yet.
func (r *Reconciler) createPlaceholder(ctx context.Context, st *state, reconcileErr error) error {
	spec := osmv1alpha1.OperatingSystemConfigSpec{OSName: "unknown"}
	if pc, err := st.md.ProviderConfig(); err == nil {
		spec.OSName = osmv1alpha1.OperatingSystem(pc.OperatingSystem)
		spec.CloudProvider.Name = pc.CloudProvider
	}
	osc := &osmv1alpha1.OperatingSystemConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: r.Settings.Namespace, Name: render.OSCName(st.md)},
		Spec:       spec,
	}
	r.setStatus(st, &osc.Status, reconcileErr)
	credentials.Mark(st.md, osc)
	err := r.Mgmt.Create(ctx, osc)
	st.expect(err, r.oscExpectation(st, version{}))
	if err != nil {
		return fmt.Errorf("creating OperatingSystemConfig %s to report status: %w", osc.Name, err)
	}
	st.osc, st.oscStatusRead = osc, true
	return nil
}

func setCondition(status *osmv1alpha1.OperatingSystemConfigStatus, t string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: specGeneration})
}

// oneLine keeps messages fit for a condition or an event.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 1024 {
		s = s[:1021] + "..."
	}
	return s
}
