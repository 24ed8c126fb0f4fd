package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
)

// Names of the objects created for a MachineDeployment.
//
// The two user-data Secrets keep machine-controller's names, "<md>-<namespace>-{bootstrap,provisioning}-config".
// Those names are ambiguous (c/a-b and b-c/a both give "a-b-c-..."), so the controller checks who owns such a
// Secret before it writes it. Every other name is OSM's own choice and is collision-free by construction (see
// ObjectName).

// BootstrapSecretName is the Secret machine-controller passes to new machines as user-data.
func BootstrapSecretName(md *clusterv1alpha1.MachineDeployment) string {
	return fmt.Sprintf("%s-%s-bootstrap-config", md.Name, md.Namespace)
}

// ProvisioningSecretName is the Secret the bootstrap stage fetches.
func ProvisioningSecretName(md *clusterv1alpha1.MachineDeployment) string {
	return fmt.Sprintf("%s-%s-provisioning-config", md.Name, md.Namespace)
}

// OSCName is the name of the MachineDeployment's OperatingSystemConfig.
func OSCName(md *clusterv1alpha1.MachineDeployment) string { return ObjectName(md, "config") }

// KubeletBootstrapSecretName is the Secret holding the kubelet's bootstrap kubeconfig, which upstream profiles
// fetch during provisioning (as .BootstrapKubeconfigSecretName, so its name is OSM's choice).
func KubeletBootstrapSecretName(md *clusterv1alpha1.MachineDeployment) string {
	return ObjectName(md, "kubelet-bootstrap-config")
}

// maxNameLength is the longest DNS subdomain, the rule for the names of Secrets, ServiceAccounts and
// OperatingSystemConfigs.
const maxNameLength = 253

// plainNameLimit is the longest name given in plain form. Hashed names are longer than it, so a plain name can
// never equal a hashed one.
const plainNameLimit = maxNameLength - 13

// ObjectName is the name of an object OSM creates for md: "<md>.<namespace>-<suffix>". Namespace names cannot
// contain dots, so the last dot tells name and namespace apart and no two MachineDeployments share a name. When
// that would be longer than plainNameLimit, the MachineDeployment's name is cut and followed by a hash of
// "<namespace>/<name>", and the result is exactly maxNameLength long.
func ObjectName(md *clusterv1alpha1.MachineDeployment, suffix string) string {
	tail := "." + md.Namespace + "-" + suffix
	if len(md.Name)+len(tail) <= plainNameLimit {
		return md.Name + tail
	}
	hash := "-" + Hash(md)
	keep := maxNameLength - len(hash) - len(tail)
	if keep < 1 {
		// Only a suffix far longer than any OSM uses gets here; the hash alone still identifies md.
		return Hash(md) + "-" + suffix
	}
	cut := []byte(md.Name[:keep])
	if last := cut[len(cut)-1]; last == '.' || last == '-' {
		// A DNS label cannot end in either; the hash keeps the name unique, so the character is just replaced.
		cut[len(cut)-1] = 'x'
	}
	return string(cut) + hash + tail
}

// Hash identifies a MachineDeployment in 20 hexadecimal characters (80 bits of SHA-256 over
// "<namespace>/<name>"), for label values and names that must be short. It never truncates, so two
// MachineDeployments whose names share a long prefix get different values.
func Hash(md *clusterv1alpha1.MachineDeployment) string {
	sum := sha256.Sum256([]byte(md.Namespace + "/" + md.Name))
	return hex.EncodeToString(sum[:10])
}

// AnnotationsHash is the sha256 of the MachineDeployment's annotations as JSON (keys sorted). A change of any
// annotation re-renders, as upstream's k8c.io/mdannotations-hash does.
func AnnotationsHash(md *clusterv1alpha1.MachineDeployment) string {
	data, _ := json.Marshal(md.Annotations)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
