package render

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

// ProvisioningSizeLimit is the largest provisioning user-data OSM writes: a Secret holds at most 1 MiB, and
// the default profiles' provisioning data is about 20 KiB, so anything near the limit is a profile, extension
// or plugin gone wrong, refused before it reaches the API server.
const ProvisioningSizeLimit = 512 * 1024

// UserData returns the encoded user-data of a stage with the credentials substituted. Credentials that come
// from the MachineDeployment itself (a RHEL subscription password, an overwritten cloud-config) are added to
// secrets here; the caller provides the ones it manages (tokens, registry credentials).
func (o *Output) UserData(ctx context.Context, stage abi.Stage, secrets SecretValues) ([]byte, error) {
	cfg := o.stages[stage]
	if cfg == nil {
		return nil, fmt.Errorf("no %s stage rendered", stage)
	}
	if err := o.checkPluginSecrets(secrets); err != nil {
		return nil, err
	}
	if stage != abi.StageProvisioning {
		secrets.Plugin = nil // plugin secrets belong to the provisioning stage only
	}
	if secrets.RHSubscriptionPassword == "" {
		secrets.RHSubscriptionPassword = o.fromMachine.RHSubscriptionPassword
	}
	if secrets.CloudConfig == "" {
		secrets.CloudConfig = o.fromMachine.CloudConfig
	}
	hostname := o.hostnameFor(stage)
	secrets.registryHosts = o.context.ContainerRuntime.RegistryCredentials

	var data []byte
	var err error
	switch o.Utility() {
	case abi.UtilityCloudInit:
		data, err = cloudinit.Encode(o.withMachineName(SubstituteSecrets(cfg, secrets), hostname), cloudinit.Options{Hostname: hostname,
			PackageUpgrade: o.distUpgrade, CoreOSUnits: o.Spec.OSName == osmv1alpha1.OperatingSystemFlatcar})
	case abi.UtilityIgnition:
		data, err = ignition.Encode(o.withMachineName(SubstituteSecrets(cfg, secrets), hostname), ignition.Options{Hostname: hostname, User: o.sshUser()})
	default:
		// A plugin encodes the configuration with placeholders, like everything else it sees; the host
		// substitutes in the encoded bytes.
		if data, err = o.pluginEncode(ctx, stage, o.withMachineName(cfg, hostname)); err == nil {
			data, err = o.substituteEncoded(stage, data, cfg, secrets)
		}
	}
	if re := (*Error)(nil); errors.As(err, &re) {
		return nil, &Error{Reason: re.Reason, Err: fmt.Errorf("encoding the %s stage for %s: %w", stage, o.Utility(), err), Transient: re.Transient}
	}
	if err != nil {
		return nil, withReason(osmv1alpha1.ReasonRenderFailed, fmt.Errorf("encoding the %s stage for %s: %w", stage, o.Utility(), err))
	}
	if stage == abi.StageBootstrap && len(data) > BootstrapSizeLimit {
		return nil, withReason(osmv1alpha1.ReasonBootstrapTooLarge,
			fmt.Errorf("the bootstrap user-data is %d bytes, more than the %d bytes providers accept; move files from spec.bootstrapConfig to spec.provisioningConfig", len(data), BootstrapSizeLimit))
	}
	if stage == abi.StageProvisioning && len(data) > ProvisioningSizeLimit {
		return nil, withReason(osmv1alpha1.ReasonProvisioningTooLarge,
			fmt.Errorf("the provisioning user-data is %d bytes, more than the %d bytes OSM writes into a Secret", len(data), ProvisioningSizeLimit))
	}
	return data, nil
}

// sshUser is the image's user for the machine's SSH keys, as the plugin declares it (abi.Metadata.SSHUser);
// empty for the encoder's default.
func (o *Output) sshUser() string {
	if o.plugin == nil {
		return ""
	}
	return o.plugin.Metadata().SSHUser
}

// hostnameFor is the hostname a stage sets: machine-controller's placeholder for the machine's name, which it
// replaces when it creates the VM. It never creates edge machines (they are brought up by hand from the
// user-data), so nothing would replace it there; as upstream OSM does, edge machines' cloud-config is named
// after the MachineDeployment instead.
func (o *Output) hostnameFor(stage abi.Stage) string {
	if stage != abi.StageBootstrap || !o.hostname {
		return ""
	}
	if o.Spec.CloudProvider.Name == CloudProviderEdge && o.Utility() == abi.UtilityCloudInit {
		return o.machineDeployment
	}
	return MachineNamePlaceholder
}

// CloudProviderEdge is machine-controller's provider for machines it does not create.
const CloudProviderEdge = "edge"

// withMachineName adds the file holding the machine's name to a bootstrap stage that sets the hostname.
func (o *Output) withMachineName(cfg *abi.NodeConfig, hostname string) *abi.NodeConfig {
	if hostname == "" {
		return cfg
	}
	out := *cfg
	out.Files = append(append([]abi.File(nil), cfg.Files...), abi.PlainFile(MachineNameFile, 0o600, hostname))
	return &out
}

// substituteEncoded puts the credentials into a plugin's encoded user-data. Every placeholder the configuration
// contains must appear verbatim in the output: an encoder that transformed one (base64, compression,
// escaping) would need the real value to do so, and plugins never get real values.
// An encoder may not add placeholders either (checkEncoded), and plugin secrets are substituted only in the
// provisioning stage.
func (o *Output) substituteEncoded(stage abi.Stage, data []byte, cfg *abi.NodeConfig, secrets SecretValues) ([]byte, error) {
	in, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	encoder := "plugin " + o.plugin.Metadata().Name
	if err := checkEncoded(encoder, stage, in, data); err != nil {
		return nil, err
	}
	for _, p := range o.allPlaceholders() {
		if bytes.Contains(in, []byte(p)) && !bytes.Contains(data, []byte(p)) {
			return nil, pluginFailed(fmt.Errorf(
				"the plugin's encoder dropped or transformed the credential placeholder %s; encoders must copy placeholders verbatim, the host substitutes them after encoding", p))
		}
	}
	if stage != abi.StageProvisioning {
		secrets.Plugin = nil
	}
	// The configuration holds the real names already (identity.go); the encoder may have copied the
	// placeholders of its context.
	return []byte(secrets.replacer().Replace(o.machineState.identity.replace(string(data)))), nil
}

func (o *Output) pluginEncode(ctx context.Context, stage abi.Stage, cfg *abi.NodeConfig) ([]byte, error) {
	if o.plugin == nil {
		return nil, fmt.Errorf("provisioning utility %q needs a plugin with an osm_encode export", o.Utility())
	}
	rc := o.pluginContext
	if o.plugin.Metadata().RealIdentity {
		rc = o.machineState.identity.realContext(rc)
	}
	resp, err := o.plugin.Encode(ctx, &abi.EncodeRequest{
		ABIVersion: abi.Version, Stage: stage, ProvisioningUtility: o.Utility(), Context: rc, Config: *cfg,
	})
	if err != nil {
		return nil, err
	}
	return resp.UserData, nil
}
