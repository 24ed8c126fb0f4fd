package render_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/containerd"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/sdk/abi"
)

// formatPlugin is a narrow stand-in for a format plugin (the real wasm path is tested in host/app): it declares
// an SSH user and its own utility, and its encoder lists each registry's structured credential placeholders
// the way a settings format would.
type formatPlugin struct {
	sshUser string
	inTree  []string // the context's CloudProvider.InTreeName of each render
}

func (p *formatPlugin) Metadata() abi.Metadata {
	return abi.Metadata{ABIVersion: abi.Version, Name: "fmt", Version: "1.0.0", OperatingSystems: []abi.OperatingSystem{{Name: "ubuntu"}},
		ProvisioningUtilities: []string{abi.UtilityIgnition, abi.UtilityCloudInit, "settings-format"}, CloudProviders: []string{"*"}, SSHUser: p.sshUser,
		BootContract: abi.BootContractJoinFromSettings}
}

func (p *formatPlugin) Identity() osmv1alpha1.ResolvedPlugin {
	return osmv1alpha1.ResolvedPlugin{Name: "fmt", Version: "1.0.0", Source: "builtin", Digest: "sha256:" + strings.Repeat("0", 64)}
}

func (p *formatPlugin) Render(_ context.Context, req *abi.RenderRequest) (*abi.RenderResponse, error) {
	p.inTree = append(p.inTree, req.Context.CloudProvider.InTreeName)
	return &abi.RenderResponse{ABIVersion: abi.Version, Config: req.Input}, nil
}

func (p *formatPlugin) Encode(_ context.Context, req *abi.EncodeRequest) (*abi.EncodeResponse, error) {
	var b strings.Builder
	for _, host := range abi.SortedKeys(req.Context.Secrets.Registries) {
		c := req.Context.Secrets.Registries[host]
		b.WriteString("[[credentials]]\nregistry = \"" + host + "\"\nauth = \"" + c.Auth + "\"\nusername = \"" + c.Username + "\"\n")
	}
	// The rest of the configuration, placeholders verbatim, as every encoder must.
	cfg, err := json.Marshal(req.Config)
	b.WriteString("# " + string(cfg) + "\n")
	return &abi.EncodeResponse{ABIVersion: abi.Version, UserData: []byte(b.String())}, err
}

type onePlugin struct{ p render.Plugin }

func (o onePlugin) Resolve(context.Context, string, *osmv1alpha1.PluginReference) (render.Plugin, error) {
	if o.p == nil {
		return nil, errors.New("no plugin")
	}
	return o.p, nil
}

func renderFormat(t *testing.T, p render.Plugin, utility string, registries []string) *render.Output {
	t.Helper()
	osp := &osmv1alpha1.OperatingSystemProfile{}
	loadYAML(t, upstreamDir+"/osp-ubuntu.yaml", osp)
	osp.Spec.ProvisioningUtility = osmv1alpha1.ProvisioningUtility(utility)
	osp.Spec.Plugin = &osmv1alpha1.PluginReference{Builtin: "fmt"}
	settings := upstreamSettings(true)
	settings.RegistryCredentialHosts = registries
	md := upstreamMD(t, "workers", osp.Name, "1.33.2", "ubuntu", "aws", `{}`)
	out, err := (&render.Renderer{Plugins: onePlugin{p}}).Render(context.Background(), render.Input{MachineDeployment: md, Profile: osp,
		Cluster: render.ClusterInfo{ServerURL: "https://api:6443", CACert: "ca"}, Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSSHUserIsThePluginsImage: the Ignition user-data authorizes the machine's SSH keys for the user the
// plugin declares (abi.Metadata.SSHUser), and for core when it declares none.
func TestSSHUserIsThePluginsImage(t *testing.T) {
	for declared, want := range map[string]string{"root": "root", "": "core"} {
		out := renderFormat(t, &formatPlugin{sshUser: declared}, abi.UtilityIgnition, nil)
		data, err := out.UserData(context.Background(), abi.StageProvisioning, render.SecretValues{BootstrapToken: "t", ProvisioningToken: "t"})
		if err != nil {
			t.Fatal(err)
		}
		var ign struct {
			Passwd struct {
				Users []struct {
					Name string   `json:"name"`
					Keys []string `json:"sshAuthorizedKeys"`
				} `json:"users"`
			} `json:"passwd"`
		}
		if err := json.Unmarshal(data, &ign); err != nil {
			t.Fatal(err)
		}
		if len(ign.Passwd.Users) != 1 || ign.Passwd.Users[0].Name != want || len(ign.Passwd.Users[0].Keys) != 1 {
			t.Errorf("declared %q: passwd.users = %+v, want the key for %s", declared, ign.Passwd.Users, want)
		}
	}
}

// TestRegistryCredentialsPerRegistry: a plugin sees one placeholder per field and registry
// (context.secrets.registries), never a value; the user-data holds each registry's values, and a registry the
// credentials lack gets empty fields rather than its placeholders.
func TestRegistryCredentialsPerRegistry(t *testing.T) {
	out := renderFormat(t, &formatPlugin{}, "settings-format", []string{"quay.io", "registry.example.com:5000"})
	auth, err := containerd.AuthTOML(map[string]containerd.RegistryAuth{"quay.io": {Username: "robot", Password: "s3cr\"et"}})
	if err != nil {
		t.Fatal(err)
	}
	data, err := out.UserData(context.Background(), abi.StageProvisioning, render.SecretValues{BootstrapToken: "t", ProvisioningToken: "t", RegistryAuth: auth})
	if err != nil {
		t.Fatal(err)
	}
	got := string(data)
	want := "auth = \"" + base64.StdEncoding.EncodeToString([]byte("robot:s3cr\"et")) + "\"\nusername = \"robot\"\n"
	if !strings.Contains(got, "registry = \"quay.io\"\n"+want) {
		t.Errorf("quay.io's credentials are not in the user-data:\n%s", got)
	}
	if !strings.Contains(got, "registry = \"registry.example.com:5000\"\nauth = \"\"\nusername = \"\"\n") || strings.Contains(got, "__OSM_SECRET_") {
		t.Errorf("a registry without credentials keeps placeholders or values:\n%s", got)
	}
	if p := render.RegistryPlaceholders("quay.io"); p.Auth == render.RegistryPlaceholders("quay.io:443").Auth || strings.Contains(p.Auth, render.Placeholders.RegistryAuth) {
		t.Errorf("placeholders are not unique: %+v", p)
	}
	// A preview (osmctl render, diff) passes the placeholders as the values and keeps them.
	preview, err := out.UserData(context.Background(), abi.StageProvisioning, render.SecretValues{BootstrapToken: "t", ProvisioningToken: "t", RegistryAuth: render.Placeholders.RegistryAuth})
	if err != nil || !strings.Contains(string(preview), render.RegistryPlaceholders("quay.io").Auth) {
		t.Errorf("a preview lost the structured placeholders (%v):\n%s", err, preview)
	}
	spec, _ := json.Marshal(out.Spec)
	if strings.Contains(string(spec), "robot") {
		t.Error("the OSC holds a credential")
	}
}

// TestInTreeNameFollowsTheKubelet: the context names an in-tree provider only for a kubelet that still has it
// (OpenStack's went in 1.26, AWS's in 1.27, all from 1.29), and never with an external cloud provider.
func TestInTreeNameFollowsTheKubelet(t *testing.T) {
	for _, tt := range []struct {
		provider, kubelet string
		external          bool
		want              string
	}{
		{"aws", "1.26.5", false, "aws"},
		{"aws", "1.27.0", false, ""},
		{"openstack", "1.25.9", false, "openstack"},
		{"openstack", "1.26.0", false, ""},
		{"azure", "1.28.3", false, "azure"},
		{"azure", "1.29.0", false, ""},
		{"aws", "1.26.5", true, ""},
		{"hetzner", "1.26.5", false, ""},
	} {
		p := &formatPlugin{}
		osp := &osmv1alpha1.OperatingSystemProfile{}
		loadYAML(t, upstreamDir+"/osp-ubuntu.yaml", osp)
		osp.Spec.Plugin = &osmv1alpha1.PluginReference{Builtin: "fmt"}
		osp.Spec.SupportedCloudProviders = append(osp.Spec.SupportedCloudProviders, osmv1alpha1.CloudProviderSpec{Name: tt.provider})
		md := upstreamMD(t, "workers", osp.Name, tt.kubelet, "ubuntu", tt.provider, `{}`)
		_, err := (&render.Renderer{Plugins: onePlugin{p}}).Render(context.Background(), render.Input{MachineDeployment: md, Profile: osp,
			Cluster: render.ClusterInfo{ServerURL: "https://api:6443", CACert: "ca"}, Settings: upstreamSettings(tt.external)})
		if err != nil {
			t.Fatalf("%s %s: %v", tt.provider, tt.kubelet, err)
		}
		if len(p.inTree) == 0 {
			t.Fatalf("%s %s: the plugin never rendered", tt.provider, tt.kubelet)
		}
		for _, got := range p.inTree {
			if got != tt.want {
				t.Errorf("%s kubelet %s external %v: InTreeName %q, want %q", tt.provider, tt.kubelet, tt.external, got, tt.want)
			}
		}
	}
}
