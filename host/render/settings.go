package render

import (
	"net"
)

// Settings are the node settings that come from the controller's flags (upstream names in comments). They
// apply to every MachineDeployment the controller renders.
type Settings struct {
	// Namespace is where OSPs and OSCs live (-namespace).
	Namespace string
	// CloudInitSettingsNamespace is where the user-data Secrets live; machine-controller reads them from
	// "cloud-init-settings".
	CloudInitSettingsNamespace string
	// ClusterDNSIPs are the cluster DNS service IPs (-cluster-dns).
	ClusterDNSIPs []net.IP
	// ClusterDomain is the cluster DNS domain.
	ClusterDomain string
	// ContainerRuntime is the container runtime (-container-runtime); only containerd is supported.
	ContainerRuntime string
	// ExternalCloudProvider runs the kubelet with --cloud-provider=external (-external-cloud-provider).
	ExternalCloudProvider bool
	// PauseImage is the sandbox image (-pause-image).
	PauseImage string
	// InitialTaints are registered with the node (-initial-taints).
	InitialTaints string
	// HTTPProxy and NoProxy are the node's proxy settings (-node-http-proxy, -node-no-proxy).
	HTTPProxy string
	NoProxy   string
	// InsecureRegistries, RegistryMirrors and ContainerdRegistryMirrors configure containerd
	// (-node-insecure-registries, -node-registry-mirrors, -node-containerd-registry-mirrors).
	InsecureRegistries        []string
	RegistryMirrors           []string
	ContainerdRegistryMirrors map[string][]string
	// DeviceOwnershipFromSecurityContext sets containerd's device_ownership_from_security_context
	// (-device-ownership-from-security-context).
	DeviceOwnershipFromSecurityContext bool
	// RegistryCredentialHosts are the registries -node-registry-credentials-secret has credentials for; the
	// credentials themselves are only ever handed to SecretValues.
	RegistryCredentialHosts []string
	// KubeletFeatureGates are the kubelet's feature gates (-node-kubelet-feature-gates).
	KubeletFeatureGates map[string]bool
	// KubernetesCACert overrides the cluster CA read from cluster-info (-kubernetes-ca-bundle).
	KubernetesCACert string
	// HostCACert is an extra CA the node trusts system-wide (-host-ca-bundle).
	HostCACert string
	// OverrideBootstrapKubeletAPIServer replaces the API server URL nodes use
	// (-override-bootstrap-kubelet-apiserver).
	OverrideBootstrapKubeletAPIServer string
	// BinaryBaseURL is where nodes download Kubernetes binaries (-node-binary-base-url); air-gapped sites
	// point it at their mirror.
	BinaryBaseURL string
}

// Defaults as upstream OSM defines them for its flags.
const (
	DefaultClusterDNS                 = "10.10.10.10"
	DefaultClusterDomain              = "cluster.local"
	DefaultContainerRuntime           = "containerd"
	DefaultNoProxy                    = ".svc,.cluster.local,localhost,127.0.0.1"
	DefaultCloudInitSettingsNamespace = "cloud-init-settings"
	DefaultBinaryBaseURL              = "https://dl.k8s.io"
)

// DefaultSettings returns the settings of a controller started without flags.
func DefaultSettings() Settings {
	return Settings{
		Namespace:                  "kube-system",
		CloudInitSettingsNamespace: DefaultCloudInitSettingsNamespace,
		ClusterDNSIPs:              []net.IP{net.ParseIP(DefaultClusterDNS)},
		ClusterDomain:              DefaultClusterDomain,
		ContainerRuntime:           DefaultContainerRuntime,
		NoProxy:                    DefaultNoProxy,
		KubeletFeatureGates:        map[string]bool{"RotateKubeletServerCertificate": true},
		BinaryBaseURL:              DefaultBinaryBaseURL,
	}
}

// ClusterInfo is what the node needs to know about the cluster it joins: the API server URL and CA, read from
// kube-public/cluster-info (or the kubernetes EndpointSlice).
type ClusterInfo struct {
	ServerURL string
	CACert    string
}
