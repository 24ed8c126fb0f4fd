package osc

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/controllers/internal/failure"
	"github.com/osmhq/osm/host/credentials"
	"github.com/osmhq/osm/host/render"
)

// report writes the outcome of a reconcile where operators look: the OSC's status conditions and, for a
// failure, an event on the MachineDeployment. A MachineDeployment that never rendered still gets an OSC, with
// an empty spec and a condition saying why, so `kubectl get osc` shows every MachineDeployment OSM manages.
// A rendered OSC is created with its status (writeConfig), so a reconcile that succeeds writes no status.
func (r *Reconciler) report(ctx context.Context, st *state, reconcileErr error) error {
	if st.done && reconcileErr == nil && st.osc != nil {
		ready, err := r.oscReady(ctx, st)
		if err != nil || ready {
			return err
		}
	}
	if apierrors.IsAlreadyExists(reconcileErr) || apierrors.IsConflict(reconcileErr) {
		// The cache was behind our own writes: Reconcile retries at once, and nothing is wrong to report.
		return nil
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
			if err := r.patchFinalizers(ctx, st.md, controllerutil.AddFinalizer); err != nil {
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
	// A merge patch carries no resourceVersion, so a status write never conflicts with the cache being a step
	// behind our own create. It is computed from the statuses alone: diffing whole objects would marshal the
	// rendered spec twice per reconcile (a tenth of the controller's CPU in a profile of 500 new machines).
	from := &osmv1alpha1.OperatingSystemConfig{ObjectMeta: metav1.ObjectMeta{Namespace: osc.Namespace, Name: osc.Name}, Status: *before}
	to := &osmv1alpha1.OperatingSystemConfig{ObjectMeta: metav1.ObjectMeta{Namespace: osc.Namespace, Name: osc.Name}, Status: osc.Status}
	if err := r.Mgmt.Patch(ctx, to, client.MergeFrom(from)); err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "writing OperatingSystemConfig status")
		return client.IgnoreNotFound(err)
	}
	return nil
}

// notify records a failure as a Warning event on the MachineDeployment, and a success in the log (not as an
// event: an event is one more API write per render, and the OSC's status already says the user-data is
// ready), with the plugin's warnings as events.
func (r *Reconciler) notify(ctx context.Context, st *state, reconcileErr error) {
	if reconcileErr != nil {
		reason, msg := reported(reconcileErr)
		r.Recorder.Event(st.md, corev1.EventTypeWarning, reason, msg)
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

// reported is the reason and the one-line message a reconcile error is reported with: a classified failure's
// reason, WriteFailed for any other error (an API call that failed, retried with backoff).
func reported(err error) (reason, msg string) {
	reason = osmv1alpha1.ReasonWriteFailed
	if f, ok := failure.As(err); ok {
		reason = f.Reason
	}
	return reason, oneLine(err.Error())
}

// specGeneration is the generation of every OSC's spec: OSM never updates a spec (a new render replaces the
// OSC), and an OSC has no status subresource, so later generations are status writes, which the status does
// not describe.
const specGeneration = 1

// setStatus puts the outcome of the reconcile of st into status.
func (r *Reconciler) setStatus(st *state, status *osmv1alpha1.OperatingSystemConfigStatus, reconcileErr error) {
	status.ObservedGeneration = specGeneration
	status.MachineDeploymentRevision = st.md.Annotations[clusterv1alpha1.AnnotationRevision]
	if st.osp != nil {
		status.Profile = fmt.Sprintf("%s/%s@%s", st.osp.Namespace, st.osp.Name, st.osp.Spec.Version)
	}
	if reconcileErr != nil {
		reason, msg := reported(reconcileErr)
		condType := osmv1alpha1.ConditionRendered
		if reason == osmv1alpha1.ReasonWriteFailed {
			condType = osmv1alpha1.ConditionSecretsWritten
		}
		setCondition(status, condType, metav1.ConditionFalse, reason, msg)
		setCondition(status, osmv1alpha1.ConditionReady, metav1.ConditionFalse, reason, msg)
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
// the reconcile decided on: another one (replaced meanwhile) is a conflict, and the reconcile is retried.
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
		return apierrors.NewConflict(oscResource, st.osc.Name, err)
	case err != nil:
		return fmt.Errorf("reading the status of OperatingSystemConfig %s: %w", st.osc.Name, err)
	case live.UID != st.osc.UID:
		return apierrors.NewConflict(oscResource, st.osc.Name, errors.New("replaced since it was read"))
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
	if err := r.Mgmt.Create(ctx, osc); err != nil {
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
