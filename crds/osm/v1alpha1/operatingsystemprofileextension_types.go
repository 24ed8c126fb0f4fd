package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OperatingSystemProfileExtension adds site configuration — a CA, an NTP server, a sysctl, a package, a file, a
// unit, or a small plugin — to the profiles it selects, without copying them. Profiles keep receiving their own
// upgrades (a new default profile version re-renders with the extensions still applied).
//
// An extension selects profiles in its own namespace. Extensions apply after the profile's templates and plugins,
// in ascending spec.order and then by name, so the result does not depend on the order the API server lists them.
// Two extensions that write the same file path, unit or drop-in conflict, unless the later one lists the path or
// unit name in spec.<stage>.overrides: a conflict fails the render of the machines that use the profile with the
// ExtensionConflict reason, it never silently keeps the last writer.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=ospx,categories=osm
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Order",type=integer,JSONPath=`.spec.order`
// +kubebuilder:printcolumn:name="Profiles",type=string,JSONPath=`.status.profiles`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type OperatingSystemProfileExtension struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what the extension adds and to which profiles.
	Spec OperatingSystemProfileExtensionSpec `json:"spec"`
	// Status says which profiles the extension applies to and whether it renders.
	// +optional
	Status OperatingSystemProfileExtensionStatus `json:"status,omitempty"`
}

// OperatingSystemProfileExtensionSpec is an extension's content.
type OperatingSystemProfileExtensionSpec struct {
	// Selector chooses the profiles the extension applies to.
	Selector ProfileSelector `json:"selector"`
	// Order places the extension among the others that select the same profile: lower first, then by name.
	// +optional
	// +kubebuilder:validation:Minimum=-1000
	// +kubebuilder:validation:Maximum=1000
	Order int32 `json:"order,omitempty"`
	// BootstrapConfig is added to the bootstrap stage.
	// +optional
	BootstrapConfig *ExtensionConfig `json:"bootstrapConfig,omitempty"`
	// ProvisioningConfig is added to the provisioning stage.
	// +optional
	ProvisioningConfig *ExtensionConfig `json:"provisioningConfig,omitempty"`
	// Plugins run after the profile's own plugins, in list order, on each stage's configuration (after this
	// extension's files, units and modules were added), and return it changed. They take no secrets: only a
	// profile's spec.plugin does.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(p, !has(p.secrets))",message="only a profile's spec.plugin takes secrets"
	Plugins []PluginReference `json:"plugins,omitempty"`
}

// ProfileSelector chooses profiles. Every field that is set must match (they are ANDed); within a list, any entry
// matches (ORed). An empty selector selects every profile in the namespace.
type ProfileSelector struct {
	// Names are profile names.
	// +optional
	Names []string `json:"names,omitempty"`
	// LabelSelector selects profiles by label.
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	// OSNames are operating systems, e.g. ubuntu, debian.
	// +optional
	OSNames []OperatingSystem `json:"osNames,omitempty"`
	// OSVersions are operating system versions, e.g. "24.04".
	// +optional
	OSVersions []string `json:"osVersions,omitempty"`
	// CloudProviders are machine-controller cloud provider names; the extension applies to the machines of those
	// providers only.
	// +optional
	CloudProviders []string `json:"cloudProviders,omitempty"`
}

// ExtensionConfig is what an extension adds to one stage. Its files are Go templates, rendered with its own
// templates and the same data as the profile's; units and modules are taken as they are, as in a profile.
type ExtensionConfig struct {
	// Templates are named Go templates usable from this extension's files and units.
	// +optional
	Templates map[string]string `json:"templates,omitempty"`
	// Files are added to the stage.
	// +optional
	// +kubebuilder:validation:MaxItems=100
	Files []File `json:"files,omitempty"`
	// Units are added to the stage. A unit without content that the stage already has only adds its drop-ins.
	// +optional
	// +kubebuilder:validation:MaxItems=100
	Units []Unit `json:"units,omitempty"`
	// CloudInitModules are appended: bootcmd and runcmd lines after the stage's own, yum repositories added.
	// +optional
	CloudInitModules *CloudInitModule `json:"modules,omitempty"`
	// Overrides lists the file paths, unit names and "<unit>/<drop-in>" names this extension may replace when the
	// stage (or an earlier extension) already has them. Anything else that collides is a conflict.
	// +optional
	Overrides []string `json:"overrides,omitempty"`
}

// OperatingSystemProfileExtensionStatus is what the controller observed about an extension.
type OperatingSystemProfileExtensionStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Profiles are the names of the profiles the extension applies to, sorted.
	// +optional
	Profiles []string `json:"profiles,omitempty"`
	// Conditions are the extension's conditions: Ready (its templates parse, its plugins resolve, it conflicts
	// with no other extension on the profiles it selects).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// OperatingSystemProfileExtensionList is a list of OperatingSystemProfileExtensions.
//
// +kubebuilder:object:root=true
type OperatingSystemProfileExtensionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []OperatingSystemProfileExtension `json:"items"`
}

// AppliedExtension names an extension a configuration was rendered with.
type AppliedExtension struct {
	// Name is the extension's name, in the profile's namespace.
	Name string `json:"name"`
	// Generation is the extension's metadata.generation that was applied.
	Generation int64 `json:"generation"`
}

// Reasons of extensions, and of the configurations they apply to.
const (
	// ReasonExtensionConflict means two extensions (or an extension and the profile) write the same file path,
	// unit or drop-in, and the later one does not declare that it overrides it.
	ReasonExtensionConflict = "ExtensionConflict"
	// ReasonExtensionInvalid means an extension's templates do not render or its plugins fail.
	ReasonExtensionInvalid = "ExtensionInvalid"
)
