package render_test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/testenv"
	"github.com/osmhq/osm/sdk/abi"
)

var upstreamDir = filepath.Join(testenv.RepoRoot(), "crds", "testdata", "upstream")

func loadYAML(t testing.TB, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// upstreamSettings are the controller settings of upstream OSM's golden tests
// (see crds/testdata/upstream/README.md).
func upstreamSettings(external bool) render.Settings {
	s := render.DefaultSettings()
	s.ClusterDNSIPs = []net.IP{net.IPv4(10, 0, 0, 0)}
	s.ExternalCloudProvider = external
	s.InsecureRegistries = []string{"192.168.100.100:5000", "10.0.0.1:5000"}
	s.PauseImage = "192.168.100.100:5000/kubernetes/pause:v3.1"
	s.RegistryMirrors = []string{"https://registry.docker-cn.com"}
	s.HTTPProxy = "http://test-http-proxy.com"
	s.NoProxy = "http://test-no-proxy.com"
	s.KubeletFeatureGates = map[string]bool{"GracefulNodeShutdown": true, "IdentifyPodOS": false}
	return s
}

func upstreamMD(t testing.TB, name, osp, kubelet, os, provider, providerSpec string) *clusterv1alpha1.MachineDeployment {
	t.Helper()
	pc := map[string]any{
		"sshPublicKeys":     []string{"ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAACAQDdOIhYmzCK5DSVLu3c"},
		"operatingSystem":   os,
		"cloudProviderSpec": json.RawMessage(providerSpec),
		"cloudProvider":     provider,
		"network":           map[string]any{},
	}
	raw, err := json.Marshal(pc)
	if err != nil {
		t.Fatal(err)
	}
	return &clusterv1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", Annotations: map[string]string{
			clusterv1alpha1.AnnotationRevision: "1", clusterv1alpha1.AnnotationOSP: osp,
		}},
		Spec: clusterv1alpha1.MachineDeploymentSpec{Template: clusterv1alpha1.MachineTemplateSpec{Spec: clusterv1alpha1.MachineSpec{
			Versions:     clusterv1alpha1.MachineVersionInfo{Kubelet: kubelet},
			ProviderSpec: clusterv1alpha1.ProviderSpec{Value: &runtime.RawExtension{Raw: raw}},
		}}},
	}
}

// TestUpstreamProfilesRenderLikeUpstream renders upstream OSM's own default profiles, unchanged and without a
// plugin, with the inputs of upstream's golden tests, and compares the result with upstream's rendering: the
// same files (path, permissions, encoding, content), units, modules and SSH keys. The differences by design are
// the API token, which OSM keeps out of the OSC, and the name of the kubelet bootstrap kubeconfig Secret,
// which upstream derives ambiguously ("<namespace>-<name>", cut to the name past 63 characters); both are
// substituted before comparing.
func TestUpstreamProfilesRenderLikeUpstream(t *testing.T) {
	for _, tc := range []struct {
		name, osp, golden, md, kubelet, os string
		external                           bool
	}{
		{"ubuntu on aws", "osp-ubuntu.yaml", "osc-ubuntu-aws-containerd.yaml", "ubuntu-aws", "1.29.0", "ubuntu", true},
		{"flatcar on aws", "osp-flatcar.yaml", "osc-flatcar-aws-containerd.yaml", "flatcar-aws-containerd", "1.31.0", "flatcar", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			osp := &osmv1alpha1.OperatingSystemProfile{}
			loadYAML(t, filepath.Join(upstreamDir, tc.osp), osp)
			want := &osmv1alpha1.OperatingSystemConfig{}
			loadYAML(t, filepath.Join(upstreamDir, "golden", tc.golden), want)

			caCert := strings.TrimSuffix(fileData(t, want.Spec.ProvisioningConfig, "/etc/kubernetes/pki/ca.crt"), "\n")
			out, err := (&render.Renderer{}).Render(context.Background(), render.Input{
				MachineDeployment: upstreamMD(t, tc.md, osp.Name, tc.kubelet, tc.os, "aws",
					`{"availabilityZone": "eu-central-1b", "vpcId": "e-123f", "subnetID": "test-subnet"}`),
				Profile:  osp,
				Cluster:  render.ClusterInfo{ServerURL: "https://foo.bar:6443", CACert: caCert},
				Settings: upstreamSettings(tc.external),
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, stage := range []abi.Stage{abi.StageBootstrap, abi.StageProvisioning} {
				cfg := render.SubstituteSecrets(out.Stage(stage), render.SecretValues{ProvisioningToken: "top-secret"})
				golden := want.Spec.BootstrapConfig
				if stage == abi.StageProvisioning {
					golden = want.Spec.ProvisioningConfig
				}
				md := upstreamMD(t, tc.md, osp.Name, tc.kubelet, tc.os, "aws", "{}")
				ours := strings.ReplaceAll(string(asRaw(t, render.ToOSC(cfg))), render.KubeletBootstrapSecretName(md), "kube-system-"+tc.md+"-kubelet-bootstrap-config")
				if diff := cmp.Diff(asJSON(t, golden), asJSON(t, json.RawMessage(ours))); diff != "" {
					t.Errorf("%s stage differs from upstream (-upstream +ours):\n%s", stage, diff)
				}
				// Without substitution, the OSC must hold no token at all.
				if strings.Contains(string(asRaw(t, out.Spec)), "top-secret") {
					t.Errorf("the OSC spec contains the token")
				}
			}
			if out.Spec.OSName != want.Spec.OSName || out.Spec.OSVersion != want.Spec.OSVersion ||
				out.Spec.ProvisioningUtility != want.Spec.ProvisioningUtility || out.Spec.CloudProvider.Name != want.Spec.CloudProvider.Name {
				t.Errorf("spec header differs: got %s %s %s %s", out.Spec.OSName, out.Spec.OSVersion, out.Spec.ProvisioningUtility, out.Spec.CloudProvider.Name)
			}
			if diff := cmp.Diff(asJSON(t, want.Spec.CloudProvider.Spec), asJSON(t, out.Spec.CloudProvider.Spec)); diff != "" {
				t.Errorf("cloud provider spec (-upstream +ours):\n%s", diff)
			}
		})
	}
}

func fileData(t *testing.T, cfg osmv1alpha1.OSCConfig, path string) string {
	t.Helper()
	for _, f := range cfg.Files {
		if f.Path == path {
			return f.Content.Inline.Data
		}
	}
	t.Fatalf("no file %s", path)
	return ""
}

func asRaw(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func asJSON(t *testing.T, v any) any {
	t.Helper()
	var out any
	if err := json.Unmarshal(asRaw(t, v), &out); err != nil {
		t.Fatal(err)
	}
	return out
}
