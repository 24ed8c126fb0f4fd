package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
)

// Names of the objects OSM creates for a MachineDeployment, identical to upstream OSM's because
// machine-controller and existing clusters depend on them.

// OSCName is the name of the MachineDeployment's OperatingSystemConfig.
func OSCName(md *clusterv1alpha1.MachineDeployment) string {
	return fmt.Sprintf("%s-%s-config", md.Name, md.Namespace)
}

// BootstrapSecretName is the Secret machine-controller passes to new machines as user-data.
func BootstrapSecretName(md *clusterv1alpha1.MachineDeployment) string {
	return fmt.Sprintf("%s-%s-bootstrap-config", md.Name, md.Namespace)
}

// ProvisioningSecretName is the Secret the bootstrap stage fetches.
func ProvisioningSecretName(md *clusterv1alpha1.MachineDeployment) string {
	return fmt.Sprintf("%s-%s-provisioning-config", md.Name, md.Namespace)
}

// MachineDeploymentKey identifies a MachineDeployment in names limited to 63 characters.
func MachineDeploymentKey(md *clusterv1alpha1.MachineDeployment) string {
	key := md.Namespace + "-" + md.Name
	if len(key) >= 63 {
		return md.Name
	}
	return key
}

// KubeletBootstrapSecretName is the Secret holding the kubelet's bootstrap kubeconfig, which upstream profiles
// fetch during provisioning.
func KubeletBootstrapSecretName(md *clusterv1alpha1.MachineDeployment) string {
	return MachineDeploymentKey(md) + "-kubelet-bootstrap-config"
}

// AnnotationsHash is the sha256 of the MachineDeployment's annotations as JSON (keys sorted). A change of any
// annotation re-renders, as upstream's k8c.io/mdannotations-hash does.
func AnnotationsHash(md *clusterv1alpha1.MachineDeployment) string {
	data, _ := json.Marshal(md.Annotations)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
