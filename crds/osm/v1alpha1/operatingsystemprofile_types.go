package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OperatingSystemProfile describes how to turn a fresh VM of one operating system into a Kubernetes node:
// templates for files, units and cloud-init modules, and optionally the WebAssembly plugin that renders them.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=osp,categories=osm
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="OS",type=string,JSONPath=`.spec.osName`
// +kubebuilder:printcolumn:name="OS Version",type=string,JSONPath=`.spec.osVersion`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.version`
// +kubebuilder:printcolumn:name="Utility",type=string,JSONPath=`.spec.provisioningUtility`
// +kubebuilder:printcolumn:name="Plugin",type=string,JSONPath=`.status.plugin.name`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type OperatingSystemProfile struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired profile.
	Spec OperatingSystemProfileSpec `json:"spec"`
	// Status is what the controller observed about the profile.
	// +optional
	Status OperatingSystemProfileStatus `json:"status,omitempty"`
}

// OperatingSystemProfileSpec is the profile's content.
type OperatingSystemProfileSpec struct {
	// OSName is the operating system, e.g. ubuntu. It must be an operating system that a loaded plugin
	// declares, or one of the operating systems OSM ships profiles for.
	OSName OperatingSystem `json:"osName"`
	// OSVersion is the operating system's version, e.g. "22.04".
	// +kubebuilder:validation:MinLength=1
	OSVersion string `json:"osVersion"`
	// Version is the profile's own semantic version with a leading v, e.g. v1.2.0. Any change to the spec must
	// come with a higher version: that is what tells the controller to re-render the machines using it.
	// +kubebuilder:validation:Pattern=`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`
	Version string `json:"version"`
	// ProvisioningUtility is the agent on the node that consumes the configuration.
	// +optional
	// +kubebuilder:default=cloud-init
	ProvisioningUtility ProvisioningUtility `json:"provisioningUtility,omitempty"`
	// SupportedCloudProviders lists the cloud providers this profile renders for, with per-provider data.
	// +kubebuilder:validation:MinItems=1
	SupportedCloudProviders []CloudProviderSpec `json:"supportedCloudProviders"`
	// BootstrapConfig is the small first-stage configuration: it prepares the machine and fetches the
	// provisioning configuration.
	BootstrapConfig OSPConfig `json:"bootstrapConfig"`
	// ProvisioningConfig is the full configuration that turns the machine into a node.
	ProvisioningConfig OSPConfig `json:"provisioningConfig"`
	// Plugin names the WebAssembly plugin that renders this profile. Without a plugin the profile is rendered
	// from its templates alone, exactly as upstream OSM does.
	// +optional
	Plugin *PluginReference `json:"plugin,omitempty"`
	// Plugins continue the pipeline after Plugin: each receives the configuration the one before it returned,
	// with its own config. Extensions that select the profile run after these. They take no secrets (only
	// spec.plugin does).
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(p, !has(p.secrets))",message="only spec.plugin takes secrets"
	Plugins []PluginReference `json:"plugins,omitempty"`
	// AllowedNamespaces lists the namespaces whose MachineDeployments may use this profile (through the
	// k8c.io/operating-system-profile-namespace annotation) besides the profile's own namespace; "*" allows
	// every namespace. Without it, a profile in the controller's namespace (-namespace) may be used from every
	// namespace, as upstream's default profiles are, and a profile in any other namespace only from its own.
	// Whoever may use the profile renders with its plugin secrets, pull secret and extensions; a reference that
	// is not allowed is refused by admission and fails with ProfileNotAllowed. Changing it needs no version
	// bump. See docs/security.md, "Tenancy".
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?)$`
	AllowedNamespaces []string `json:"allowedNamespaces,omitempty"`
}

// OSPConfig is one stage (bootstrap or provisioning) of a profile.
type OSPConfig struct {
	// SupportedContainerRuntimes holds the files and templates that apply per container runtime.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	SupportedContainerRuntimes []ContainerRuntimeSpec `json:"supportedContainerRuntimes,omitempty"`
	// Templates are named Go templates usable from files, units and other templates.
	// +optional
	Templates map[string]string `json:"templates,omitempty"`
	// Units are systemd units to install on the node.
	// +optional
	Units []Unit `json:"units,omitempty"`
	// Files are files to write on the node.
	// +optional
	// +kubebuilder:validation:MaxItems=1000
	Files []File `json:"files,omitempty"`
	// CloudInitModules holds the optional cloud-init modules.
	// +optional
	CloudInitModules *CloudInitModule `json:"modules,omitempty"`
}

// PluginReference names the plugin that renders a profile: either one built into the controller or an OCI
// artifact pinned by digest.
//
// +kubebuilder:validation:XValidation:rule="has(self.builtin) != has(self.image)",message="exactly one of builtin or image must be set"
type PluginReference struct {
	// Builtin is the name of a plugin embedded in the controller, e.g. "ubuntu".
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Builtin string `json:"builtin,omitempty"`
	// Image is an OCI reference to a plugin artifact, pinned by digest:
	// registry.example.com/osm/debian@sha256:<64 hex>. A tag may precede the digest for readability; the
	// digest is what is pulled and run.
	// +optional
	// +kubebuilder:validation:Pattern=`^[^@\s]+@sha256:[a-f0-9]{64}$`
	Image string `json:"image,omitempty"`
	// PullSecret names a kubernetes.io/dockerconfigjson Secret in the controller's namespace holding
	// credentials for the image's registry.
	// +optional
	PullSecret string `json:"pullSecret,omitempty"`
	// Config is handed to the plugin on every call. Its keys are described by the plugin's config schema.
	// +optional
	Config map[string]string `json:"config,omitempty"`
	// Secrets hand the plugin credentials it writes into the node's configuration (a registration code, a
	// mirror password) without the plugin ever seeing them: the plugin gets a placeholder per name
	// (context.secrets.plugin), and the controller substitutes the Secret's value only in the user-data
	// Secrets it writes. Only a profile's spec.plugin takes secrets, and only from Secrets in the profile's
	// own namespace.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Secrets []PluginSecret `json:"secrets,omitempty"`
}

// PluginSecret is one credential a profile hands its plugin.
type PluginSecret struct {
	// Name is how the plugin refers to the secret (its context.secrets.plugin key and, when the plugin
	// declares it, its configSchema option of type secret): lower case letters, digits and dashes.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// SecretRef is the key of a Secret in the profile's namespace that holds the value.
	SecretRef PluginSecretKeyRef `json:"secretRef"`
}

// PluginSecretKeyRef names a key of a Secret in the profile's namespace. There is no namespace field: a
// profile can only hand out what its own namespace holds.
type PluginSecretKeyRef struct {
	// Name is the Secret's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Key is the key in the Secret's data.
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
}

// OperatingSystemProfileStatus is what the controller observed about a profile.
type OperatingSystemProfileStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions are the profile's conditions: Ready and PluginResolved.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Plugin is the plugin the profile resolved to.
	// +optional
	Plugin *ResolvedPlugin `json:"plugin,omitempty"`
}

// ResolvedPlugin identifies exactly which module renders a profile.
type ResolvedPlugin struct {
	// Name is the plugin's name from its metadata.
	Name string `json:"name"`
	// Version is the plugin's version from its metadata.
	// +optional
	Version string `json:"version,omitempty"`
	// Source is "builtin" or the OCI reference the plugin was pulled from.
	Source string `json:"source"`
	// Digest is the sha256 digest of the wasm module that runs.
	Digest string `json:"digest"`
}

// OperatingSystemProfileList is a list of OperatingSystemProfiles.
//
// +kubebuilder:object:root=true
type OperatingSystemProfileList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []OperatingSystemProfile `json:"items"`
}
