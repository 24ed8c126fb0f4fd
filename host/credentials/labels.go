// Package credentials issues the credentials a new node of a MachineDeployment needs, and nothing more:
//
//   - one bootstrap token, which the node uses twice: to fetch its provisioning Secrets, which a Role bound to
//     the token's user grants and nothing else does (upstream OSM instead hands every node a token that reads
//     all of cloud-init-settings), and for the kubelet's TLS bootstrap. Its expiry is pushed forward while the
//     MachineDeployment exists, so scale-ups days later still join; deleting it revokes both uses at once.
//
// One identity instead of a ServiceAccount token plus a bootstrap token is two API writes and a round trip
// fewer per MachineDeployment, and grants a node nothing it did not have: its provisioning data always held
// the bootstrap token.
//
// Every object created for a MachineDeployment carries a label with the MachineDeployment's hash (selection,
// cleanup) and annotations naming it (ownership). Nothing is reused, overwritten or deleted without that mark.
package credentials

import (
	"maps"

	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	"github.com/osmhq/osm/host/render"
)

const (
	// LabelMachineDeployment is on every object OSM creates for a MachineDeployment; its value is
	// render.Hash of the MachineDeployment, never a truncated name, so selecting by it never reaches another
	// MachineDeployment's objects.
	LabelMachineDeployment = "osm.k8c.io/machine-deployment"
	// LabelMDNamespace is the MachineDeployment's namespace, for people (a namespace name always fits a label).
	LabelMDNamespace = "osm.k8c.io/machine-deployment-namespace"
	// AnnotationOwner is "<namespace>/<name>" of the MachineDeployment an object belongs to.
	AnnotationOwner = "osm.k8c.io/machine-deployment"
	// AnnotationOwnerUID is that MachineDeployment's UID when the object was created, for people.
	AnnotationOwnerUID = "osm.k8c.io/machine-deployment-uid"
)

// Labels returns the labels that tie an object to md.
func Labels(md *clusterv1alpha1.MachineDeployment) map[string]string {
	return map[string]string{LabelMachineDeployment: render.Hash(md), LabelMDNamespace: md.Namespace}
}

// Annotations returns the annotations that say an object belongs to md.
func Annotations(md *clusterv1alpha1.MachineDeployment) map[string]string {
	return map[string]string{AnnotationOwner: OwnerKey(md), AnnotationOwnerUID: string(md.UID)}
}

// Selector matches the objects created for md.
func Selector(md *clusterv1alpha1.MachineDeployment) client.MatchingLabels {
	return client.MatchingLabels{LabelMachineDeployment: render.Hash(md)}
}

// OwnerKey is how ownership annotations name md.
func OwnerKey(md *clusterv1alpha1.MachineDeployment) string { return md.Namespace + "/" + md.Name }

// Owner returns the "<namespace>/<name>" of the MachineDeployment obj belongs to, "" when obj carries no mark
// (created by upstream OSM or by hand).
func Owner(obj client.Object) string { return obj.GetAnnotations()[AnnotationOwner] }

// Owns reports whether obj may be reused, overwritten or deleted for md: it is marked as md's, or it is
// unmarked and may be adopted (the user-data Secrets upstream OSM wrote, which a drop-in replacement takes
// over).
func Owns(md *clusterv1alpha1.MachineDeployment, obj client.Object) bool {
	return Owner(obj) == "" || Marked(md, obj)
}

// Marked reports whether obj is marked as md's. Credentials are only reused when they are: an unmarked
// bootstrap token or ServiceAccount that happens to have the name OSM would choose is someone else's.
func Marked(md *clusterv1alpha1.MachineDeployment, obj client.Object) bool {
	return Owner(obj) == OwnerKey(md)
}

// Mark sets md's labels and ownership annotations on obj, keeping its others.
func Mark(md *clusterv1alpha1.MachineDeployment, obj client.Object) {
	obj.SetLabels(merge(obj.GetLabels(), Labels(md)))
	obj.SetAnnotations(merge(obj.GetAnnotations(), Annotations(md)))
}

func merge(into, from map[string]string) map[string]string {
	if into == nil {
		into = make(map[string]string, len(from))
	}
	maps.Copy(into, from)
	return into
}
