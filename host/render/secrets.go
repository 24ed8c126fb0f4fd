package render

import (
	"encoding/hex"
	"fmt"
	"strings"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/containerd"
	"github.com/osmhq/osm/sdk/abi"
)

// Placeholders stand in for credential material during rendering. Templates and plugins only ever see these
// strings; the real values are substituted when the user-data Secrets are written, so no credential can reach
// an OperatingSystemConfig, a plugin sandbox, a log line or an event. They are constants so that rendering
// stays a pure function of its inputs.
var Placeholders = abi.SecretPlaceholders{
	BootstrapToken:    "__OSM_SECRET_BOOTSTRAP_TOKEN__",
	ProvisioningToken: "__OSM_SECRET_PROVISIONING_TOKEN__",
	CloudConfig:       "__OSM_SECRET_CLOUD_CONFIG__",
	RegistryAuth:      "__OSM_SECRET_REGISTRY_AUTH__",
	// The RHEL subscription password comes from the MachineDeployment; it is kept out of the OSC all the same.
	RHSubscriptionPassword: "__OSM_SECRET_RH_SUBSCRIPTION_PASSWORD__",
}

// SecretValues are the real credentials the placeholders stand for.
type SecretValues struct {
	BootstrapToken    string
	ProvisioningToken string
	CloudConfig       string
	RegistryAuth      string
	// RHSubscriptionPassword is filled in by the pipeline from the MachineDeployment.
	RHSubscriptionPassword string
	// registryHosts are the registries whose structured placeholders (RegistryPlaceholders) UserData
	// substitutes, from the values in RegistryAuth ("" for a host RegistryAuth lacks).
	registryHosts []string
	// Plugin maps each name of the profile's spec.plugin.secrets to the value of the Secret key it refers to.
	// UserData refuses to write user-data without a value for every name (see PluginSecretPlaceholders for
	// renders that must keep the placeholders, such as a trial render).
	Plugin map[string]string
}

// placeholderPrefix begins every placeholder (TestEveryPlaceholderHasThePrefix).
const placeholderPrefix = "__OSM_SECRET_"

// substituter replaces placeholders by their values. Text without a placeholder comes back as it is: a
// strings.Replacer copies whatever it is given, and most of a configuration holds no credential. Copying it
// was 30 of the controller's 451 MB of allocations at 500 MachineDeployments (make bench-controller, five
// OSes, allocs profile).
type substituter struct{ r *strings.Replacer }

// Replace returns text with every placeholder replaced.
func (s substituter) Replace(text string) string {
	if !strings.Contains(text, placeholderPrefix) {
		return text
	}
	return s.r.Replace(text)
}

func (v SecretValues) replacer() substituter {
	pairs := []string{
		Placeholders.BootstrapToken, v.BootstrapToken,
		Placeholders.ProvisioningToken, v.ProvisioningToken,
		Placeholders.CloudConfig, v.CloudConfig,
		Placeholders.RegistryAuth, v.RegistryAuth,
		Placeholders.RHSubscriptionPassword, v.RHSubscriptionPassword,
	}
	for _, name := range abi.SortedKeys(v.Plugin) {
		pairs = append(pairs, PluginSecretPlaceholder(name), v.Plugin[name])
	}
	if len(v.registryHosts) > 0 {
		// RegistryAuth holds the tables containerd.AuthTOML wrote; a value that does not parse leaves every
		// registry's fields empty rather than its placeholders in place.
		auths, _ := containerd.ParseAuthTOML(v.RegistryAuth)
		for _, host := range v.registryHosts {
			p, a := RegistryPlaceholders(host), auths[host]
			if v.RegistryAuth == Placeholders.RegistryAuth {
				a = containerd.RegistryAuth{Username: p.Username, Password: p.Password, Auth: p.Auth, IdentityToken: p.IdentityToken} // a preview keeps them
			}
			pairs = append(pairs, p.Username, a.Username, p.Password, a.Password, p.Auth, a.Auth, p.IdentityToken, a.IdentityToken)
		}
	}
	return substituter{r: strings.NewReplacer(pairs...)}
}

// RegistryPlaceholders are the placeholders of registry host's credentials (abi.SecretPlaceholders.Registries):
// "__OSM_SECRET_REGISTRY_<host in hex>_<FIELD>__". Hex keeps them unique per host and free of characters a
// format would quote, and no placeholder contains another.
func RegistryPlaceholders(host string) abi.RegistryCredentials {
	p := "__OSM_SECRET_REGISTRY_" + strings.ToUpper(hex.EncodeToString([]byte(host))) + "_"
	return abi.RegistryCredentials{Username: p + "USERNAME__", Password: p + "PASSWORD__", Auth: p + "AUTH__", IdentityToken: p + "IDENTITY_TOKEN__"}
}

// PluginSecretPlaceholder is the placeholder of the plugin secret name (spec.plugin.secrets[].name):
// "__OSM_SECRET_PLUGIN_<NAME>__" with the name in upper case and dashes as underscores. Names are lower case
// letters, digits and dashes, so no two names share a placeholder, and no placeholder contains another.
func PluginSecretPlaceholder(name string) string {
	return "__OSM_SECRET_PLUGIN_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "__"
}

// PluginSecretPlaceholders maps each plugin secret of the profile to its placeholder: what the profile's
// plugin sees in its context (RenderContext.Secrets.Plugin), and, given as SecretValues.Plugin, the values
// that leave the placeholders in place (a trial render, `osmctl render` without the real values).
func PluginSecretPlaceholders(osp *osmv1alpha1.OperatingSystemProfile) map[string]string {
	return placeholdersOf(PluginSecretNames(osp))
}

// placeholdersOf maps each plugin secret name to its placeholder; nil for none.
func placeholdersOf(names []string) map[string]string {
	if len(names) == 0 {
		return nil
	}
	out := make(map[string]string, len(names))
	for _, n := range names {
		out[n] = PluginSecretPlaceholder(n)
	}
	return out
}

// PluginSecretNames lists the names of the profile's spec.plugin.secrets, in order.
func PluginSecretNames(osp *osmv1alpha1.OperatingSystemProfile) []string {
	if osp == nil || osp.Spec.Plugin == nil {
		return nil
	}
	names := make([]string, 0, len(osp.Spec.Plugin.Secrets))
	for _, s := range osp.Spec.Plugin.Secrets {
		names = append(names, s.Name)
	}
	return names
}

// PluginSecretPlaceholders maps each plugin secret of the rendered profile to its placeholder; given as
// SecretValues.Plugin, it keeps the placeholders in the user-data (previews, size comparisons).
func (o *Output) PluginSecretPlaceholders() map[string]string {
	return placeholdersOf(o.pluginSecrets)
}

// allPlaceholders lists every placeholder the configuration may hold: the credentials' and the profile's
// plugin secrets'.
func (o *Output) allPlaceholders() []string {
	out := []string{Placeholders.BootstrapToken, Placeholders.ProvisioningToken, Placeholders.CloudConfig,
		Placeholders.RegistryAuth, Placeholders.RHSubscriptionPassword}
	for _, name := range o.pluginSecrets {
		out = append(out, PluginSecretPlaceholder(name))
	}
	for _, host := range o.context.ContainerRuntime.RegistryCredentials {
		p := RegistryPlaceholders(host)
		out = append(out, p.Username, p.Password, p.Auth, p.IdentityToken)
	}
	return out
}

// checkPluginSecrets makes sure every plugin secret of the profile has a value: a missing one would be written
// as an empty string or as its placeholder, and a node would come up without its registration code.
func (o *Output) checkPluginSecrets(v SecretValues) error {
	for _, name := range o.pluginSecrets {
		if _, ok := v.Plugin[name]; !ok {
			return withReason(osmv1alpha1.ReasonPluginSecretMissing, fmt.Errorf("no value for plugin secret %q of spec.plugin.secrets", name))
		}
	}
	return nil
}

// SubstituteSecrets returns a copy of cfg with every placeholder replaced by its value. Encoders run on the
// result, after substitution, so a file's transport encoding (base64, gzip) can never hide a placeholder.
// Plugin secrets (v.Plugin) are substituted only into files; the render's stageGuard has refused a placeholder
// anywhere else, and UserData hands them only to the provisioning stage.
func SubstituteSecrets(cfg *abi.NodeConfig, v SecretValues) *abi.NodeConfig {
	files := v.replacer()
	v.Plugin = nil
	r := v.replacer()
	out := &abi.NodeConfig{UserSSHKeys: append([]string(nil), cfg.UserSSHKeys...)}
	for _, f := range cfg.Files {
		if in := f.Content.Inline; in != nil {
			f.Content = abi.FileContent{Inline: &abi.FileContentInline{Encoding: in.Encoding, Data: files.Replace(in.Data)}}
		}
		out.Files = append(out.Files, f)
	}
	for _, u := range cfg.Units {
		if u.Content != nil {
			c := r.Replace(*u.Content)
			u.Content = &c
		}
		dropIns := make([]abi.DropIn, 0, len(u.DropIns))
		for _, d := range u.DropIns {
			dropIns = append(dropIns, abi.DropIn{Name: d.Name, Content: r.Replace(d.Content)})
		}
		if len(dropIns) > 0 {
			u.DropIns = dropIns
		}
		out.Units = append(out.Units, u)
	}
	if m := cfg.Modules; m != nil {
		mm := &abi.Modules{YumRepoDir: m.YumRepoDir, YumRepos: m.YumRepos}
		for _, c := range m.BootCMD {
			mm.BootCMD = append(mm.BootCMD, r.Replace(c))
		}
		for _, c := range m.RunCMD {
			mm.RunCMD = append(mm.RunCMD, r.Replace(c))
		}
		if len(m.RHSubscription) > 0 {
			mm.RHSubscription = make(map[string]string, len(m.RHSubscription))
			for k, val := range m.RHSubscription {
				mm.RHSubscription[k] = r.Replace(val)
			}
		}
		out.Modules = mm
	}
	return out
}
