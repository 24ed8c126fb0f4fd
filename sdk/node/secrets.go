package node

import "github.com/osmhq/osm/sdk/abi"

// SecretOption declares a plugin secret (abi.ConfigSecret): a credential such as a registration code that the
// profile hands the plugin from a Secret (spec.plugin.secrets) and the plugin writes into the node's
// configuration as a placeholder, read with Request.Secret. The host checks at admission that a profile
// provides every required one and names no undeclared one.
func SecretOption(name, description string, required bool) Option {
	return Option{ConfigOption: abi.ConfigOption{Name: name, Type: abi.ConfigSecret, Required: required, Description: description}}
}

// Secret returns the placeholder of the plugin secret name. Copy it verbatim (not base64, not split, not
// quoted in a way that changes its bytes) into a file, a unit or a script line: the host replaces it with the
// Secret's value only in the user-data Secret, so neither the plugin nor the OperatingSystemConfig ever holds
// the value. It fails, naming what the profile must add, when the profile does not provide the secret; use
// Ctx.Secrets.Plugin directly for an optional one.
func (r *Request) Secret(name string) (string, error) {
	return r.Ctx.Secrets.PluginSecret(name)
}
