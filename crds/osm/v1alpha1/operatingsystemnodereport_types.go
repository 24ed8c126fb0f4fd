package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OperatingSystemNodeReport holds what the machines of one MachineDeployment reported about their bootstrap:
// the phase each reached and, for a machine that failed, the step, its exit code and the last lines of its
// output. The controller creates one per MachineDeployment beside the provisioning Secret (same namespace,
// same name), and the MachineDeployment's node credential may patch exactly that object's status (RBAC by
// resource name): each machine writes its own entry of status.machines with a server-side apply patch under
// a field manager of its own, so machines never conflict. The controller folds the reports into the OSC's
// status.nodes; nothing in a report ever feeds a render.
//
// Every bound below is enforced by the API server, whatever a node sends (sdk/SPEC.md §11).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=osnr,categories=osm
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type OperatingSystemNodeReport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Status is written by the machines, each its own entry.
	// +optional
	Status OperatingSystemNodeReportStatus `json:"status,omitempty"`
}

// OperatingSystemNodeReportStatus holds the machines' reports.
type OperatingSystemNodeReportStatus struct {
	// Machines are the reports by machine name (the node's /etc/machine-name, else its host name).
	// +optional
	// +kubebuilder:validation:MaxProperties=500
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253 && k.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$'))",message="machine names are DNS subdomains of at most 253 characters"
	Machines map[string]MachineBootstrapReport `json:"machines,omitempty"`
}

// BootstrapPhase is how far a machine's bootstrap got.
// +kubebuilder:validation:Enum=Fetched;Applied;PackagesInstalled;RuntimeUp;KubeletStarted;NodeRegistered;Failed
type BootstrapPhase string

// The phases, in the order a machine reaches them, and Failed.
const (
	// PhaseFetched: osm-bootstrap fetched the provisioning data.
	PhaseFetched BootstrapPhase = "Fetched"
	// PhaseApplied: the provisioning utility applied it and osm-setup runs.
	PhaseApplied BootstrapPhase = "Applied"
	// PhasePackagesInstalled: osm-setup installed the packages and binaries.
	PhasePackagesInstalled BootstrapPhase = "PackagesInstalled"
	// PhaseRuntimeUp: containerd serves the CRI.
	PhaseRuntimeUp BootstrapPhase = "RuntimeUp"
	// PhaseKubeletStarted: the kubelet runs.
	PhaseKubeletStarted BootstrapPhase = "KubeletStarted"
	// PhaseNodeRegistered: the kubelet registered the Node (read back with the kubelet's own credential).
	PhaseNodeRegistered BootstrapPhase = "NodeRegistered"
	// PhaseFailed: a step failed; step, exitCode and logTail say which and why.
	PhaseFailed BootstrapPhase = "Failed"
)

// BootstrapPhases are the phases of a bootstrap that goes well, in order.
var BootstrapPhases = []BootstrapPhase{PhaseFetched, PhaseApplied, PhasePackagesInstalled, PhaseRuntimeUp, PhaseKubeletStarted, PhaseNodeRegistered}

// MachineBootstrapReport is one machine's report.
type MachineBootstrapReport struct {
	// Phase is the last phase the machine reached, or Failed.
	Phase BootstrapPhase `json:"phase"`
	// Step is the step that failed (Failed only), e.g. packages or container-runtime.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Step string `json:"step,omitempty"`
	// ExitCode is the failing step's exit code (Failed only).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=255
	ExitCode *int32 `json:"exitCode,omitempty"`
	// LogTail are the last lines of the failing step's output, redacted on the node by allow-list: only
	// printable characters of a safe set, no word that looks like a secret (sdk/SPEC.md §11).
	// +optional
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:MaxLength=200
	// +kubebuilder:validation:items:Pattern=`^[ -!#-\[\]-~]*$`
	LogTail []string `json:"logTail,omitempty"`
	// Time is when the node reported, by the node's clock.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
}

// OperatingSystemNodeReportList is a list of OperatingSystemNodeReports.
//
// +kubebuilder:object:root=true
type OperatingSystemNodeReportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []OperatingSystemNodeReport `json:"items"`
}

// NodeBootstrapSummary is the OSC's summary of its machines' bootstrap reports.
type NodeBootstrapSummary struct {
	// Phases counts the reporting machines by their phase.
	// +optional
	Phases map[BootstrapPhase]int32 `json:"phases,omitempty"`
	// Joined is the number of machines whose Node registered.
	Joined int32 `json:"joined"`
	// Booting is the number of machines on their way.
	Booting int32 `json:"booting"`
	// Failed is the number of machines whose bootstrap failed.
	Failed int32 `json:"failed"`
	// Failing names the failing machines (at most 20, by name), with the failing step and its log tail.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	Failing []FailingMachine `json:"failing,omitempty"`
}

// FailingMachine is a machine whose bootstrap failed.
type FailingMachine struct {
	// Name is the machine's name.
	Name string `json:"name"`
	// Step is the step that failed.
	Step string `json:"step"`
	// ExitCode is its exit code.
	// +optional
	ExitCode *int32 `json:"exitCode,omitempty"`
	// LogTail are the last lines of its output, as the node redacted them.
	// +optional
	LogTail []string `json:"logTail,omitempty"`
	// Time is when the machine reported the failure.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
}
