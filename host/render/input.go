package render

import (
	"fmt"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
)

// Input is everything one render depends on. Rendering is a pure function of it: the same input always gives
// the same configuration, byte for byte.
type Input struct {
	MachineDeployment *clusterv1alpha1.MachineDeployment
	Profile           *osmv1alpha1.OperatingSystemProfile
	Cluster           ClusterInfo
	Settings          Settings
	// Extensions are the OperatingSystemProfileExtensions that apply to the profile for this machine, in the
	// order they apply (extension.For chooses and orders them).
	Extensions []*osmv1alpha1.OperatingSystemProfileExtension
}

// machine is the input, decoded and checked once.
type machine struct {
	Input
	provider       *clusterv1alpha1.ProviderConfig
	providerSpec   osmv1alpha1.CloudProviderSpec // the profile's entry for the provider
	kubeletVersion *semver.Version
	kubelet        KubeletConfig
	os             OSConfigs
	utility        string
	serverURL      string
	caCert         string
	// identity is the MachineDeployment's name, namespace and revision, as plugins see them and as they are.
	identity identity
}

func decode(in Input) (*machine, error) {
	md, osp := in.MachineDeployment, in.Profile
	pc, err := md.ProviderConfig()
	if err != nil {
		return nil, unsupported(err)
	}
	m := &machine{Input: in, provider: pc, identity: newIdentity(md)}
	if pc.OperatingSystem != string(osp.Spec.OSName) {
		return nil, unsupported(fmt.Errorf("the MachineDeployment's operatingSystem is %q but profile %s is for %q",
			pc.OperatingSystem, objectName(osp.Namespace, osp.Name), osp.Spec.OSName))
	}
	idx := slices.IndexFunc(osp.Spec.SupportedCloudProviders, func(c osmv1alpha1.CloudProviderSpec) bool { return c.Name == pc.CloudProvider })
	if idx < 0 {
		var names []string
		for _, c := range osp.Spec.SupportedCloudProviders {
			names = append(names, c.Name)
		}
		return nil, unsupported(fmt.Errorf("profile %s does not support cloud provider %q (it supports %s)",
			objectName(osp.Namespace, osp.Name), pc.CloudProvider, strings.Join(names, ", ")))
	}
	m.providerSpec = osp.Spec.SupportedCloudProviders[idx]

	v := md.Spec.Template.Spec.Versions.Kubelet
	if m.kubeletVersion, err = semver.NewVersion(v); err != nil {
		return nil, invalid(fmt.Errorf("spec.template.spec.versions.kubelet %q is not a version: %w", v, err))
	}
	if err := checkKubeletVersion(m.kubeletVersion); err != nil {
		return nil, invalid(err)
	}
	if m.kubelet, err = ParseKubeletConfig(md.Annotations); err != nil {
		return nil, invalid(err)
	}
	if err := m.kubelet.validate(); err != nil {
		return nil, invalid(fmt.Errorf("kubelet-config annotations (%s<Key>): %w", clusterv1alpha1.AnnotationKubeletConfigPrefix, err))
	}
	if m.os, err = parseOSConfigs(pc.OperatingSystem, pc.OperatingSystemSpec.Raw); err != nil {
		return nil, unsupported(err)
	}
	m.utility = string(osp.Spec.ProvisioningUtility)
	if m.utility == "" {
		m.utility = string(osmv1alpha1.ProvisioningUtilityCloudInit)
	}
	if want := m.os.FlatcarConfig.ProvisioningUtility; want != "" && want != m.utility {
		return nil, unsupported(fmt.Errorf("the MachineDeployment asks for provisioning utility %q but profile %s renders for %q",
			want, objectName(osp.Namespace, osp.Name), m.utility))
	}
	if pc.Network != nil && (pc.Network.CIDR != "" || pc.Network.Gateway != "") && pc.OperatingSystem != "flatcar" && osp.Spec.Plugin == nil {
		return nil, unsupported(fmt.Errorf("a static network configuration (providerSpec.value.network) is only supported on flatcar or by profiles with a plugin"))
	}

	m.serverURL = in.Cluster.ServerURL
	if in.Settings.OverrideBootstrapKubeletAPIServer != "" {
		m.serverURL = in.Settings.OverrideBootstrapKubeletAPIServer
	}
	if m.serverURL == "" {
		return nil, fmt.Errorf("the API server URL for nodes is unknown (kube-public/cluster-info or -override-bootstrap-kubelet-apiserver)")
	}
	m.caCert = in.Cluster.CACert
	if in.Settings.KubernetesCACert != "" {
		m.caCert = in.Settings.KubernetesCACert
	}
	if m.caCert == "" {
		return nil, fmt.Errorf("the cluster CA is unknown (kube-public/cluster-info or -kubernetes-ca-bundle)")
	}
	return m, nil
}

// kubeVersion is the kubelet version with a leading v, as upstream templates expect.
func (m *machine) kubeVersion() string { return "v" + m.kubeletVersion.String() }

func (m *machine) cloudProvider() string { return m.provider.CloudProvider }

// inTreeCloudProviders have a cloud provider compiled into kubelets older than 1.29.
var inTreeCloudProviders = map[string]bool{"aws": true, "azure": true, "gce": true, "openstack": true, "vsphere": true}

// kubeletDropped is the first kubelet minor (1.x) without the provider compiled in: the in-tree OpenStack
// provider was removed in 1.26 and AWS's in 1.27, and from 1.29 kubelets accept no in-tree provider.
var kubeletDropped = map[string]uint64{"openstack": 26, "aws": 27, "azure": 29, "gce": 29, "vsphere": 29}

// kubeletHasInTree reports whether this machine's kubelet still takes its provider in --cloud-provider: what
// abi.CloudProvider.InTreeName promises a plugin. (The templates' InTreeCCMAvailable keeps upstream OSM's
// meaning, which ignores the kubelet's version.)
func (m *machine) kubeletHasInTree() bool {
	minor, ok := kubeletDropped[m.cloudProvider()]
	return ok && m.kubeletVersion.Minor() < minor
}

func (m *machine) inTreeCCMAvailable() bool {
	return inTreeCloudProviders[m.cloudProvider()] && !m.Settings.ExternalCloudProvider
}

func (m *machine) ipFamily() string {
	if m.provider.Network == nil {
		return ""
	}
	return string(m.provider.Network.IPFamily)
}

func objectName(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}
