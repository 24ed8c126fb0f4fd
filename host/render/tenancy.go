package render

import (
	"fmt"
	"slices"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
)

// AllNamespaces in a profile's spec.allowedNamespaces lets every namespace use it.
const AllNamespaces = "*"

// ProfileAllowed decides whether MachineDeployments of namespace may use the profile (docs/security.md,
// "Tenancy"); controllerNamespace is the controller's -namespace. A MachineDeployment may use:
//
//   - a profile of its own namespace;
//   - a profile whose spec.allowedNamespaces lists its namespace (or "*");
//   - a profile of the controller's namespace without spec.allowedNamespaces: upstream's default profiles, and
//     upstream's annotation k8c.io/operating-system-profile-namespace pointing there, keep working.
//
// Everything a render reads through the profile — its plugin secrets, its pull secret, the extensions of its
// namespace — flows only to MachineDeployments that may use it. The error carries ReasonProfileNotAllowed and
// says how the profile's owner allows the namespace.
func ProfileAllowed(osp *osmv1alpha1.OperatingSystemProfile, namespace, controllerNamespace string) error {
	switch {
	case osp.Namespace == namespace:
		return nil
	case len(osp.Spec.AllowedNamespaces) > 0:
		if slices.Contains(osp.Spec.AllowedNamespaces, namespace) || slices.Contains(osp.Spec.AllowedNamespaces, AllNamespaces) {
			return nil
		}
		return withReason(osmv1alpha1.ReasonProfileNotAllowed, fmt.Errorf(
			"OperatingSystemProfile %s may not be used from namespace %s: its spec.allowedNamespaces does not list %s; the profile's owner can add it",
			objectName(osp.Namespace, osp.Name), namespace, namespace))
	case osp.Namespace == controllerNamespace:
		return nil
	}
	return withReason(osmv1alpha1.ReasonProfileNotAllowed, fmt.Errorf(
		"OperatingSystemProfile %s may not be used from namespace %s: a profile outside the controller's namespace %s serves only its own namespace unless its spec.allowedNamespaces lists others; the profile's owner can add %s, or use a profile of namespace %s or %s",
		objectName(osp.Namespace, osp.Name), namespace, controllerNamespace, namespace, namespace, controllerNamespace))
}

// ProfileKey is the profile a MachineDeployment names: the k8c.io/operating-system-profile annotation, in the
// namespace of k8c.io/operating-system-profile-namespace or else the controller's.
func ProfileKey(md *clusterv1alpha1.MachineDeployment, controllerNamespace string) (namespace, name string) {
	namespace = md.Annotations[clusterv1alpha1.AnnotationOSPNamespace]
	if namespace == "" {
		namespace = controllerNamespace
	}
	return namespace, md.Annotations[clusterv1alpha1.AnnotationOSP]
}
