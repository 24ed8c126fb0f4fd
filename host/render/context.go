package render

import (
	"encoding/json"

	"github.com/osmhq/osm/sdk/abi"
)

// renderContext is what a plugin sees: the same facts as the template data, in the ABI's shape.
func (m *machine) renderContext(cr crConfig) abi.RenderContext {
	s, pc := m.Settings, m.provider
	var dns []string
	for _, ip := range s.ClusterDNSIPs {
		dns = append(dns, ip.String())
	}
	ctx := abi.RenderContext{
		// Placeholders unless a value is not a DNS name (identity.go); the real values go into the output.
		MachineDeployment: m.identity.shown,
		OperatingSystem:   abi.OSInfo{Name: pc.OperatingSystem, Version: m.Profile.Spec.OSVersion, Spec: OSSpec(pc.OperatingSystemSpec.Raw)},
		CloudProvider: abi.CloudProvider{
			Name:           pc.CloudProvider,
			Spec:           json.RawMessage(m.providerSpec.Spec.Raw),
			MachineSpec:    ProviderSpec(pc.CloudProviderSpec.Raw),
			External:       s.ExternalCloudProvider,
			HasCloudConfig: m.cloudConfigPlaceholder() != "",
		},
		Cluster: abi.Cluster{
			ServerURL: m.serverURL,
			CACert:    m.caCert,
			DNSIPs:    dns,
			Domain:    s.ClusterDomain,
			ProvisioningSecret: abi.SecretRef{
				Namespace: s.CloudInitSettingsNamespace, Name: provisioningSecretName(m.identity.shown), Key: CloudConfigKey,
			},
		},
		Kubelet: abi.Kubelet{
			Version:       m.kubeletVersion.String(),
			FeatureGates:  s.KubeletFeatureGates,
			InitialTaints: s.InitialTaints,
			Config:        m.kubelet.abi(),
		},
		ContainerRuntime: abi.ContainerRuntime{
			Name:                      s.ContainerRuntime,
			PauseImage:                s.PauseImage,
			InsecureRegistries:        s.InsecureRegistries,
			RegistryMirrors:           s.RegistryMirrors,
			ContainerdRegistryMirrors: s.ContainerdRegistryMirrors,
			RegistryCredentials:       s.RegistryCredentialHosts,
			Config:                    cr.config,
			HostsTOML:                 cr.hosts,
		},
		Proxy:         abi.Proxy{HTTPProxy: s.HTTPProxy, NoProxy: s.NoProxy},
		SSHPublicKeys: pc.SSHPublicKeys,
		HostCACert:    s.HostCACert,
		BinaryBaseURL: s.BinaryBaseURL,
		Secrets:       m.placeholders(),
	}
	if m.inTreeCCMAvailable() && m.kubeletHasInTree() {
		ctx.CloudProvider.InTreeName = pc.CloudProvider
	}
	if n := pc.Network; n != nil {
		ctx.Network = abi.Network{IPFamily: string(n.IPFamily), CIDR: n.CIDR, Gateway: n.Gateway, DNSServers: n.DNS.Servers}
	}
	return ctx
}

// placeholders lists the placeholders that apply to this machine.
func (m *machine) placeholders() abi.SecretPlaceholders {
	p := abi.SecretPlaceholders{
		BootstrapToken:    Placeholders.BootstrapToken,
		ProvisioningToken: Placeholders.ProvisioningToken,
		CloudConfig:       m.cloudConfigPlaceholder(),
	}
	if len(m.Settings.RegistryCredentialHosts) > 0 {
		p.RegistryAuth = Placeholders.RegistryAuth
		p.Registries = make(map[string]abi.RegistryCredentials, len(m.Settings.RegistryCredentialHosts))
		for _, h := range m.Settings.RegistryCredentialHosts {
			p.Registries[h] = RegistryPlaceholders(h)
		}
	}
	p.RHSubscriptionPassword = m.rhPasswordPlaceholder()
	return p
}

func (kc KubeletConfig) abi() abi.KubeletConfig {
	out := abi.KubeletConfig{
		MaxPods:                     kc.MaxPods,
		ImageGCHighThresholdPercent: kc.ImageGCHighThresholdPercent,
		ImageGCLowThresholdPercent:  kc.ImageGCLowThresholdPercent,
	}
	if kc.KubeReserved != nil {
		out.KubeReserved = *kc.KubeReserved
	}
	if kc.SystemReserved != nil {
		out.SystemReserved = *kc.SystemReserved
	}
	if kc.EvictionHard != nil {
		out.EvictionHard = *kc.EvictionHard
	}
	if kc.ContainerLogMaxSize != nil {
		out.ContainerLogMaxSize = *kc.ContainerLogMaxSize
	}
	if kc.ContainerLogMaxFiles != nil {
		var n int32
		if err := json.Unmarshal([]byte(*kc.ContainerLogMaxFiles), &n); err == nil {
			out.ContainerLogMaxFiles = &n
		}
	}
	if kc.ImageMinimumGCAge != nil {
		out.ImageMinimumGCAge = kc.ImageMinimumGCAge.Duration.String()
	}
	if kc.ImageMaximumGCAge != nil {
		out.ImageMaximumGCAge = kc.ImageMaximumGCAge.Duration.String()
	}
	return out
}
