package render

import (
	"net"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
)

// TemplateData is what profile templates see. Field names and types are upstream OSM's, so an upstream
// profile renders the same files; credentials are placeholders (see Placeholders).
type TemplateData struct {
	KubeVersion                string
	KubeletConfiguration       string
	KubeletSystemdUnit         string
	BootstrapKubeconfig        string
	InTreeCCMAvailable         bool
	CNIVersion                 string
	ClusterDNSIPs              []net.IP
	KubernetesCACert           string
	HostCACert                 string
	ServerAddress              string
	CloudConfig                string
	ContainerRuntime           string
	CloudProviderName          string
	NetworkConfig              *clusterv1alpha1.NetworkConfig
	ExternalCloudProvider      bool
	InitialTaints              string
	HTTPProxy                  *string
	NoProxy                    *string
	ContainerRuntimeConfig     string
	ContainerRuntimeAuthConfig string
	KubeletFeatureGates        map[string]bool
	RHSubscription             map[string]string
	NetworkIPFamily            string

	KubeletConfig
	OSConfigs

	// Token is the credential the node uses to fetch its provisioning data. Upstream hands out a token that
	// reads every Secret of cloud-init-settings; OSM's reads only this MachineDeployment's.
	Token                         string
	ServerURL                     string
	SecretName                    string
	BootstrapKubeconfigSecretName string

	// OSM additions, unknown to upstream profiles.
	BinaryBaseURL         string
	MachineDeploymentName string
	MachineDeploymentNS   string
	KubernetesCASecretRef string
}

func (m *machine) templateData(containerRuntimeConfig string) *TemplateData {
	s := m.Settings
	md := m.MachineDeployment
	d := &TemplateData{
		KubeVersion:                   m.kubeVersion(),
		BootstrapKubeconfig:           BootstrapKubeconfig(m.serverURL, m.caCert, Placeholders.BootstrapToken),
		InTreeCCMAvailable:            m.inTreeCCMAvailable(),
		ClusterDNSIPs:                 s.ClusterDNSIPs,
		KubernetesCACert:              m.caCert,
		HostCACert:                    s.HostCACert,
		CloudConfig:                   m.cloudConfigPlaceholder(),
		ContainerRuntime:              s.ContainerRuntime,
		CloudProviderName:             m.cloudProvider(),
		NetworkConfig:                 m.provider.Network,
		ExternalCloudProvider:         s.ExternalCloudProvider,
		InitialTaints:                 s.InitialTaints,
		HTTPProxy:                     optional(s.HTTPProxy),
		NoProxy:                       optional(s.NoProxy),
		ContainerRuntimeConfig:        containerRuntimeConfig,
		KubeletFeatureGates:           s.KubeletFeatureGates,
		RHSubscription:                m.rhSubscription(),
		NetworkIPFamily:               m.ipFamily(),
		KubeletConfig:                 m.kubelet,
		OSConfigs:                     m.os,
		Token:                         Placeholders.ProvisioningToken,
		ServerURL:                     m.serverURL,
		SecretName:                    ProvisioningSecretName(md),
		BootstrapKubeconfigSecretName: KubeletBootstrapSecretName(md),
		BinaryBaseURL:                 s.BinaryBaseURL,
		MachineDeploymentName:         md.Name,
		MachineDeploymentNS:           md.Namespace,
	}
	d.RhelConfig.RHELSubscriptionManagerPassword = m.rhPasswordPlaceholder()
	return d
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// cloudConfigPlaceholder stands for the cloud provider's config file when the MachineDeployment provides one
// (overwriteCloudConfig). Clusters on Kubernetes 1.29+ run out-of-tree cloud controllers and need none.
func (m *machine) cloudConfigPlaceholder() string {
	if m.provider.OverwriteCloudConfig != nil && *m.provider.OverwriteCloudConfig != "" {
		return Placeholders.CloudConfig
	}
	return ""
}

func (m *machine) rhPasswordPlaceholder() string {
	if m.os.RhelConfig.RHELSubscriptionManagerPassword == "" {
		return ""
	}
	return Placeholders.RHSubscriptionPassword
}

// rhSubscription is the rh_subscription module upstream injects into both stages of RHEL machines.
func (m *machine) rhSubscription() map[string]string {
	if m.provider.OperatingSystem != "rhel" {
		return nil
	}
	auto := "false"
	if m.os.RhelConfig.AttachSubscription {
		auto = "true"
	}
	return map[string]string{
		"username":    m.os.RhelConfig.RHELSubscriptionManagerUser,
		"password":    m.rhPasswordPlaceholder(),
		"auto-attach": auto,
	}
}

// secretValues are the credentials that come from the MachineDeployment itself.
func (m *machine) secretValues() SecretValues {
	v := SecretValues{RHSubscriptionPassword: m.os.RhelConfig.RHELSubscriptionManagerPassword}
	if m.provider.OverwriteCloudConfig != nil {
		v.CloudConfig = *m.provider.OverwriteCloudConfig
	}
	return v
}
