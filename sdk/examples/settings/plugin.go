package main

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/osmhq/osm/sdk/abi"
)

// Utility is the provisioning utility the plugin encodes for: profiles say provisioningUtility: settings-toml.
const Utility = "settings-toml"

// SettingsPath is where the OperatingSystemConfig shows the settings document; Encode makes it the user-data.
const SettingsPath = "/etc/osm/settings.toml"

// certsDir holds the hosts.toml files the host adds for registry mirrors; the settings carry the mirrors.
const certsDir = "/etc/containerd/certs.d/"

// Plugin renders both stages as the same settings document: the bootstrap stage is what the machine boots
// with and joins from; the provisioning stage, which nothing fetches, shows the same settings in the
// OperatingSystemConfig.
type Plugin struct{}

// Metadata declares the format and the boot contract plugintest checks the plugin against.
func (Plugin) Metadata() abi.Metadata {
	return abi.Metadata{Name: "settings", Version: "v0.1.0", Description: "Bottlerocket-style nodes: a TOML settings document as user-data",
		OperatingSystems: []abi.OperatingSystem{{Name: "bottlerocket", Versions: []string{"1.*"}}}, ProvisioningUtilities: []string{Utility},
		CloudProviders: []string{"aws", "vsphere"}, BootContract: abi.BootContractJoinFromSettings}
}

// Render writes the settings. A settings OS applies no files, units or commands, so a profile's templates that
// produce any are refused; the registry mirrors' hosts.toml files the host adds are carried as settings.
func (Plugin) Render(req *abi.RenderRequest) (*abi.RenderResponse, error) {
	in := req.Input
	for _, f := range in.Files {
		if !strings.HasPrefix(f.Path, certsDir) {
			return nil, fmt.Errorf("file %s: a settings OS writes no files; remove it from the profile's templates", f.Path)
		}
	}
	if len(in.Units) > 0 || in.Modules != nil && (len(in.Modules.BootCMD) > 0 || len(in.Modules.RunCMD) > 0) {
		return nil, fmt.Errorf("a settings OS runs no units or commands; remove them from the profile's templates")
	}
	c := req.Context
	if c.Cluster.ServerURL == "" || c.Cluster.CACert == "" || c.Secrets.BootstrapToken == "" {
		return nil, fmt.Errorf("the render context lacks the API server URL, the cluster CA or the bootstrap token placeholder")
	}
	var b strings.Builder
	b.WriteString("[settings.kubernetes]\n")
	kv(&b, "api-server", c.Cluster.ServerURL)
	kv(&b, "cluster-certificate", base64.StdEncoding.EncodeToString([]byte(c.Cluster.CACert)))
	kv(&b, "bootstrap-token", c.Secrets.BootstrapToken)
	kv(&b, "cluster-domain", c.Cluster.Domain)
	if len(c.Cluster.DNSIPs) > 0 {
		kv(&b, "cluster-dns-ip", c.Cluster.DNSIPs[0])
	}
	if c.Kubelet.Config.MaxPods != nil {
		fmt.Fprintf(&b, "max-pods = %d\n", *c.Kubelet.Config.MaxPods)
	}
	if p := c.Proxy; p.HTTPProxy != "" {
		b.WriteString("\n[settings.network]\n")
		kv(&b, "https-proxy", p.HTTPProxy)
		b.WriteString("no-proxy = " + list(strings.Split(p.NoProxy, ",")) + "\n")
	}
	mirrors := c.ContainerRuntime.ContainerdRegistryMirrors
	if len(c.ContainerRuntime.RegistryMirrors) > 0 && len(mirrors["docker.io"]) == 0 {
		mirrors = map[string][]string{"docker.io": c.ContainerRuntime.RegistryMirrors}
		for h, m := range c.ContainerRuntime.ContainerdRegistryMirrors {
			mirrors[h] = m
		}
	}
	for _, host := range abi.SortedKeys(mirrors) {
		b.WriteString("\n[[settings.container-registry.mirrors]]\n")
		kv(&b, "registry", host)
		b.WriteString("endpoint = " + list(mirrors[host]) + "\n")
	}
	// One entry per registry, each field its own placeholder (sdk/SPEC.md §5); auth is base64 and needs no
	// quoting whatever the password holds.
	for _, host := range abi.SortedKeys(c.Secrets.Registries) {
		b.WriteString("\n[[settings.container-registry.credentials]]\n")
		kv(&b, "registry", host)
		kv(&b, "auth", c.Secrets.Registries[host].Auth)
	}
	if c.HostCACert != "" {
		b.WriteString("\n[settings.pki.osm-host-ca]\ntrusted = true\n")
		kv(&b, "data", base64.StdEncoding.EncodeToString([]byte(c.HostCACert)))
	}
	cfg := abi.NodeConfig{Files: []abi.File{abi.PlainFile(SettingsPath, 0o600, b.String())}, UserSSHKeys: in.UserSSHKeys}
	return &abi.RenderResponse{ABIVersion: abi.Version, Config: cfg}, nil
}

// Encode returns the settings document as the user-data, placeholders verbatim (the host substitutes them).
func (Plugin) Encode(req *abi.EncodeRequest) (*abi.EncodeResponse, error) {
	f := req.Config.File(SettingsPath)
	if f == nil || f.Content.Inline == nil {
		return nil, fmt.Errorf("the configuration has no %s; profiles with provisioningUtility %s need the settings plugin", SettingsPath, Utility)
	}
	return &abi.EncodeResponse{ABIVersion: abi.Version, UserData: []byte(f.Content.Inline.Data)}, nil
}

func kv(b *strings.Builder, key, value string) {
	if value != "" {
		b.WriteString(key + " = " + quote(value) + "\n")
	}
}

func list(items []string) string {
	out := make([]string, 0, len(items))
	for _, it := range items {
		if it = strings.TrimSpace(it); it != "" {
			out = append(out, quote(it))
		}
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// quote is a TOML basic string: backslash, quote and control characters escaped.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteString(`\` + string(r))
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String() + `"`
}
