package osc

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/credentials"
)

// finalize deletes everything created for a MachineDeployment that is going away (or no longer names a
// profile): its OSC, its Secrets, its credentials. Deletion is by label, so nothing is missed even if the
// object names were produced by another release. Every step is safe to repeat: a reconcile whose finalizer
// removal meets a newer MachineDeployment (Outdated) goes through them again.
func (r *Reconciler) finalize(ctx context.Context, st *state) error {
	md := st.md
	if !controllerutil.ContainsFinalizer(md, Finalizer) {
		return nil
	}
	sel := credentials.Selector(md)
	if err := r.Mgmt.DeleteAllOf(ctx, &osmv1alpha1.OperatingSystemConfig{}, client.InNamespace(r.Settings.Namespace), sel); err != nil {
		return fmt.Errorf("deleting OperatingSystemConfigs: %w", err)
	}
	if err := r.withdrawUserData(ctx, md); err != nil {
		return err
	}
	return client.IgnoreNotFound(r.patchFinalizers(ctx, st, md, controllerutil.RemoveFinalizer))
}

// withdrawUserData deletes a MachineDeployment's user-data Secrets and revokes its credentials. Besides
// finalize, a MachineDeployment whose profile stops allowing its namespace loses them (loadProfile): its
// user-data holds what the profile lent (its plugin secrets), and machine-controller would go on handing it
// to every new machine. Its OSC stays, to report why.
func (r *Reconciler) withdrawUserData(ctx context.Context, md *clusterv1alpha1.MachineDeployment) error {
	if err := r.Worker.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(r.Settings.CloudInitSettingsNamespace), credentials.Selector(md)); err != nil {
		return fmt.Errorf("deleting user-data Secrets: %w", err)
	}
	return r.Issuer.Revoke(ctx, md)
}
