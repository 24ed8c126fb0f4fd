package node

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/internal/sample"
)

// encodingJSON is how the node's JSON files were written before jsonWriter, and what it must keep writing.
func encodingJSON(t *testing.T, v any) string {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestConfigFilesMatchEncodingJSON: the kubelet config and the bootstrap kubeconfig, written field by field, are
// byte for byte what encoding/json writes for them, for the defaults, every optional field set, empty lists
// and maps, and values that need escaping (or, for <, > and &, must not be escaped).
func TestConfigFilesMatchEncodingJSON(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	tests := []struct {
		name string
		edit func(*abi.RenderRequest)
	}{
		{"defaults", func(*abi.RenderRequest) {}},
		{"everything set", func(r *abi.RenderRequest) {
			r.Context.Kubelet.FeatureGates = map[string]bool{"B": false, "A": true, "ÄÖ": true}
			r.Context.Kubelet.Config = abi.KubeletConfig{
				KubeReserved: map[string]string{"cpu": "1", "memory": "1Gi"}, SystemReserved: map[string]string{"pid": "100"},
				EvictionHard: map[string]string{"memory.available": "<100Mi & \"quoted\"\n\t\u2028"},
				MaxPods:      i32(250), ContainerLogMaxSize: "5Mi", ContainerLogMaxFiles: i32(3),
				ImageGCHighThresholdPercent: i32(90), ImageGCLowThresholdPercent: i32(0),
				ImageMinimumGCAge: "2m", ImageMaximumGCAge: "168h",
			}
			r.Context.Cluster.DNSIPs = []string{"10.96.0.10", "fd00::a"}
			r.Context.Cluster.Domain = "corp.example"
		}},
		{"no cluster DNS, old kubelet", func(r *abi.RenderRequest) {
			r.Context.Cluster.DNSIPs = nil
			r.Context.Kubelet.Version = "1.26.3"
			r.Context.Kubelet.FeatureGates = map[string]bool{}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := sample.Request("ubuntu", "24.04", abi.UtilityCloudInit, "aws", abi.StageProvisioning)
			tt.edit(req)
			r, err := NewRequest(&OS{Name: "ubuntu"}, req)
			if err != nil {
				t.Fatal(err)
			}
			c := kubeletConfig(r)
			if diff := cmp.Diff(encodingJSON(t, c), c.json()); diff != "" {
				t.Errorf("kubelet config (-encoding/json +jsonWriter):\n%s", diff)
			}

			type named struct {
				Name    string         `json:"name"`
				Cluster map[string]any `json:"cluster,omitempty"`
				Context map[string]any `json:"context,omitempty"`
				User    map[string]any `json:"user,omitempty"`
			}
			kubeconfig := struct {
				APIVersion     string  `json:"apiVersion"`
				Kind           string  `json:"kind"`
				Clusters       []named `json:"clusters"`
				Contexts       []named `json:"contexts"`
				CurrentContext string  `json:"current-context"`
				Users          []named `json:"users"`
			}{
				APIVersion: "v1", Kind: "Config", CurrentContext: "default",
				Clusters: []named{{Name: "default", Cluster: map[string]any{"server": r.Ctx.Cluster.ServerURL, "certificate-authority": CACertPath}}},
				Contexts: []named{{Name: "default", Context: map[string]any{"cluster": "default", "user": "kubelet-bootstrap"}}},
				Users:    []named{{Name: "kubelet-bootstrap", User: map[string]any{"token": r.Ctx.Secrets.BootstrapToken}}},
			}
			if diff := cmp.Diff(encodingJSON(t, kubeconfig), BootstrapKubeconfig(r)); diff != "" {
				t.Errorf("bootstrap kubeconfig (-encoding/json +jsonWriter):\n%s", diff)
			}
		})
	}
}
