package v1alpha1

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
)

// ProviderConfig is the content of spec.template.spec.providerSpec.value as machine-controller defines it.
// Only the fields OSM reads are typed; provider and OS specs stay raw because their shape belongs to the
// provider and to the OS plugin.
//
// +kubebuilder:object:generate=false
type ProviderConfig struct {
	SSHPublicKeys        []string             `json:"sshPublicKeys,omitempty"`
	CAPublicKey          string               `json:"caPublicKey,omitempty"`
	CloudProvider        string               `json:"cloudProvider"`
	CloudProviderSpec    runtime.RawExtension `json:"cloudProviderSpec,omitempty"`
	OperatingSystem      string               `json:"operatingSystem"`
	OperatingSystemSpec  runtime.RawExtension `json:"operatingSystemSpec,omitempty"`
	Network              *NetworkConfig       `json:"network,omitempty"`
	OverwriteCloudConfig *string              `json:"overwriteCloudConfig,omitempty"`
}

// NetworkConfig is a machine's static network configuration, when the provider needs one.
//
// +kubebuilder:object:generate=false
type NetworkConfig struct {
	CIDR     string    `json:"cidr,omitempty"`
	Gateway  string    `json:"gateway,omitempty"`
	DNS      DNSConfig `json:"dns,omitempty"`
	IPFamily IPFamily  `json:"ipFamily,omitempty"`
}

// DNSConfig lists DNS servers.
//
// +kubebuilder:object:generate=false
type DNSConfig struct {
	Servers []string `json:"servers,omitempty"`
}

// IPFamily is machine-controller's IP family selector.
type IPFamily string

// IP families as machine-controller spells them. Empty means IPv4.
const (
	IPFamilyIPv4     IPFamily = "IPv4"
	IPFamilyIPv6     IPFamily = "IPv6"
	IPFamilyIPv4IPv6 IPFamily = "IPv4+IPv6"
	IPFamilyIPv6IPv4 IPFamily = "IPv6+IPv4"
)

// IsDualStack reports whether the family asks for both IPv4 and IPv6.
func (f IPFamily) IsDualStack() bool { return f == IPFamilyIPv4IPv6 || f == IPFamilyIPv6IPv4 }

// ProviderConfig decodes the MachineDeployment's provider configuration.
func (md *MachineDeployment) ProviderConfig() (*ProviderConfig, error) {
	v := md.Spec.Template.Spec.ProviderSpec.Value
	if v == nil || len(v.Raw) == 0 {
		return nil, fmt.Errorf("spec.template.spec.providerSpec.value is empty")
	}
	pc := &ProviderConfig{}
	if err := json.Unmarshal(v.Raw, pc); err != nil {
		return nil, fmt.Errorf("spec.template.spec.providerSpec.value: %w", err)
	}
	if pc.CloudProvider == "" {
		return nil, fmt.Errorf("spec.template.spec.providerSpec.value.cloudProvider is empty")
	}
	if pc.OperatingSystem == "" {
		return nil, fmt.Errorf("spec.template.spec.providerSpec.value.operatingSystem is empty")
	}
	return pc, nil
}
