package render

import (
	"strings"

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
}

func (v SecretValues) replacer() *strings.Replacer {
	return strings.NewReplacer(
		Placeholders.BootstrapToken, v.BootstrapToken,
		Placeholders.ProvisioningToken, v.ProvisioningToken,
		Placeholders.CloudConfig, v.CloudConfig,
		Placeholders.RegistryAuth, v.RegistryAuth,
		Placeholders.RHSubscriptionPassword, v.RHSubscriptionPassword,
	)
}

// SubstituteSecrets returns a copy of cfg with every placeholder replaced by its value. Encoders run on the
// result, after substitution, so a file's transport encoding (base64, gzip) can never hide a placeholder.
func SubstituteSecrets(cfg *abi.NodeConfig, v SecretValues) *abi.NodeConfig {
	r := v.replacer()
	out := &abi.NodeConfig{UserSSHKeys: append([]string(nil), cfg.UserSSHKeys...)}
	for _, f := range cfg.Files {
		if in := f.Content.Inline; in != nil {
			f.Content = abi.FileContent{Inline: &abi.FileContentInline{Encoding: in.Encoding, Data: r.Replace(in.Data)}}
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
