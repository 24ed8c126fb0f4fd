package guest

import (
	"testing"

	"github.com/osmhq/osm/sdk/abi"
)

// recorder records the requests it renders.
type recorder struct {
	md   abi.Metadata
	seen []*abi.RenderRequest
}

func (r *recorder) Metadata() abi.Metadata { return r.md }

func (r *recorder) Render(req *abi.RenderRequest) (*abi.RenderResponse, error) {
	r.seen = append(r.seen, req)
	return &abi.RenderResponse{Config: req.Input}, nil
}

// TestWarmUpRendersASampleForEachStage: osm_warmup renders both stages of a sample for the first OS, version,
// utility and provider the plugin declares, through the same JSON path as osm_render, and holds no credential:
// only the host's placeholders.
func TestWarmUpRendersASampleForEachStage(t *testing.T) {
	p := &recorder{md: abi.Metadata{
		OperatingSystems:      []abi.OperatingSystem{{Name: "rhel", Versions: []string{"9.*", "8.10"}}},
		ProvisioningUtilities: []string{abi.UtilityIgnition},
		CloudProviders:        []string{"*", "openstack"},
	}}
	warmUp(p)
	if len(p.seen) != 2 {
		t.Fatalf("warm-up rendered %d times, want one per stage", len(p.seen))
	}
	for i, stage := range []abi.Stage{abi.StageBootstrap, abi.StageProvisioning} {
		req := p.seen[i]
		ctx := req.Context
		if req.Stage != stage || ctx.OperatingSystem.Name != "rhel" || ctx.OperatingSystem.Version != "9.0" ||
			req.ProvisioningUtility != abi.UtilityIgnition || ctx.CloudProvider.Name != "openstack" {
			t.Errorf("warm-up request %d: stage %s, os %s %s, utility %s, provider %s", i, req.Stage, ctx.OperatingSystem.Name,
				ctx.OperatingSystem.Version, req.ProvisioningUtility, ctx.CloudProvider.Name)
		}
		if ctx.Secrets.BootstrapToken != "__OSM_SECRET_BOOTSTRAP_TOKEN__" || ctx.Secrets.ProvisioningToken != "__OSM_SECRET_PROVISIONING_TOKEN__" {
			t.Errorf("warm-up request %d carries secrets %+v, want the placeholders", i, ctx.Secrets)
		}
	}
	warmUp(nil) // no plugin registered: nothing to warm, no panic
}
