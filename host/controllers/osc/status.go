package osc

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/credentials"
	"github.com/osmhq/osm/host/render"
)

// report writes the outcome of a reconcile where operators look: the OSC's status conditions and, for a
// failure, an event on the MachineDeployment. A MachineDeployment that never rendered still gets an OSC, with
// an empty spec and a condition saying why, so `kubectl get osc` shows every MachineDeployment OSM manages.
func (r *Reconciler) report(ctx context.Context, st *state, reconcileErr error) error {
	if st.done && reconcileErr == nil && st.osc != nil && readyAndCurrent(st.osc) {
		return nil
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
		if err := r.createPlaceholder(ctx, st); err != nil {
			return err
		}
	}
	osc := st.osc
	before := osc.Status.DeepCopy()
	status := &osc.Status
	status.ObservedGeneration = osc.Generation
	status.MachineDeploymentRevision = st.md.Annotations[clusterv1alpha1.AnnotationRevision]
	if st.osp != nil {
		status.Profile = fmt.Sprintf("%s/%s@%s", st.osp.Namespace, st.osp.Name, st.osp.Spec.Version)
	}

	if reconcileErr != nil {
		reason := osmv1alpha1.ReasonWriteFailed
		if s, ok := isStalling(reconcileErr); ok {
			reason = s.reason
		}
		msg := oneLine(reconcileErr.Error())
		condType := osmv1alpha1.ConditionRendered
		if reason == osmv1alpha1.ReasonWriteFailed {
			condType = osmv1alpha1.ConditionSecretsWritten
		}
		setCondition(status, osc.Generation, condType, metav1.ConditionFalse, reason, msg)
		setCondition(status, osc.Generation, osmv1alpha1.ConditionReady, metav1.ConditionFalse, reason, msg)
		r.Recorder.Event(st.md, corev1.EventTypeWarning, reason, msg)
	} else {
		if st.output != nil {
			status.Plugin = st.output.Plugin
			status.Plugins, status.Extensions = st.output.Pipeline, st.output.Extensions
			status.BootstrapSize, status.ProvisioningSize = int64(st.bootstrapSize), int64(st.provisioningSize)
		}
		// When nothing was rendered (everything was current), the sizes in the status are still the ones written.
		status.BootstrapSecret = r.Settings.CloudInitSettingsNamespace + "/" + render.BootstrapSecretName(st.md)
		status.ProvisioningSecret = r.Settings.CloudInitSettingsNamespace + "/" + render.ProvisioningSecretName(st.md)
		setCondition(status, osc.Generation, osmv1alpha1.ConditionRendered, metav1.ConditionTrue, osmv1alpha1.ReasonSucceeded, "rendered from "+status.Profile)
		setCondition(status, osc.Generation, osmv1alpha1.ConditionSecretsWritten, metav1.ConditionTrue, osmv1alpha1.ReasonSucceeded,
			fmt.Sprintf("bootstrap %d bytes, provisioning %d bytes", status.BootstrapSize, status.ProvisioningSize))
		setCondition(status, osc.Generation, osmv1alpha1.ConditionReady, metav1.ConditionTrue, osmv1alpha1.ReasonSucceeded,
			"user-data for revision "+status.MachineDeploymentRevision+" is ready")
		if len(st.wrote) > 0 {
			// A log line, not an event: an event is one more API write per render, and the OSC's status
			// already says the user-data is ready. Failures and plugin warnings are events.
			logr.FromContextOrDiscard(ctx).Info("wrote user-data", "revision", status.MachineDeploymentRevision, "objects", st.wrote)
		}
		if st.output != nil {
			for _, w := range st.output.Warnings {
				r.Recorder.Event(st.md, corev1.EventTypeWarning, "PluginWarning", oneLine(w))
			}
		}
	}
	if apierrors.Semantic.DeepEqual(before, &osc.Status) {
		return nil
	}
	// A merge patch carries no resourceVersion, so a status write never conflicts with the cache being a step
	// behind our own create. It is computed from the statuses alone: diffing whole objects would marshal the
	// rendered spec twice per reconcile (a tenth of the controller's CPU in a profile of 500 new machines).
	from := &osmv1alpha1.OperatingSystemConfig{ObjectMeta: metav1.ObjectMeta{Namespace: osc.Namespace, Name: osc.Name}, Status: *before}
	to := &osmv1alpha1.OperatingSystemConfig{ObjectMeta: metav1.ObjectMeta{Namespace: osc.Namespace, Name: osc.Name}, Status: osc.Status}
	if err := r.Mgmt.Status().Patch(ctx, to, client.MergeFrom(from)); err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "writing OperatingSystemConfig status")
		return client.IgnoreNotFound(err)
	}
	return nil
}

func readyAndCurrent(osc *osmv1alpha1.OperatingSystemConfig) bool {
	c := meta.FindStatusCondition(osc.Status.Conditions, osmv1alpha1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == osc.Generation
}

// createPlaceholder creates an OSC with an empty spec to carry the status of a MachineDeployment that has not
// rendered yet.
func (r *Reconciler) createPlaceholder(ctx context.Context, st *state) error {
	spec := osmv1alpha1.OperatingSystemConfigSpec{OSName: "unknown"}
	if pc, err := st.md.ProviderConfig(); err == nil {
		spec.OSName = osmv1alpha1.OperatingSystem(pc.OperatingSystem)
		spec.CloudProvider.Name = pc.CloudProvider
	}
	osc := &osmv1alpha1.OperatingSystemConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: r.Settings.Namespace, Name: render.OSCName(st.md)},
		Spec:       spec,
	}
	credentials.Mark(st.md, osc)
	if err := r.Mgmt.Create(ctx, osc); err != nil {
		return fmt.Errorf("creating OperatingSystemConfig %s to report status: %w", osc.Name, err)
	}
	st.osc = osc
	return nil
}

func setCondition(status *osmv1alpha1.OperatingSystemConfigStatus, gen int64, t string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen})
}

// oneLine keeps messages fit for a condition or an event.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 1024 {
		s = s[:1021] + "..."
	}
	return s
}
