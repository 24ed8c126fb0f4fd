package credentials

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
)

// Revoke deletes every credential issued for md: the bootstrap tokens, the Role and RoleBinding, and the
// ServiceAccount earlier OSM versions issued provisioning tokens for (deleting it invalidates them).
func (i *Issuer) Revoke(ctx context.Context, md *clusterv1alpha1.MachineDeployment) error {
	sel := Selector(md)
	for _, del := range []struct {
		obj client.Object
		ns  string
	}{
		{&corev1.Secret{}, bootstrapTokenNamespace},
		{&corev1.ServiceAccount{}, i.Namespace},
		{&rbacv1.RoleBinding{}, i.Namespace},
		{&rbacv1.Role{}, i.Namespace},
	} {
		if err := i.Client.DeleteAllOf(ctx, del.obj, client.InNamespace(del.ns), sel); err != nil {
			return fmt.Errorf("deleting %T of %s/%s: %w", del.obj, md.Namespace, md.Name, err)
		}
	}
	// The bootstrap report of md's machines goes with the credential that wrote it; a cluster without the
	// report CRD has none.
	err := i.Client.DeleteAllOf(ctx, &osmv1alpha1.OperatingSystemNodeReport{}, client.InNamespace(i.Namespace), sel)
	if err != nil && !meta.IsNoMatchError(err) && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the bootstrap report of %s/%s: %w", md.Namespace, md.Name, err)
	}
	return nil
}
