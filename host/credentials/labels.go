// Package credentials issues the credentials a new node of a MachineDeployment needs, and nothing more:
//
//   - a provisioning token: a ServiceAccount token that may only get that MachineDeployment's provisioning
//     Secrets (upstream OSM instead hands every node a token that reads all of cloud-init-settings);
//   - a bootstrap token for the kubelet's TLS bootstrap, with an expiry that is pushed forward while the
//     MachineDeployment exists, so scale-ups days later still join.
//
// Every object created here carries labels naming its MachineDeployment, so cleanup finds all of them even if
// naming rules change between releases.
package credentials

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
)

// Labels on every object OSM creates for a MachineDeployment.
const (
	LabelMDName      = "osm.k8c.io/machine-deployment-name"
	LabelMDNamespace = "osm.k8c.io/machine-deployment-namespace"
	// LabelUpstreamMDKey is upstream OSM's label on bootstrap token Secrets: "<namespace>-<name>".
	LabelUpstreamMDKey = "machinedeployment.k8s.io/name"
)

// Labels returns the labels that tie an object to md.
func Labels(md *clusterv1alpha1.MachineDeployment) map[string]string {
	return map[string]string{LabelMDName: truncate(md.Name), LabelMDNamespace: truncate(md.Namespace)}
}

// Selector matches the objects created for md.
func Selector(md *clusterv1alpha1.MachineDeployment) client.MatchingLabels {
	return client.MatchingLabels(Labels(md))
}

// truncate keeps label values within the 63 characters Kubernetes allows. MachineDeployment names are DNS
// subdomains and may be longer; the namespace label disambiguates the rare collision of long prefixes.
func truncate(s string) string {
	if len(s) > 63 {
		return s[:63]
	}
	return s
}
