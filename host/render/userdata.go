package render

import (
	"context"
	"fmt"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/encode/cloudinit"
	"github.com/osmhq/osm/host/encode/ignition"
	"github.com/osmhq/osm/sdk/abi"
)

// MachineNamePlaceholder is replaced by machine-controller with the machine's name when it creates the VM.
const MachineNamePlaceholder = "<MACHINE_NAME>"

// MachineNameFile holds the machine's name; upstream profiles' setup scripts set the hostname from it.
const MachineNameFile = "/etc/machine-name"

// BootstrapSizeLimit is the largest bootstrap user-data OSM writes. AWS, the smallest common provider limit,
// refuses user-data over 16 KiB.
const BootstrapSizeLimit = 16 * 1024

// UserData returns the encoded user-data of a stage with the credentials substituted. Credentials that come
// from the MachineDeployment itself (a RHEL subscription password, an overwritten cloud-config) are added to
// secrets here; the caller provides the ones it manages (tokens, registry credentials).
func (o *Output) UserData(ctx context.Context, stage abi.Stage, secrets SecretValues) ([]byte, error) {
	cfg := o.stages[stage]
	if cfg == nil {
		return nil, fmt.Errorf("no %s stage rendered", stage)
	}
	if secrets.RHSubscriptionPassword == "" {
		secrets.RHSubscriptionPassword = o.fromMachine.RHSubscriptionPassword
	}
	if secrets.CloudConfig == "" {
		secrets.CloudConfig = o.fromMachine.CloudConfig
	}
	final := SubstituteSecrets(cfg, secrets)
	hostname := ""
	if stage == abi.StageBootstrap && o.hostname {
		hostname = MachineNamePlaceholder
		final.Files = append(final.Files, abi.PlainFile(MachineNameFile, 0o600, MachineNamePlaceholder))
	}

	var data []byte
	var err error
	switch o.Utility() {
	case abi.UtilityCloudInit:
		data, err = cloudinit.Encode(final, cloudinit.Options{Hostname: hostname, PackageUpgrade: o.distUpgrade,
			CoreOSUnits: o.Spec.OSName == osmv1alpha1.OperatingSystemFlatcar})
	case abi.UtilityIgnition:
		data, err = ignition.Encode(final, ignition.Options{Hostname: hostname})
	default:
		data, err = o.pluginEncode(ctx, stage, final)
	}
	if err != nil {
		return nil, withReason(osmv1alpha1.ReasonRenderFailed, fmt.Errorf("encoding the %s stage for %s: %w", stage, o.Utility(), err))
	}
	if stage == abi.StageBootstrap && len(data) > BootstrapSizeLimit {
		return nil, withReason(osmv1alpha1.ReasonBootstrapTooLarge,
			fmt.Errorf("the bootstrap user-data is %d bytes, more than the %d bytes providers accept; move files from spec.bootstrapConfig to spec.provisioningConfig", len(data), BootstrapSizeLimit))
	}
	return data, nil
}

func (o *Output) pluginEncode(ctx context.Context, stage abi.Stage, cfg *abi.NodeConfig) ([]byte, error) {
	if o.plugin == nil {
		return nil, fmt.Errorf("provisioning utility %q needs a plugin with an osm_encode export", o.Utility())
	}
	resp, err := o.plugin.Encode(ctx, &abi.EncodeRequest{
		ABIVersion: abi.Version, Stage: stage, ProvisioningUtility: o.Utility(), Context: o.context, Config: *cfg,
	})
	if err != nil {
		return nil, withReason(osmv1alpha1.ReasonPluginFailed, err)
	}
	return resp.UserData, nil
}
