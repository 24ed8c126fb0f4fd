package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime"
)

// OperatingSystem is the name of an operating system, e.g. "ubuntu" or "flatcar".
//
// Upstream OSM restricts this to a closed list. Here it is an open string: the set of valid names is the set of
// operating systems the loaded plugins declare, checked by the admission webhook, so a new OS never needs a new
// CRD.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
type OperatingSystem string

// Operating systems OSM ships default profiles for.
const (
	OperatingSystemUbuntu     OperatingSystem = "ubuntu"
	OperatingSystemFlatcar    OperatingSystem = "flatcar"
	OperatingSystemRHEL       OperatingSystem = "rhel"
	OperatingSystemRockyLinux OperatingSystem = "rockylinux"
	OperatingSystemAmazon     OperatingSystem = "amzn2"
	OperatingSystemDebian     OperatingSystem = "debian"
)

// ProvisioningUtility is the agent on the node that consumes the rendered configuration.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
type ProvisioningUtility string

// Provisioning utilities the host can encode for without a plugin. A plugin with an osm_encode export may
// declare others.
const (
	ProvisioningUtilityCloudInit ProvisioningUtility = "cloud-init"
	ProvisioningUtilityIgnition  ProvisioningUtility = "ignition"
)

// ContainerRuntime names a container runtime section of a profile.
// +kubebuilder:validation:Enum=docker;containerd
type ContainerRuntime string

// Container runtimes upstream profiles may list. Docker is deprecated upstream and is a no-op there; it is kept so
// that such profiles still apply.
const (
	ContainerRuntimeContainerd ContainerRuntime = "containerd"
	ContainerRuntimeDocker     ContainerRuntime = "docker"
)

// CloudProviderSpec contains the OS image reference for a specific cloud provider.
type CloudProviderSpec struct {
	// Name is the machine-controller cloud provider name, e.g. aws, openstack, vsphere.
	// Upstream OSM restricts this to a closed list; OSM accepts any provider a plugin supports.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// Spec is provider-specific data, handed to templates and plugins unchanged.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Spec runtime.RawExtension `json:"spec,omitempty"`
}

// Unit is a systemd unit.
type Unit struct {
	// Name is the unit's file name, e.g. kubelet.service.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Enable describes whether the unit is enabled.
	// +optional
	Enable *bool `json:"enable,omitempty"`
	// Mask describes whether the unit is masked.
	// +optional
	Mask *bool `json:"mask,omitempty"`
	// Content is the unit file's content. Empty means the unit comes with the OS and only drop-ins are added.
	// +optional
	Content *string `json:"content,omitempty"`
	// DropIns is a list of drop-ins for this unit.
	// +optional
	DropIns []DropIn `json:"dropIns,omitempty"`
}

// DropIn is a drop-in configuration for a systemd unit.
type DropIn struct {
	// Name is the drop-in's file name, e.g. 10-proxy.conf.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Content is the drop-in's content.
	Content string `json:"content"`
}

// File is a file written to the node's file system.
type File struct {
	// Path is the absolute path of the file on the node.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:Pattern=`^/`
	Path string `json:"path"`
	// Permissions are the file's mode bits written as decimal digits that are read as octal (644 means 0644),
	// as upstream OSM defines them. Each digit must be 0-7.
	// +optional
	// +kubebuilder:default=644
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=7777
	// +kubebuilder:validation:XValidation:rule="self % 10 < 8 && self / 10 % 10 < 8 && self / 100 % 10 < 8 && self / 1000 < 8",message="permissions must be octal digits written in decimal, e.g. 644 or 755"
	Permissions *int32 `json:"permissions,omitempty"`
	// Content is the file's content.
	Content FileContent `json:"content"`
}

// FileContent holds a file's content.
type FileContent struct {
	// Inline is the file's data, inlined.
	// +optional
	Inline *FileContentInline `json:"inline,omitempty"`
}

// FileContentInline contains a file's data and its encoding.
type FileContentInline struct {
	// Encoding is how the content travels inside cloud-config user-data: empty for plain text, b64 or base64
	// for base64, gzip/gz (with or without +base64/+b64) for gzip then base64. As in upstream OSM, Data itself
	// is always the plain content; Ignition ignores the encoding and picks its own transport.
	// +optional
	// +kubebuilder:validation:Enum="";b64;base64;gzip;gz;gzip+base64;gz+base64;gzip+b64;gz+b64
	Encoding string `json:"encoding,omitempty"`
	// Data is the file's plain content; in a profile, a Go template.
	Data string `json:"data"`
}

// ContainerRuntimeSpec holds the files and templates that apply when a container runtime is selected.
type ContainerRuntimeSpec struct {
	// Name of the container runtime.
	Name ContainerRuntime `json:"name"`
	// Files to add to the main files list when this container runtime is selected.
	// +kubebuilder:validation:MaxItems=1000
	Files []File `json:"files"`
	// Templates to add to the available templates when this container runtime is selected.
	// +optional
	Templates map[string]string `json:"templates,omitempty"`
}

// CloudInitModule holds the cloud-init modules OSM supports.
type CloudInitModule struct {
	// BootCMD runs commands very early in the boot process, only slightly after a boothook would run.
	// +optional
	BootCMD []string `json:"bootcmd,omitempty"`
	// RHSubscription registers a Red Hat system, by username and password or by activation key and org.
	// +optional
	RHSubscription map[string]string `json:"rh_subscription,omitempty"`
	// RunCMD runs commands at an rc.local-like level with output to the console.
	// +optional
	RunCMD []string `json:"runcmd,omitempty"`
	// YumRepos adds yum repository configuration to the system.
	// +optional
	YumRepos map[string]map[string]string `json:"yum_repos,omitempty"`
	// YumRepoDir is the directory where yum repository files are written. Default: /etc/yum.repos.d.
	// +optional
	YumRepoDir string `json:"yum_repo_dir,omitempty"`
}
