package abi

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Version is the ABI version this package describes. The host refuses a module whose metadata declares a
// different major version, before calling anything else in it.
const Version = "v1"

// Names of the functions a plugin exports. Metadata and render are required; validate and encode are optional.
const (
	ExportMetadata = "osm_metadata"
	ExportRender   = "osm_render"
	ExportValidate = "osm_validate"
	ExportEncode   = "osm_encode"
	// ExportWarmup is optional and never called with a request: the host calls it once, after the module's
	// initialisation, on the instance it snapshots, so that what a first render builds lazily is part of every
	// instance's starting state (SPEC.md §6). The SDK's guest package implements it by rendering a sample.
	ExportWarmup = "osm_warmup"
)

// Stage is one of the two configurations rendered per MachineDeployment.
type Stage string

const (
	// StageBootstrap is the small user-data handed to the VM by machine-controller. It must fetch the
	// provisioning configuration and hand it to the provisioning utility.
	StageBootstrap Stage = "bootstrap"
	// StageProvisioning is the full configuration that turns the VM into a node.
	StageProvisioning Stage = "provisioning"
)

// Provisioning utilities the host can encode for itself. A plugin with an osm_encode export may declare
// others in its metadata.
const (
	UtilityCloudInit = "cloud-init"
	UtilityIgnition  = "ignition"
)

// Major returns the major part of an ABI version string ("v1" for "v1", "v1.2" or "v1beta1").
func Major(v string) string {
	v = strings.TrimSpace(v)
	if !strings.HasPrefix(v, "v") {
		return ""
	}
	end := 1
	for end < len(v) && v[end] >= '0' && v[end] <= '9' {
		end++
	}
	if end == 1 {
		return ""
	}
	return v[:end]
}

// CheckVersion reports whether the host, which speaks Version, can talk to a plugin declaring v.
func CheckVersion(v string) error {
	if v == "" {
		return fmt.Errorf("plugin metadata has no abiVersion; this host speaks ABI %s", Version)
	}
	if Major(v) != Version {
		return fmt.Errorf("plugin speaks ABI %q but this host speaks ABI %s; rebuild the plugin with an SDK for ABI %s", v, Version, Version)
	}
	return nil
}

// Metadata is what osm_metadata returns. The host reads it once per module, right after loading it.
type Metadata struct {
	// ABIVersion is the ABI the plugin was built for; it must be Version.
	ABIVersion string `json:"abiVersion"`
	// Name identifies the plugin, e.g. "ubuntu". Lower case, digits and dashes.
	Name string `json:"name"`
	// Version is the plugin's own semantic version.
	Version string `json:"version"`
	// Description is one line for humans.
	Description string `json:"description,omitempty"`
	// OperatingSystems lists the operating systems and versions the plugin renders for. A version may end in
	// "*" to match a prefix ("9.*").
	OperatingSystems []OperatingSystem `json:"operatingSystems"`
	// ProvisioningUtilities lists the utilities the plugin renders for ("cloud-init", "ignition", or a name
	// of the plugin's own when it exports osm_encode).
	ProvisioningUtilities []string `json:"provisioningUtilities"`
	// CloudProviders lists the machine-controller cloud providers the plugin supports; "*" means any.
	CloudProviders []string `json:"cloudProviders"`
	// ConfigSchema describes the keys the plugin accepts in OSP spec.plugin.config.
	ConfigSchema []ConfigOption `json:"configSchema,omitempty"`
	// RealIdentity asks for the MachineDeployment's real name, namespace and revision in every request. Without
	// it the host may hand the plugin IdentityPlaceholders for them and substitute the real values into what it
	// returns, which lets it render MachineDeployments that differ only in those once. Set it when the plugin
	// computes on them (cuts, hashes, compares) instead of only copying them into its output.
	RealIdentity bool `json:"realIdentity,omitempty"`
	// BootContract is how the plugin's bootstrap stage makes a machine a node (sdk/SPEC.md §9):
	// BootContractFetchThenApply (also "") or BootContractJoinFromSettings. plugintest checks a plugin's
	// output against the contract it declares here.
	BootContract string `json:"bootContract,omitempty"`
	// SSHUser is the image's user the machine's SSH keys (context.sshPublicKeys) are authorized for when the
	// host encodes the configuration (Ignition); empty: the utility's default (Ignition: core).
	SSHUser string `json:"sshUser,omitempty"`
	// Exports lists the ABI functions the plugin implements. The SDK's guest package fills it in, because a
	// Go plugin built with it always links all four export symbols and answers the ones it does not implement
	// with an error. When it is empty the host goes by the module's export table alone.
	Exports []string `json:"exports,omitempty"`
}

// Boot contracts (Metadata.BootContract, sdk/SPEC.md §9).
const (
	// BootContractFetchThenApply: the bootstrap stage fetches the provisioning Secret from the API server with
	// the provisioning token, verifying TLS with the cluster CA, and hands it to the provisioning utility.
	BootContractFetchThenApply = "fetch-then-apply"
	// BootContractJoinFromSettings: the bootstrap stage itself carries what the node needs to join (API
	// server URL, cluster CA, the kubelet's bootstrap token), as settings the OS applies at its first boot;
	// nothing is fetched.
	BootContractJoinFromSettings = "join-from-settings"
)

// OperatingSystem is an OS a plugin supports.
type OperatingSystem struct {
	Name     string   `json:"name"`
	Versions []string `json:"versions,omitempty"`
}

// ConfigOption describes one key of a plugin's configuration. Values travel as strings (OSP
// spec.plugin.config is a map of strings); Type says how the host reads and checks them.
type ConfigOption struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Type is ConfigString (the default when empty), ConfigBool, ConfigInt, ConfigList, ConfigEnum or
	// ConfigSecret (a plugin secret, not a config key).
	Type     string   `json:"type,omitempty"`
	Default  string   `json:"default,omitempty"`
	Required bool     `json:"required,omitempty"`
	Enum     []string `json:"enum,omitempty"`
}

// SupportsOS reports whether the plugin declares the OS name and version.
func (m *Metadata) SupportsOS(name, version string) bool {
	for _, os := range m.OperatingSystems {
		if os.Name != name {
			continue
		}
		if len(os.Versions) == 0 || version == "" {
			return true
		}
		for _, v := range os.Versions {
			if v == version || (strings.HasSuffix(v, "*") && strings.HasPrefix(version, strings.TrimSuffix(v, "*"))) {
				return true
			}
		}
	}
	return false
}

// Implements reports whether the plugin declares the export. A plugin that lists no exports is taken to
// implement everything it exports; the host checks the module's export table as well.
func (m *Metadata) Implements(export string) bool {
	return len(m.Exports) == 0 || contains(m.Exports, export)
}

// SupportsUtility reports whether the plugin renders for the provisioning utility.
func (m *Metadata) SupportsUtility(u string) bool { return contains(m.ProvisioningUtilities, u) }

// SupportsCloudProvider reports whether the plugin supports the cloud provider.
func (m *Metadata) SupportsCloudProvider(p string) bool {
	return contains(m.CloudProviders, "*") || contains(m.CloudProviders, p)
}

// Validate checks the metadata itself, so that a malformed plugin is refused when it is loaded rather than
// when it first renders.
func (m *Metadata) Validate() error {
	if err := CheckVersion(m.ABIVersion); err != nil {
		return err
	}
	var problems []string
	if m.Name == "" {
		problems = append(problems, "name is empty")
	}
	if m.Version == "" {
		problems = append(problems, "version is empty")
	}
	if len(m.OperatingSystems) == 0 {
		problems = append(problems, "operatingSystems is empty")
	}
	if len(m.ProvisioningUtilities) == 0 {
		problems = append(problems, "provisioningUtilities is empty")
	}
	if len(m.CloudProviders) == 0 {
		problems = append(problems, "cloudProviders is empty")
	}
	switch m.BootContract {
	case "", BootContractFetchThenApply, BootContractJoinFromSettings:
	default:
		problems = append(problems, fmt.Sprintf("bootContract %q is none of %s, %s", m.BootContract, BootContractFetchThenApply, BootContractJoinFromSettings))
	}
	for _, o := range m.ConfigSchema {
		if err := o.checkSchema(); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("invalid plugin metadata: %s", strings.Join(problems, ", "))
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// RenderRequest is the input of osm_render: everything the plugin may use, and what the profile's templates
// produced for the stage. The plugin returns the final configuration; it may keep, change, add or drop any of
// the input.
type RenderRequest struct {
	ABIVersion string `json:"abiVersion"`
	// Stage is the configuration being rendered.
	Stage Stage `json:"stage"`
	// ProvisioningUtility is the utility the output is for.
	ProvisioningUtility string `json:"provisioningUtility"`
	// Config is the OSP's spec.plugin.config, with the schema's defaults filled in.
	Config map[string]string `json:"config,omitempty"`
	// Context describes the machines, the cluster and the controller's node settings.
	Context RenderContext `json:"context"`
	// Input is the output of the profile's templates for this stage.
	Input NodeConfig `json:"input"`
}

// RenderResponse is the output of osm_render.
type RenderResponse struct {
	ABIVersion string     `json:"abiVersion"`
	Config     NodeConfig `json:"config"`
	// Warnings are shown to the operator as events; they do not fail the render.
	Warnings []string `json:"warnings,omitempty"`
	// DeferredCommands, in a provisioning stage's response, says that the provisioning utility will not run some
	// of the configuration's command modules when the bootstrap applies it, and that the node runs them from a
	// script instead. Commands added after this plugin ran (by the profile's later plugins or by extensions) are
	// appended to that script by the host, so that they run wherever the plugin's own do.
	DeferredCommands *DeferredCommands `json:"deferredCommands,omitempty"`
}

// DeferredCommands names the script the node runs once it is set up, and the modules whose commands belong in it.
type DeferredCommands struct {
	// Path is the script, a file of the configuration (or one the host adds, mode 0700, when it is absent).
	Path string `json:"path"`
	// BootCMD and RunCMD are the modules the provisioning utility does not run.
	BootCMD bool `json:"bootcmd,omitempty"`
	RunCMD  bool `json:"runcmd,omitempty"`
}

// ValidateRequest is the input of osm_validate, called by the admission webhook for each profile that uses
// the plugin.
type ValidateRequest struct {
	ABIVersion          string            `json:"abiVersion"`
	OSName              string            `json:"osName"`
	OSVersion           string            `json:"osVersion"`
	ProvisioningUtility string            `json:"provisioningUtility"`
	CloudProviders      []string          `json:"cloudProviders"`
	Config              map[string]string `json:"config,omitempty"`
}

// ValidateResponse lists what is wrong with a profile, if anything.
type ValidateResponse struct {
	ABIVersion string       `json:"abiVersion"`
	Errors     []FieldError `json:"errors,omitempty"`
}

// FieldError is a problem with one field of the profile, as a path such as "spec.plugin.config.mirror".
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (e FieldError) Error() string { return e.Field + ": " + e.Message }

// EncodeRequest is the input of osm_encode, called instead of the host's encoders when the profile's
// provisioning utility is one the host does not know.
type EncodeRequest struct {
	ABIVersion          string        `json:"abiVersion"`
	Stage               Stage         `json:"stage"`
	ProvisioningUtility string        `json:"provisioningUtility"`
	Context             RenderContext `json:"context"`
	Config              NodeConfig    `json:"config"`
}

// EncodeResponse is the user-data.
type EncodeResponse struct {
	ABIVersion string `json:"abiVersion"`
	// UserData is the encoded configuration (base64 in JSON).
	UserData []byte `json:"userData"`
}

// Marshal encodes v as JSON. It exists so that hosts, guests and tests agree on one encoding.
func Marshal(v any) ([]byte, error) { return json.Marshal(v) }
