package render_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/render"
)

// TestMachineDeploymentFieldsAreValidated renders MachineDeployments whose kubelet version or kubelet-config
// annotations no kubelet would accept: each fails with InvalidMachineDeployment and a message naming the field.
func TestMachineDeploymentFieldsAreValidated(t *testing.T) {
	osp := &osmv1alpha1.OperatingSystemProfile{}
	loadYAML(t, filepath.Join(upstreamDir, "osp-ubuntu.yaml"), osp)
	for _, tc := range []struct {
		name, kubelet, key, value, want string
	}{
		{"valid", "1.33.2", render.KubeletImageGCHighThresholdPercent, "85", ""},
		{"valid eviction", "1.33.2", render.KubeletEvictionHard, "memory.available<5%,nodefs.available<10Gi", ""},
		{"not a version", "latest", "", "", "versions.kubelet"},
		{"absurd minor", "1.9999.0", "", "", "outside the supported range"},
		{"major 2", "2.0.0", "", "", "outside the supported range"},
		{"too old", "1.12.0", "", "", "outside the supported range"},
		{"GC percentage over 100", "1.33.2", render.KubeletImageGCHighThresholdPercent, "150", "ImageGCHighThresholdPercent 150"},
		{"negative GC percentage", "1.33.2", render.KubeletImageGCLowThresholdPercent, "-1", "ImageGCLowThresholdPercent -1"},
		{"eviction over 100%", "1.33.2", render.KubeletEvictionHard, "memory.available<250%", "EvictionHard memory.available<250%"},
		{"eviction garbage", "1.33.2", render.KubeletEvictionHard, "memory.available<lots", "EvictionHard"},
		{"reserved garbage", "1.33.2", render.KubeletKubeReserved, "cpu=many", "KubeReserved cpu"},
		{"zero pods", "1.33.2", render.KubeletMaxPods, "0", "MaxPods 0"},
		{"one log file", "1.33.2", render.KubeletContainerLogMaxFiles, "1", "ContainerLogMaxFiles 1"},
		{"negative GC age", "1.33.2", render.KubeletImageMinimumGCAge, "-5m", "ImageMinimumGCAge"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md := upstreamMD(t, "workers", osp.Name, tc.kubelet, "ubuntu", "aws", `{}`)
			if tc.key != "" {
				md.Annotations[clusterv1alpha1.AnnotationKubeletConfigPrefix+tc.key] = tc.value
			}
			_, err := (&render.Renderer{}).Render(context.Background(), render.Input{MachineDeployment: md, Profile: osp,
				Cluster: render.ClusterInfo{ServerURL: "https://api:6443", CACert: "ca"}, Settings: upstreamSettings(true)})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("a valid MachineDeployment failed: %v", err)
				}
				return
			}
			var re *render.Error
			if !errors.As(err, &re) || re.Reason != osmv1alpha1.ReasonInvalidMachineDeployment || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want %s naming %q, got %v", osmv1alpha1.ReasonInvalidMachineDeployment, tc.want, err)
			}
		})
	}
}
