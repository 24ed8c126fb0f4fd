// Package sample builds render requests for the default plugins' native tests: a realistic context as the
// controller sends it, with the host's placeholders, that each test adjusts.
package sample

import (
	"encoding/json"

	"github.com/osmhq/osm/sdk/abi"
)

// CACert is a CA certificate in PEM form; its content does not matter to the plugins.
const CACert = `-----BEGIN CERTIFICATE-----
MIIBdzCCAR2gAwIBAgIBADAKBggqhkjOPQQDAjAVMRMwEQYDVQQDEwprdWJlcm5ldGVzMB4XDTI2MDEwMTAwMDAwMFoXDTM2
MDEwMTAwMDAwMFowFTETMBEGA1UEAxMKa3ViZXJuZXRlczBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABDummyCAForOSMTe
stsOnlyAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAo0IwQDAO
-----END CERTIFICATE-----`

// Placeholders are the host's secret placeholders.
var Placeholders = abi.SecretPlaceholders{
	BootstrapToken:    "__OSM_SECRET_BOOTSTRAP_TOKEN__",
	ProvisioningToken: "__OSM_SECRET_PROVISIONING_TOKEN__",
}

// ContainerdConfig stands for the host's containerd config.toml.
const ContainerdConfig = "version = 3\n\n[plugins]\n[plugins.\"io.containerd.cri.v1.images\".registry]\nconfig_path = \"/etc/containerd/certs.d\"\n"

// Request returns a render request for os on provider.
func Request(osName, osVersion, utility, provider string, stage abi.Stage) *abi.RenderRequest {
	return &abi.RenderRequest{
		ABIVersion:          abi.Version,
		Stage:               stage,
		ProvisioningUtility: utility,
		Context: abi.RenderContext{
			MachineDeployment: abi.ObjectRef{Name: "workers", Namespace: "kube-system", Revision: "1"},
			OperatingSystem:   abi.OSInfo{Name: osName, Version: osVersion, Spec: json.RawMessage(`{}`)},
			CloudProvider:     abi.CloudProvider{Name: provider, External: true},
			Cluster: abi.Cluster{
				ServerURL: "https://api.cluster.example.com:6443",
				CACert:    CACert,
				DNSIPs:    []string{"10.96.0.10"},
				Domain:    "cluster.local",
				ProvisioningSecret: abi.SecretRef{Namespace: "cloud-init-settings", Name: "workers-kube-system-provisioning-config",
					Key: "cloud-config"},
			},
			Kubelet: abi.Kubelet{
				Version:      "1.33.2",
				FeatureGates: map[string]bool{"RotateKubeletServerCertificate": true},
			},
			ContainerRuntime: abi.ContainerRuntime{
				Name:   "containerd",
				Config: ContainerdConfig,
				HostsTOML: map[string]string{
					"docker.io": "server = \"https://registry-1.docker.io\"\n\n[host.\"https://mirror.example.com\"]\ncapabilities = [\"pull\", \"resolve\"]\n",
				},
			},
			Proxy:         abi.Proxy{NoProxy: ".svc,.cluster.local,localhost,127.0.0.1"},
			SSHPublicKeys: []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOSMtest test@osm"},
			BinaryBaseURL: "https://dl.k8s.io",
			Secrets:       Placeholders,
		},
		Input: abi.NodeConfig{UserSSHKeys: []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOSMtest test@osm"}},
	}
}
