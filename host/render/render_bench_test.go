package render_test

import (
	"context"
	"path/filepath"
	"testing"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/sdk/abi"
)

// BenchmarkRenderUpstreamUbuntu measures one MachineDeployment's render of upstream's templates-only ubuntu
// profile: templates, containerd config, and both stages encoded as cloud-config.
func BenchmarkRenderUpstreamUbuntu(b *testing.B) {
	osp := &osmv1alpha1.OperatingSystemProfile{}
	loadYAML(b, filepath.Join(upstreamDir, "osp-ubuntu.yaml"), osp)
	in := render.Input{
		MachineDeployment: upstreamMD(b, "bench", osp.Name, "1.33.2", "ubuntu", "aws", `{"region":"eu-central-1"}`),
		Profile:           osp,
		Cluster:           render.ClusterInfo{ServerURL: "https://api.example:6443", CACert: "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"},
		Settings:          upstreamSettings(true),
	}
	r := &render.Renderer{}
	ctx := context.Background()
	secrets := render.SecretValues{BootstrapToken: "abcdef.0123456789abcdef", ProvisioningToken: "token"}
	b.ReportAllocs()
	for b.Loop() {
		out, err := r.Render(ctx, in)
		if err != nil {
			b.Fatal(err)
		}
		for _, stage := range []abi.Stage{abi.StageBootstrap, abi.StageProvisioning} {
			if _, err := out.UserData(ctx, stage, secrets); err != nil {
				b.Fatal(err)
			}
		}
	}
}
