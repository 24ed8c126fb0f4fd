// Package sample builds a realistic render request: the context the controller sends, with the host's
// placeholders. Package plugintest hands it to plugin tests; package guest renders it to warm a plugin up
// before the host snapshots the instance.
package sample

import (
	"encoding/json"

	"github.com/osmhq/osm/sdk/abi"
)

// CACert is a self-signed RSA 2048 certificate (private key discarded), the size of a real cluster CA, so
// that the measured user-data sizes are realistic.
const CACert = `-----BEGIN CERTIFICATE-----
MIIDCzCCAfOgAwIBAgIUap6tg6NP8LWmtm747xl/i8OgRrEwDQYJKoZIhvcNAQEL
BQAwFTETMBEGA1UEAwwKa3ViZXJuZXRlczAeFw0yNjExMjExMjU2MDZaFw0zNjEx
MTgxMjU2MDZaMBUxEzARBgNVBAMMCmt1YmVybmV0ZXMwggEiMA0GCSqGSIb3DQEB
AQUAA4IBDwAwggEKAoIBAQDduqjgoTrgY5RL5FQa4xXuLMxSks83KCa3o1X5Ndj4
4uztcIL9G+zJK3E/oEFuZ523i7lG+a4zEan9hBx5N1KiW8P/TQwf57vBh2e9E24c
Pt6QPMuSn0jFwuNLEjT3pLa7Qt4OJ9hZ9dBkGKUezw0DSRUgaI4kBDUvQ1IcRGGn
+YFghzvTFp7SOSOnQWujnyURzGr9GI66Nx5JqGzXQ3Spd4jyfKJo/aY8amJnwqJW
GrdU3pGi29hwhbBJHCcKEbtB4kniBxzmHRCoj2r3vEPO9JJ4L8Z2yp1/LldREKk+
GdG2U8g2a2Ju04KN1mMGYRP0OLl4ogC71ZuE1khh+vw5AgMBAAGjUzBRMB0GA1Ud
DgQWBBTZmN/FZJMryt8ii2ssBbeL6GLwVTAfBgNVHSMEGDAWgBTZmN/FZJMryt8i
i2ssBbeL6GLwVTAPBgNVHRMBAf8EBTADAQH/MA0GCSqGSIb3DQEBCwUAA4IBAQAh
+1YKmuakXqmHayDmTDYTMAfjQnq8wPXvwFVlo0j3fOV8Ysf/kVJHRPOArxCtZonN
15R0gkwc7PykUg68TQRGhFImc8pHoqFIjCpGKEBf2+RWXAmAZrghPR264rAa6MWW
+PM+B9JyEwt/Q3Ly7zAccR5WPmCOJgJAmaAP8Pg2YZ1jmaG5Ff0HW+c4F53zxCpQ
KbW+23XyV5g3l9imgvyu/FixPrw8f1ZI3WOxoqUcQ5zAYvq42ChZTGv5oPyvI5R5
wYtTjJJbb+Py7QDKK/umcJ0dciG9PAjmfVlOVW4faPiDNe1YhhIK41uUH0N+9sCx
Mamn8BBdkcGN821CIFCS
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
