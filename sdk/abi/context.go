package abi

import "encoding/json"

// RenderContext is everything a plugin may know about the machines it renders for. Field names follow the
// upstream OSM template data where one exists, so a template author and a plugin author see the same words.
//
// It never holds credential material. Where a credential must end up in a file (the bootstrap token, the
// cloud-config, registry auth), the context carries a placeholder from Secrets; the host replaces placeholders
// with the real values only when it writes the user-data Secrets, after rendering. Plugins and templates must
// copy placeholders verbatim (no base64, no compression of text that contains one).
type RenderContext struct {
	MachineDeployment ObjectRef        `json:"machineDeployment"`
	OperatingSystem   OSInfo           `json:"operatingSystem"`
	CloudProvider     CloudProvider    `json:"cloudProvider"`
	Cluster           Cluster          `json:"cluster"`
	Kubelet           Kubelet          `json:"kubelet"`
	ContainerRuntime  ContainerRuntime `json:"containerRuntime"`
	Network           Network          `json:"network"`
	Proxy             Proxy            `json:"proxy"`
	// SSHPublicKeys are the keys authorized for the OS's default user.
	SSHPublicKeys []string `json:"sshPublicKeys,omitempty"`
	// HostCACert is an extra CA bundle (PEM) the node must trust system-wide.
	HostCACert string `json:"hostCACert,omitempty"`
	// BinaryBaseURL is where the node downloads Kubernetes binaries from ("https://dl.k8s.io" by default);
	// air-gapped sites point it at their own mirror with the same layout.
	BinaryBaseURL string `json:"binaryBaseURL,omitempty"`
	// Secrets holds placeholders for credential material; see the type comment.
	Secrets SecretPlaceholders `json:"secrets"`
}

// ObjectRef names the MachineDeployment being rendered.
type ObjectRef struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Revision is the MachineDeployment's revision annotation.
	Revision string `json:"revision,omitempty"`
}

// OSInfo is the OS of the machines.
type OSInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Spec is the MachineDeployment's operatingSystemSpec, unchanged.
	Spec json.RawMessage `json:"spec,omitempty"`
}

// CloudProvider is the machines' cloud provider.
type CloudProvider struct {
	Name string `json:"name"`
	// Spec is the OSP's per-provider spec for this provider.
	Spec json.RawMessage `json:"spec,omitempty"`
	// MachineSpec is the MachineDeployment's cloudProviderSpec reduced to the settings the host allow-lists
	// (placement, network, machine shape): credentials and anything unknown never reach a plugin.
	MachineSpec json.RawMessage `json:"machineSpec,omitempty"`
	// External is true when the cluster runs an external (out-of-tree) cloud controller manager.
	External bool `json:"external,omitempty"`
	// InTreeName is the name the kubelet's --cloud-provider flag takes for an in-tree provider, "" if none:
	// none with an external cloud controller manager, and none once the machine's kubelet lost the provider
	// (OpenStack from 1.26, AWS from 1.27, every provider from 1.29).
	InTreeName string `json:"inTreeName,omitempty"`
	// HasCloudConfig is true when a cloud-config file is written (its content is Secrets.CloudConfig).
	HasCloudConfig bool `json:"hasCloudConfig,omitempty"`
}

// Cluster describes the cluster the node joins.
type Cluster struct {
	// ServerURL is the API server URL the node talks to.
	ServerURL string `json:"serverURL"`
	// CACert is the cluster CA bundle (PEM) the node verifies the API server with.
	CACert string `json:"caCert"`
	// DNSIPs are the cluster DNS service IPs.
	DNSIPs []string `json:"dnsIPs,omitempty"`
	// Domain is the cluster DNS domain, "cluster.local" by default.
	Domain string `json:"domain,omitempty"`
	// ProvisioningSecret is the namespace/name of the Secret holding the provisioning user-data, which the
	// bootstrap stage fetches.
	ProvisioningSecret SecretRef `json:"provisioningSecret"`
}

// SecretRef names a Secret and the key in it.
type SecretRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Key       string `json:"key"`
}

// Kubelet is the kubelet's version and configuration.
type Kubelet struct {
	// Version is the kubelet version without a leading v, e.g. "1.33.2".
	Version string `json:"version"`
	// FeatureGates are the feature gates for the kubelet, from the controller's -node-kubelet-feature-gates.
	FeatureGates map[string]bool `json:"featureGates,omitempty"`
	// InitialTaints are taints the node registers with, in kubelet --register-with-taints form.
	InitialTaints string `json:"initialTaints,omitempty"`
	// Config is the kubelet configuration the kubelet-config annotations and flags ask for.
	Config KubeletConfig `json:"config"`
}

// KubeletConfig holds the settings of the MachineDeployment's
// v1.kubelet-config.machine-controller.kubermatic.io/<Key> annotations, already parsed.
type KubeletConfig struct {
	KubeReserved                map[string]string `json:"kubeReserved,omitempty"`
	SystemReserved              map[string]string `json:"systemReserved,omitempty"`
	EvictionHard                map[string]string `json:"evictionHard,omitempty"`
	MaxPods                     *int32            `json:"maxPods,omitempty"`
	ContainerLogMaxSize         string            `json:"containerLogMaxSize,omitempty"`
	ContainerLogMaxFiles        *int32            `json:"containerLogMaxFiles,omitempty"`
	ImageGCHighThresholdPercent *int32            `json:"imageGCHighThresholdPercent,omitempty"`
	ImageGCLowThresholdPercent  *int32            `json:"imageGCLowThresholdPercent,omitempty"`
	ImageMinimumGCAge           string            `json:"imageMinimumGCAge,omitempty"`
	ImageMaximumGCAge           string            `json:"imageMaximumGCAge,omitempty"`
}

// ContainerRuntime holds the container runtime settings from the controller's flags.
type ContainerRuntime struct {
	// Name is the container runtime, "containerd".
	Name string `json:"name"`
	// PauseImage is the sandbox image, empty for the runtime's default.
	PauseImage string `json:"pauseImage,omitempty"`
	// InsecureRegistries are registries reached over plain HTTP or with unverified TLS.
	InsecureRegistries []string `json:"insecureRegistries,omitempty"`
	// RegistryMirrors are mirrors for docker.io (the upstream -node-registry-mirrors flag).
	RegistryMirrors []string `json:"registryMirrors,omitempty"`
	// ContainerdRegistryMirrors are mirrors per registry host.
	ContainerdRegistryMirrors map[string][]string `json:"containerdRegistryMirrors,omitempty"`
	// RegistryCredentials lists the registries with credentials; the credentials themselves are in
	// Secrets.RegistryAuth.
	RegistryCredentials []string `json:"registryCredentials,omitempty"`
	// Config is the host-generated containerd config.toml for these settings.
	Config string `json:"config,omitempty"`
	// HostsTOML maps a registry host to the content of its certs.d/<host>/hosts.toml.
	HostsTOML map[string]string `json:"hostsTOML,omitempty"`
}

// Network is the machines' network configuration.
type Network struct {
	// IPFamily is IPv4, IPv6, IPv4+IPv6 or IPv6+IPv4.
	IPFamily string `json:"ipFamily,omitempty"`
	// CIDR, Gateway and DNSServers are a static configuration, when the provider has no DHCP.
	CIDR       string   `json:"cidr,omitempty"`
	Gateway    string   `json:"gateway,omitempty"`
	DNSServers []string `json:"dnsServers,omitempty"`
}

// Proxy holds the node's proxy settings.
type Proxy struct {
	HTTPProxy string `json:"httpProxy,omitempty"`
	NoProxy   string `json:"noProxy,omitempty"`
}

// RegistryCredentials are the placeholders of one registry's credentials, as in a docker config.json; a field
// the registry's credentials do not have is substituted with "".
type RegistryCredentials struct {
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	Auth          string `json:"auth,omitempty"`
	IdentityToken string `json:"identityToken,omitempty"`
}

// SecretPlaceholders are stand-ins for credential material. Each is a unique string the host replaces when it
// writes the user-data Secrets. Empty means the credential does not apply.
type SecretPlaceholders struct {
	// BootstrapToken is the kubelet's TLS bootstrap token ("<id>.<secret>").
	BootstrapToken string `json:"bootstrapToken,omitempty"`
	// ProvisioningToken is the bearer token the bootstrap stage uses to fetch the provisioning Secret.
	ProvisioningToken string `json:"provisioningToken,omitempty"`
	// CloudConfig is the content of the cloud provider's cloud-config file.
	CloudConfig string `json:"cloudConfig,omitempty"`
	// RegistryAuth is the content of containerd's registry credentials configuration.
	RegistryAuth string `json:"registryAuth,omitempty"`
	// Registries are the same credentials per registry host (ContainerRuntime.RegistryCredentials), one
	// placeholder per field, for formats that list registries themselves. The host substitutes the values
	// verbatim: Auth (base64 of "user:password") needs no quoting in any format; Username, Password and
	// IdentityToken are whatever the operator's docker config holds. Empty for a host that does not provide
	// them (older hosts): use RegistryAuth.
	Registries map[string]RegistryCredentials `json:"registries,omitempty"`
	// RHSubscriptionPassword is the Red Hat subscription manager password of RHEL machines.
	RHSubscriptionPassword string `json:"rhSubscriptionPassword,omitempty"`
	// Plugin maps the name of each secret the profile hands its plugin (spec.plugin.secrets) to its
	// placeholder. Only the profile's own plugin (spec.plugin) gets these; read them with PluginSecret.
	Plugin map[string]string `json:"plugin,omitempty"`
}
