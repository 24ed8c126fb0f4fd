package nodereport

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
)

// machine-controller's kinds a MachineDeployment's machines are found through: Machines owned by MachineSets
// owned by the MachineDeployment. OSM only reads them, so they are read as unstructured data.
var (
	machineSetList = schema.GroupVersionKind{Group: "cluster.k8s.io", Version: "v1alpha1", Kind: "MachineSetList"}
	machineList    = schema.GroupVersionKind{Group: "cluster.k8s.io", Version: "v1alpha1", Kind: "MachineList"}
)

// machineNames returns the names a machine of md may report under: each Machine's name, its Node's name
// and its addresses (a node without /etc/machine-name reports its host name, which on AWS is the instance's
// private DNS name machine-controller records as an address).
func machineNames(ctx context.Context, c client.Reader, md *clusterv1alpha1.MachineDeployment) (map[string]bool, error) {
	sets := &unstructured.UnstructuredList{}
	sets.SetGroupVersionKind(machineSetList)
	if err := c.List(ctx, sets, client.InNamespace(md.Namespace)); err != nil {
		return nil, fmt.Errorf("listing MachineSets: %w", err)
	}
	owned := map[types.UID]bool{}
	for i := range sets.Items {
		if ownedBy(&sets.Items[i], md.UID) {
			owned[sets.Items[i].GetUID()] = true
		}
	}
	machines := &unstructured.UnstructuredList{}
	machines.SetGroupVersionKind(machineList)
	if err := c.List(ctx, machines, client.InNamespace(md.Namespace)); err != nil {
		return nil, fmt.Errorf("listing Machines: %w", err)
	}
	names := map[string]bool{}
	for i := range machines.Items {
		m := &machines.Items[i]
		if !ownedByAny(m, owned) {
			continue
		}
		names[m.GetName()] = true
		if n, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name"); n != "" {
			names[n] = true
		}
		addrs, _, _ := unstructured.NestedSlice(m.Object, "status", "addresses")
		for _, a := range addrs {
			if am, ok := a.(map[string]any); ok {
				if s, ok := am["address"].(string); ok && s != "" {
					names[s] = true
				}
			}
		}
	}
	return names, nil
}

func ownedBy(o *unstructured.Unstructured, uid types.UID) bool {
	for _, ref := range o.GetOwnerReferences() {
		if ref.UID == uid {
			return true
		}
	}
	return false
}

func ownedByAny(o *unstructured.Unstructured, uids map[types.UID]bool) bool {
	for _, ref := range o.GetOwnerReferences() {
		if uids[ref.UID] {
			return true
		}
	}
	return false
}
