package credentials

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
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
	return nil
}
