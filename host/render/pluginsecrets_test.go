package render_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/sdk/abi"
)

const (
	regcodeValue       = "REG-0000-secret-value"
	regcodePlaceholder = "__OSM_SECRET_PLUGIN_REGISTRATION_CODE__"
)

// secretPlugin is a narrow stand-in for a plugin (the real wasm path is tested in host/app): it writes the
// registration-code placeholder into a file, records the secrets each call saw, and its encoder can drop the
// plugin secret's placeholder while keeping the others.
type secretPlugin struct {
	name   string
	schema []abi.ConfigOption
	drop   bool
	mu     sync.Mutex
	seen   []map[string]string
}

func (p *secretPlugin) Metadata() abi.Metadata {
	return abi.Metadata{ABIVersion: abi.Version, Name: p.name, Version: "1.0.0", OperatingSystems: []abi.OperatingSystem{{Name: "ubuntu"}},
		ProvisioningUtilities: []string{abi.UtilityCloudInit, "secret-format"}, CloudProviders: []string{"*"}, ConfigSchema: p.schema}
}

func (p *secretPlugin) Identity() osmv1alpha1.ResolvedPlugin {
	return osmv1alpha1.ResolvedPlugin{Name: p.name, Version: "1.0.0", Source: "builtin", Digest: "sha256:" + strings.Repeat("0", 64)}
}

func (p *secretPlugin) Render(_ context.Context, req *abi.RenderRequest) (*abi.RenderResponse, error) {
	p.mu.Lock()
	p.seen = append(p.seen, req.Context.Secrets.Plugin)
	p.mu.Unlock()
	cfg := req.Input
	if code, err := req.Context.Secrets.PluginSecret("registration-code"); err == nil && req.Stage == abi.StageProvisioning {
		cfg.SetFile(abi.PlainFile("/etc/regcode", 0o600, "code="+code+"\n"))
	}
	return &abi.RenderResponse{ABIVersion: abi.Version, Config: cfg}, nil
}

func (p *secretPlugin) Encode(_ context.Context, req *abi.EncodeRequest) (*abi.EncodeResponse, error) {
	data, err := json.Marshal(req.Config)
	if p.drop {
		data = []byte(strings.ReplaceAll(string(data), regcodePlaceholder, "dropped"))
	}
	return &abi.EncodeResponse{ABIVersion: abi.Version, UserData: data}, err
}

type secretPlugins map[string]*secretPlugin

func (s secretPlugins) Resolve(_ context.Context, _ string, ref *osmv1alpha1.PluginReference) (render.Plugin, error) {
	if p, ok := s[ref.Builtin]; ok {
		return p, nil
	}
	return nil, errors.New("no such plugin")
}

// secretProfile is upstream's Ubuntu profile rendered by plugin "main", with the registration-code secret, and
// plugin "pipe" after it in spec.plugins.
func secretProfile(t *testing.T, utility string) *osmv1alpha1.OperatingSystemProfile {
	osp := &osmv1alpha1.OperatingSystemProfile{}
	loadYAML(t, filepath.Join(upstreamDir, "osp-ubuntu.yaml"), osp)
	osp.Spec.ProvisioningUtility = osmv1alpha1.ProvisioningUtility(utility)
	osp.Spec.Plugin = &osmv1alpha1.PluginReference{Builtin: "main", Secrets: []osmv1alpha1.PluginSecret{
		{Name: "registration-code", SecretRef: osmv1alpha1.PluginSecretKeyRef{Name: "sles", Key: "code"}}}}
	osp.Spec.Plugins = []osmv1alpha1.PluginReference{{Builtin: "pipe"}}
	return osp
}

func renderSecretProfile(t *testing.T, osp *osmv1alpha1.OperatingSystemProfile, plugins secretPlugins) (*render.Output, error) {
	md := upstreamMD(t, "workers", osp.Name, "1.33.2", "ubuntu", "aws", `{}`)
	return (&render.Renderer{Plugins: plugins}).Render(context.Background(), render.Input{MachineDeployment: md, Profile: osp,
		Cluster: render.ClusterInfo{ServerURL: "https://api:6443", CACert: "ca"}, Settings: upstreamSettings(true)})
}

// TestPluginSecretsArePlaceholdersUntilUserData renders a profile whose plugin writes a plugin secret: only the
// profile's plugin gets the placeholder, the OSC keeps it, and the user-data holds the value; user-data without
// the value, an encoder that drops the placeholder and a profile that lacks a secret the plugin requires fail
// with their reasons.
func TestPluginSecretsArePlaceholdersUntilUserData(t *testing.T) {
	if got := render.PluginSecretPlaceholder("registration-code"); got != regcodePlaceholder {
		t.Fatalf("PluginSecretPlaceholder = %q", got)
	}
	plugins := secretPlugins{"main": {name: "main"}, "pipe": {name: "pipe"}}
	osp := secretProfile(t, abi.UtilityCloudInit)
	out, err := renderSecretProfile(t, osp, plugins)
	if err != nil {
		t.Fatal(err)
	}
	for _, seen := range plugins["main"].seen {
		if len(seen) != 1 || seen["registration-code"] != regcodePlaceholder {
			t.Errorf("the profile's plugin saw plugin secrets %v, want only registration-code's placeholder", seen)
		}
	}
	for _, seen := range plugins["pipe"].seen {
		if len(seen) != 0 {
			t.Errorf("a spec.plugins plugin saw the profile plugin's secrets: %v", seen)
		}
	}
	if len(plugins["main"].seen) != 2 || len(plugins["pipe"].seen) != 2 {
		t.Fatalf("want two renders per plugin, got main %d, pipe %d", len(plugins["main"].seen), len(plugins["pipe"].seen))
	}
	osc, _ := json.Marshal(out.Spec)
	if !strings.Contains(string(osc), "code="+regcodePlaceholder) || strings.Contains(string(osc), regcodeValue) {
		t.Errorf("the OSC spec must hold the placeholder and not the value")
	}

	values := render.SecretValues{Plugin: map[string]string{"registration-code": regcodeValue}}
	data, err := out.UserData(context.Background(), abi.StageProvisioning, values)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "code="+regcodeValue) || strings.Contains(string(data), regcodePlaceholder) {
		t.Errorf("the provisioning user-data does not hold the substituted value:\n%s", data)
	}

	_, err = out.UserData(context.Background(), abi.StageProvisioning, render.SecretValues{})
	wantReason(t, "user-data without the value", err, osmv1alpha1.ReasonPluginSecretMissing, `no value for plugin secret "registration-code"`)

	// The trial render's values keep the placeholder.
	data, err = out.UserData(context.Background(), abi.StageProvisioning, render.SecretValues{Plugin: render.PluginSecretPlaceholders(osp)})
	if err != nil || !strings.Contains(string(data), "code="+regcodePlaceholder) {
		t.Errorf("placeholder values: %v", err)
	}

	// A plugin encoder must keep the plugin secret's placeholder as it keeps the credentials'.
	for _, drop := range []bool{false, true} {
		plugins := secretPlugins{"main": {name: "main", drop: drop}, "pipe": {name: "pipe"}}
		out, err := renderSecretProfile(t, secretProfile(t, "secret-format"), plugins)
		if err != nil {
			t.Fatal(err)
		}
		data, err := out.UserData(context.Background(), abi.StageProvisioning, values)
		if !drop {
			if err != nil || !strings.Contains(string(data), "code="+regcodeValue) {
				t.Errorf("plugin encoder: %v, value substituted: %t", err, strings.Contains(string(data), regcodeValue))
			}
			continue
		}
		wantReason(t, "encoder dropping the placeholder", err, osmv1alpha1.ReasonPluginFailed, "placeholder "+regcodePlaceholder)
	}

	// The plugin declares the secrets it needs; the profile must match.
	required := []abi.ConfigOption{{Name: "registration-code", Type: abi.ConfigSecret, Required: true}}
	missing := secretProfile(t, abi.UtilityCloudInit)
	missing.Spec.Plugin.Secrets = nil
	_, err = renderSecretProfile(t, missing, secretPlugins{"main": {name: "main", schema: required}, "pipe": {name: "pipe"}})
	wantReason(t, "a required secret missing", err, osmv1alpha1.ReasonPluginSecretMissing, "secret registration-code is required")
	if _, err := renderSecretProfile(t, osp, secretPlugins{"main": {name: "main", schema: required}, "pipe": {name: "pipe"}}); err != nil {
		t.Errorf("a profile providing the declared secret: %v", err)
	}
}

func wantReason(t *testing.T, what string, err error, reason, text string) {
	t.Helper()
	var re *render.Error
	if !errors.As(err, &re) || re.Reason != reason || !strings.Contains(err.Error(), text) {
		t.Errorf("%s: want %s naming %q, got %v", what, reason, text, err)
	}
	if err != nil && strings.Contains(err.Error(), regcodeValue) {
		t.Errorf("%s: the error holds the secret's value", what)
	}
}
