package render_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/sdk/abi"
)

// TestProvisioningSizeIsBounded: provisioning user-data larger than render.ProvisioningSizeLimit (here from a
// 600 KiB file a profile adds) is refused with ProvisioningTooLarge before anything is written, while the
// bootstrap stage of the same render still encodes.
func TestProvisioningSizeIsBounded(t *testing.T) {
	osp := &osmv1alpha1.OperatingSystemProfile{}
	loadYAML(t, filepath.Join(upstreamDir, "osp-ubuntu.yaml"), osp)
	osp.Spec.ProvisioningConfig.Files = append(osp.Spec.ProvisioningConfig.Files, osmv1alpha1.File{Path: "/opt/big",
		Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{Data: strings.Repeat("x", 600<<10)}}})
	out, err := (&render.Renderer{}).Render(context.Background(), render.Input{
		MachineDeployment: upstreamMD(t, "big", osp.Name, "1.33.2", "ubuntu", "aws", `{}`),
		Profile:           osp,
		Cluster:           render.ClusterInfo{ServerURL: "https://api.example:6443", CACert: "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"},
		Settings:          upstreamSettings(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	secrets := render.SecretValues{BootstrapToken: "abcdef.0123456789abcdef", ProvisioningToken: "token"}
	if _, err := out.UserData(context.Background(), abi.StageBootstrap, secrets); err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	_, err = out.UserData(context.Background(), abi.StageProvisioning, secrets)
	if render.Reason(err) != osmv1alpha1.ReasonProvisioningTooLarge || !strings.Contains(err.Error(), "524288 bytes") {
		t.Fatalf("provisioning of 600 KiB: %v (reason %s), want %s naming the limit", err, render.Reason(err), osmv1alpha1.ReasonProvisioningTooLarge)
	}
}
