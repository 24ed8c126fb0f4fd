package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OperatingSystemConfig is the rendered configuration for the machines of one MachineDeployment. It holds no
// credentials: tokens and registry auth live only in the Secrets machine-controller reads.
//
// It has no status subresource (neither has upstream's): OSM is its only writer and never updates its spec (a
// new render replaces the object), so it creates spec and status in one write.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=osc,categories=osm
// +kubebuilder:printcolumn:name="OS",type=string,JSONPath=`.spec.osName`
// +kubebuilder:printcolumn:name="OS Version",type=string,JSONPath=`.spec.osVersion`
// +kubebuilder:printcolumn:name="Cloud",type=string,JSONPath=`.spec.cloudProvider.name`
// +kubebuilder:printcolumn:name="Utility",type=string,JSONPath=`.spec.provisioningUtility`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Drifted",type=string,JSONPath=`.status.conditions[?(@.type=="Drifted")].status`
// +kubebuilder:printcolumn:name="Joined",type=integer,JSONPath=`.status.nodes.joined`
// +kubebuilder:printcolumn:name="Booting",type=integer,JSONPath=`.status.nodes.booting`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.nodes.failed`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type OperatingSystemConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the rendered configuration.
	Spec OperatingSystemConfigSpec `json:"spec"`
	// Status says what rendered this configuration and which Secrets were produced from it.
	// +optional
	Status OperatingSystemConfigStatus `json:"status,omitempty"`
}

// OperatingSystemConfigSpec is a rendered configuration.
type OperatingSystemConfigSpec struct {
	// OSName is the operating system, e.g. ubuntu.
	OSName OperatingSystem `json:"osName"`
	// OSVersion is the operating system's version.
	OSVersion string `json:"osVersion"`
	// CloudProvider is the cloud provider the configuration was rendered for.
	CloudProvider CloudProviderSpec `json:"cloudProvider"`
	// BootstrapConfig is the rendered first stage.
	BootstrapConfig OSCConfig `json:"bootstrapConfig"`
	// ProvisioningConfig is the rendered second stage.
	ProvisioningConfig OSCConfig `json:"provisioningConfig"`
	// ProvisioningUtility is the agent on the node that consumes the configuration.
	// +optional
	// +kubebuilder:default=cloud-init
	ProvisioningUtility ProvisioningUtility `json:"provisioningUtility,omitempty"`
}

// OSCConfig is one rendered stage.
type OSCConfig struct {
	// Units are systemd units to install on the node.
	// +optional
	Units []Unit `json:"units,omitempty"`
	// Files are files to write on the node.
	// +optional
	// +kubebuilder:validation:MaxItems=1000
	Files []File `json:"files,omitempty"`
	// UserSSHKeys are the SSH public keys authorized for the default user.
	// +optional
	UserSSHKeys []string `json:"userSSHKeys,omitempty"`
	// CloudInitModules holds the cloud-init modules.
	// +optional
	CloudInitModules *CloudInitModule `json:"modules,omitempty"`
}

// OperatingSystemConfigStatus says what rendered a configuration and what it produced.
type OperatingSystemConfigStatus struct {
	// ObservedGeneration is the generation of the spec the status describes: always 1, as OSM never updates
	// an OSC's spec. Later generations count status writes (there is no status subresource).
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions are the configuration's conditions: Ready, Rendered, SecretsWritten, Drifted and RollingOut.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Profile is the profile (namespace/name@version) the configuration was rendered from.
	// +optional
	Profile string `json:"profile,omitempty"`
	// Plugin is the plugin that rendered the configuration, if any.
	// +optional
	Plugin *ResolvedPlugin `json:"plugin,omitempty"`
	// Plugins are the plugins of the profile's pipeline after the first (spec.plugins), in order.
	// +optional
	Plugins []ResolvedPlugin `json:"plugins,omitempty"`
	// Extensions are the OperatingSystemProfileExtensions applied, in the order they applied.
	// +optional
	Extensions []AppliedExtension `json:"extensions,omitempty"`
	// MachineDeploymentRevision is the MachineDeployment revision the configuration was rendered for.
	// +optional
	MachineDeploymentRevision string `json:"machineDeploymentRevision,omitempty"`
	// BootstrapSecret is the namespace/name of the Secret holding the bootstrap user-data.
	// +optional
	BootstrapSecret string `json:"bootstrapSecret,omitempty"`
	// ProvisioningSecret is the namespace/name of the Secret holding the provisioning user-data.
	// +optional
	ProvisioningSecret string `json:"provisioningSecret,omitempty"`
	// BootstrapSize is the size in bytes of the bootstrap user-data.
	// +optional
	BootstrapSize int64 `json:"bootstrapSize,omitempty"`
	// ProvisioningSize is the size in bytes of the provisioning user-data.
	// +optional
	ProvisioningSize int64 `json:"provisioningSize,omitempty"`
	// Drift is set while the machines of the MachineDeployment's current revision were provisioned from a
	// configuration other than this one (docs/drift.md); the Drifted condition says the same.
	// +optional
	Drift *ConfigDrift `json:"drift,omitempty"`
	// Nodes summarises what the MachineDeployment's machines reported about their bootstrap (their
	// OperatingSystemNodeReport): machines by phase, and the failing ones with step and log tail.
	// +optional
	Nodes *NodeBootstrapSummary `json:"nodes,omitempty"`
}

// ConfigDrift says since when and why the machines of a MachineDeployment revision run a configuration other
// than the one OSM renders now. Machines of a revision are provisioned from the user-data as it was when the
// revision got its first render; a re-render without a new revision (a profile bump, a new plugin, an
// extension, a changed controller flag or CA) only reaches machines created afterwards.
type ConfigDrift struct {
	// Since is when the configuration first differed from the revision's.
	Since metav1.Time `json:"since"`
	// Revision is the MachineDeployment revision whose machines drifted.
	// +optional
	Revision string `json:"revision,omitempty"`
	// Inputs are the render inputs that changed since the revision's first render: profile, plugin,
	// extensions, flags, ca, cluster, machineDeployment, build.
	// +optional
	Inputs []string `json:"inputs,omitempty"`
	// ProvisionedDigest is the digest of the configuration the revision's machines were provisioned from.
	// +optional
	ProvisionedDigest string `json:"provisionedDigest,omitempty"`
	// CurrentDigest is the digest of this configuration, the one a rollout would bring.
	// +optional
	CurrentDigest string `json:"currentDigest,omitempty"`
	// ProvisionedProfileVersion is the profile version the revision's machines were provisioned from.
	// +optional
	ProvisionedProfileVersion string `json:"provisionedProfileVersion,omitempty"`
}

// OperatingSystemConfigList is a list of OperatingSystemConfigs.
//
// +kubebuilder:object:root=true
type OperatingSystemConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []OperatingSystemConfig `json:"items"`
}
