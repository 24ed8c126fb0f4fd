package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Annotations on a MachineDeployment that OSM reads or writes.
const (
	// AnnotationOSP names the OperatingSystemProfile a MachineDeployment uses.
	AnnotationOSP = "k8c.io/operating-system-profile"
	// AnnotationOSPNamespace names the namespace of that profile; the controller's -namespace by default.
	AnnotationOSPNamespace = "k8c.io/operating-system-profile-namespace"
	// AnnotationRevision is the MachineDeployment's revision, maintained by machine-controller.
	AnnotationRevision = "machinedeployment.clusters.k8s.io/revision"
	// AnnotationKubeletConfigPrefix prefixes annotations that override kubelet configuration keys, e.g.
	// v1.kubelet-config.machine-controller.kubermatic.io/MaxPods.
	AnnotationKubeletConfigPrefix = "v1.kubelet-config.machine-controller.kubermatic.io/"
)

// MachineDeployment is machine-controller's declarative set of identical machines.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=md
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved, legacy API"
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.template.spec.providerSpec.value.cloudProvider`
// +kubebuilder:printcolumn:name="OS",type=string,JSONPath=`.spec.template.spec.providerSpec.value.operatingSystem`
// +kubebuilder:printcolumn:name="Kubelet",type=string,JSONPath=`.spec.template.spec.versions.kubelet`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MachineDeployment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MachineDeploymentSpec   `json:"spec,omitempty"`
	Status MachineDeploymentStatus `json:"status,omitempty"`
}

// MachineDeploymentSpec is the desired state of a MachineDeployment.
type MachineDeploymentSpec struct {
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// +optional
	Selector metav1.LabelSelector `json:"selector,omitempty"`
	// Template describes the machines that will be created.
	Template MachineTemplateSpec `json:"template"`
	// Strategy is machine-controller's replacement strategy; OSM does not read it.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Strategy *runtime.RawExtension `json:"strategy,omitempty"`
	// +optional
	MinReadySeconds *int32 `json:"minReadySeconds,omitempty"`
	// +optional
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`
	// +optional
	Paused bool `json:"paused,omitempty"`
	// +optional
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`
}

// MachineTemplateSpec describes the machines a MachineDeployment creates.
type MachineTemplateSpec struct {
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec MachineSpec `json:"spec,omitempty"`
}

// MachineSpec is the desired state of a machine.
type MachineSpec struct {
	// ObjectMeta is applied to the Node the machine becomes.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Taints are applied to the Node when it registers.
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`
	// ProviderSpec holds the provider configuration; see ProviderConfig.
	ProviderSpec ProviderSpec `json:"providerSpec"`
	// Versions holds the versions of Kubernetes components on the machine.
	// +optional
	Versions MachineVersionInfo `json:"versions,omitempty"`
	// +optional
	ProviderID *string `json:"providerID,omitempty"`
}

// ProviderSpec holds machine-controller's provider configuration.
type ProviderSpec struct {
	// Value is a ProviderConfig, kept raw so that fields OSM does not know survive.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Value *runtime.RawExtension `json:"value,omitempty"`
}

// MachineVersionInfo holds the versions of Kubernetes components on a machine.
type MachineVersionInfo struct {
	// Kubelet is the kubelet version, e.g. 1.33.2 or v1.33.2.
	// +optional
	Kubelet string `json:"kubelet,omitempty"`
}

// MachineDeploymentStatus is the observed state of a MachineDeployment.
type MachineDeploymentStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas,omitempty"`
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// +optional
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`
	// +optional
	UnavailableReplicas int32 `json:"unavailableReplicas,omitempty"`
}

// MachineDeploymentList is a list of MachineDeployments.
//
// +kubebuilder:object:root=true
type MachineDeploymentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []MachineDeployment `json:"items"`
}
