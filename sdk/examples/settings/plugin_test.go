package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/plugintest"
)

// registryAuth stands for the host's per-registry placeholder of quay.io's auth field.
const registryAuth = "__OSM_SECRET_REGISTRY_717561792E696F_AUTH__"

func request(provider string, stage abi.Stage) *abi.RenderRequest {
	req := plugintest.Request("bottlerocket", "1.30", Utility, provider, stage)
	req.Context.Proxy = abi.Proxy{HTTPProxy: "http://proxy:3128", NoProxy: "localhost, .svc"}
	req.Context.ContainerRuntime.RegistryMirrors = []string{"https://mirror.example.com"}
	req.Context.ContainerRuntime.RegistryCredentials = []string{"quay.io"}
	req.Context.Secrets.Registries = map[string]abi.RegistryCredentials{"quay.io": {Auth: registryAuth}}
	req.Input.Files = []abi.File{abi.PlainFile("/etc/containerd/certs.d/docker.io/hosts.toml", 0o600, "server = \"https://registry-1.docker.io\"\n")}
	return req
}

// settings is the part of the document the tests read back with a TOML parser.
type settings struct {
	Settings struct {
		Kubernetes struct {
			APIServer          string `toml:"api-server"`
			ClusterCertificate string `toml:"cluster-certificate"`
			BootstrapToken     string `toml:"bootstrap-token"`
		} `toml:"kubernetes"`
		Network struct {
			NoProxy []string `toml:"no-proxy"`
		} `toml:"network"`
		ContainerRegistry struct {
			Mirrors []struct {
				Registry string
				Endpoint []string
			} `toml:"mirrors"`
			Credentials []struct{ Registry, Auth string } `toml:"credentials"`
		} `toml:"container-registry"`
	} `toml:"settings"`
}

// TestJoinFromSettings: both stages on both providers pass plugintest.Check against the contract the plugin
// declares (join-from-settings: API server, CA and the kubelet's bootstrap token in the bootstrap stage, no
// fetch, no other credential), and the encoded user-data is valid TOML with the values in place.
func TestJoinFromSettings(t *testing.T) {
	for _, provider := range (Plugin{}).Metadata().CloudProviders {
		for _, stage := range []abi.Stage{abi.StageBootstrap, abi.StageProvisioning} {
			t.Run(provider+"/"+string(stage), func(t *testing.T) {
				req := request(provider, stage)
				cfg := plugintest.Check(t, plugintest.Native(Plugin{}), req)
				resp, err := Plugin{}.Encode(&abi.EncodeRequest{ABIVersion: abi.Version, Stage: stage, ProvisioningUtility: Utility, Context: req.Context, Config: *cfg})
				if err != nil {
					t.Fatal(err)
				}
				var s settings
				if _, err := toml.Decode(string(resp.UserData), &s); err != nil {
					t.Fatalf("the user-data is not TOML: %v\n%s", err, resp.UserData)
				}
				k, r := s.Settings.Kubernetes, s.Settings.ContainerRegistry
				if k.APIServer != req.Context.Cluster.ServerURL || k.BootstrapToken != plugintest.Placeholders.BootstrapToken || k.ClusterCertificate == "" {
					t.Errorf("kubernetes settings = %+v", k)
				}
				if len(r.Credentials) != 1 || r.Credentials[0].Registry != "quay.io" || r.Credentials[0].Auth != registryAuth {
					t.Errorf("credentials = %+v, want quay.io's auth placeholder", r.Credentials)
				}
				if len(r.Mirrors) != 1 || r.Mirrors[0].Registry != "docker.io" || strings.Join(s.Settings.Network.NoProxy, " ") != "localhost .svc" {
					t.Errorf("mirrors %+v, no-proxy %q", r.Mirrors, s.Settings.Network.NoProxy)
				}
			})
		}
	}
}

// TestContractIsChecked: the same settings declared as fetch-then-apply fail plugintest.Check's bootstrap
// checks, and a settings document without the token fails join-from-settings: the declaration is what is
// checked.
func TestContractIsChecked(t *testing.T) {
	req := request("aws", abi.StageBootstrap)
	rec := &recorder{TB: t}
	plugintest.CheckPlaceholders(rec, req, plugintest.Render(t, Plugin{}, req), abi.BootContractFetchThenApply)
	if !strings.Contains(rec.String(), "provisioning token") {
		t.Errorf("fetch-then-apply accepted a bootstrap stage that fetches nothing: %q", rec.String())
	}
	noToken := plugintest.Render(t, Plugin{}, req)
	noToken.Files[0].Content.Inline.Data = strings.ReplaceAll(noToken.Files[0].Content.Inline.Data, plugintest.Placeholders.BootstrapToken, "")
	rec = &recorder{TB: t}
	plugintest.CheckJoinFromSettings(rec, req, noToken)
	if !strings.Contains(rec.String(), "bootstrap token") {
		t.Errorf("join-from-settings accepted settings without the bootstrap token: %q", rec.String())
	}
}

func TestRefusesFilesAndUnits(t *testing.T) {
	req := request("aws", abi.StageProvisioning)
	req.Input.Files = append(req.Input.Files, abi.PlainFile("/etc/motd", 0o644, "hi"))
	if _, err := (Plugin{}).Render(req); err == nil || !strings.Contains(err.Error(), "/etc/motd") {
		t.Errorf("err = %v, want a refusal naming /etc/motd", err)
	}
}

// TestWasm renders and encodes through the module the controller would run.
func TestWasm(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin to wasm")
	}
	m := plugintest.Load(t, plugintest.Build(t, "."))
	if m.Metadata().BootContract != abi.BootContractJoinFromSettings || !m.Implements(abi.ExportEncode) {
		t.Fatalf("metadata %+v", m.Metadata())
	}
	req := request("aws", abi.StageBootstrap)
	cfg := plugintest.Check(t, plugintest.Wasm(m), req)
	resp, err := m.Encode(context.Background(), &abi.EncodeRequest{ABIVersion: abi.Version, Stage: req.Stage, ProvisioningUtility: Utility, Context: req.Context, Config: *cfg})
	if err != nil || !strings.Contains(string(resp.UserData), plugintest.Placeholders.BootstrapToken) {
		t.Fatalf("encode: %v\n%s", err, resp.UserData)
	}
}

type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) String() string { return strings.Join(r.errs, "\n") }
