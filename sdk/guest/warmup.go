package guest

import (
	"strings"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/internal/sample"
	json "github.com/osmhq/osm/sdk/internal/wirejson"
)

// warmUp renders a sample request for both stages and discards the results. The host calls it (as
// osm_warmup) once, on the instance whose state after initialisation it snapshots, so that what a plugin builds
// on first use — encoding/json's per-type encoders, compiled expressions, lazily filled tables — is already
// built in every instance that starts from the snapshot. Failures do not matter: warming up only saves time.
func warmUp(p Plugin) {
	if p == nil {
		return
	}
	req := warmUpRequest(p.Metadata())
	for _, stage := range []abi.Stage{abi.StageBootstrap, abi.StageProvisioning} {
		req.Stage = stage
		in, err := json.Marshal(req)
		if err != nil {
			return
		}
		_, _ = Invoke(p, abi.ExportRender, in)
	}
}

// warmUpRequest is the sample request for the first operating system, version, utility and provider the
// plugin declares.
func warmUpRequest(md abi.Metadata) *abi.RenderRequest {
	osName, version, utility, provider := "linux", "1", abi.UtilityCloudInit, "aws"
	if len(md.OperatingSystems) > 0 {
		osName = md.OperatingSystems[0].Name
		if vs := md.OperatingSystems[0].Versions; len(vs) > 0 {
			version = strings.TrimSuffix(vs[0], "*")
			if version == "" || strings.HasSuffix(version, ".") {
				version += "0"
			}
		}
	}
	if len(md.ProvisioningUtilities) > 0 {
		utility = md.ProvisioningUtilities[0]
	}
	for _, p := range md.CloudProviders {
		if p != "*" {
			provider = p
			break
		}
	}
	return sample.Request(osName, version, utility, provider, abi.StageBootstrap)
}
