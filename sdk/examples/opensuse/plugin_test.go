package main

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/node"
	"github.com/osmhq/osm/sdk/plugintest"
)

// TestUserDataPassesCloudInit renders both stages for every provider, runs the harness's checks and validates
// the final user-data, with what the host adds, with the real cloud-init.
func TestUserDataPassesCloudInit(t *testing.T) {
	for _, provider := range OS().CloudProviders {
		for _, stage := range []abi.Stage{abi.StageBootstrap, abi.StageProvisioning} {
			t.Run(provider+"/"+string(stage), func(t *testing.T) {
				req := plugintest.Request("opensuse", "15.6", abi.UtilityCloudInit, provider, stage)
				cfg := plugintest.Check(t, plugintest.Native(node.New(OS())), req)
				data, err := plugintest.UserData(stage, provider, cfg, nil)
				if err != nil {
					t.Fatal(err)
				}
				plugintest.CloudInitSchema(t, provider+"/"+string(stage), data)
			})
		}
	}
}

// TestGolden keeps the rendered stages in testdata as text for review; -update rewrites them.
func TestGolden(t *testing.T) {
	for _, stage := range []abi.Stage{abi.StageBootstrap, abi.StageProvisioning} {
		req := plugintest.Request("opensuse", "15.6", abi.UtilityCloudInit, "hetzner", stage)
		resp, err := plugintest.Native(node.New(OS())).Render(req)
		if err != nil {
			t.Fatal(err)
		}
		plugintest.Golden(t, "testdata/"+string(stage)+".txt", plugintest.Format(resp))
	}
}

func TestSetupInstallsWithZypperAndVerifiedContainerd(t *testing.T) {
	req := plugintest.Request("opensuse", "15.6", abi.UtilityCloudInit, "aws", abi.StageProvisioning)
	req.Config = map[string]string{"extraPackages": "open-iscsi"}
	cfg := plugintest.Render(t, node.New(OS()), req)
	plugintest.Contains(t, "osm-setup", plugintest.File(t, cfg, node.SetupScriptPath), []string{
		"zypper --non-interactive install --no-recommends conntrack-tools ethtool iptables ipvsadm nfs-client runc socat tar open-iscsi",
		`download "$ctr_base/v$ctr_version/$f" "$tmp/$f" "$ctr_base/v$ctr_version/$f.sha256sum"`,
		"ctr_version='2.1.4'",
	}, []string{"apt-get", "dnf "})
	if !plugintest.Masked(cfg, "firewalld.service") {
		t.Error("firewalld is not masked")
	}
	if u := cfg.Unit(node.ContainerdUnit); u == nil || u.Content == nil || !strings.Contains(*u.Content, "/usr/local/bin/containerd") {
		t.Errorf("containerd.service = %+v, want the unit for the release binaries", u)
	}
}

func TestStaticNetworkIsWicked(t *testing.T) {
	req := plugintest.Request("opensuse", "15.6", abi.UtilityCloudInit, "vsphere", abi.StageBootstrap)
	req.Context.Network = abi.Network{CIDR: "192.168.1.10/24", Gateway: "192.168.1.1", DNSServers: []string{"192.168.1.2"}}
	cfg := plugintest.Render(t, node.New(OS()), req)
	if got := plugintest.File(t, cfg, "/etc/sysconfig/network/ifcfg-eth0"); !strings.Contains(got, "IPADDR='192.168.1.10/24'") {
		t.Errorf("ifcfg-eth0 = %q", got)
	}
	script := plugintest.File(t, cfg, node.BootstrapScriptPath)
	if i, j := strings.Index(script, "wicked ifreload all"), strings.Index(script, "curl "); i < 0 || j < i {
		t.Errorf("the static network must be up before the fetch:\n%s", script)
	}
	req.Context.Network.Gateway = "1.1.1.1'; reboot; '"
	if _, err := plugintest.Native(node.New(OS())).Render(req); err == nil {
		t.Error("a gateway with shell syntax was accepted")
	}
}

func TestValidateRefusesOldContainerd(t *testing.T) {
	p := node.New(OS())
	resp, err := p.Validate(&abi.ValidateRequest{OSName: "opensuse", OSVersion: "15.6", Config: map[string]string{"containerdVersion": "1.7.27"}})
	if err != nil || len(resp.Errors) != 1 || resp.Errors[0].Field != "spec.plugin.config.containerdVersion" {
		t.Errorf("validate = %+v, %v; want containerdVersion refused", resp, err)
	}
}

// TestWasm builds the module with the production flags and renders through the controller's sandbox.
func TestWasm(t *testing.T) {
	m := plugintest.Load(t, plugintest.Build(t, "."))
	req := plugintest.Request("opensuse", "15.6", abi.UtilityCloudInit, "aws", abi.StageBootstrap)
	plugintest.Check(t, plugintest.Wasm(m), req)
	// The registration code's placeholder crosses the sandbox's JSON both ways.
	req = plugintest.Request("opensuse", "15-SP6", abi.UtilityCloudInit, "aws", abi.StageProvisioning)
	req.Context.Secrets.Plugin = map[string]string{secretRegistrationCode: "__OSM_SECRET_PLUGIN_REGISTRATION_CODE__"}
	cfg := plugintest.Check(t, plugintest.Wasm(m), req)
	if got := plugintest.File(t, cfg, regcodePath); got != "__OSM_SECRET_PLUGIN_REGISTRATION_CODE__" {
		t.Errorf("through the sandbox, %s = %q", regcodePath, got)
	}
}

// TestSLESRegistrationCodeIsAPluginSecret hands the plugin the registration code as the host does, as a
// placeholder: it lands verbatim in a root-only file that SUSEConnect reads before zypper runs. Without the
// secret (openSUSE Leap) nothing registers, and a code given as plain config is refused.
func TestSLESRegistrationCodeIsAPluginSecret(t *testing.T) {
	const placeholder = "__OSM_SECRET_PLUGIN_REGISTRATION_CODE__"
	req := plugintest.Request("opensuse", "15-SP6", abi.UtilityCloudInit, "aws", abi.StageProvisioning)
	req.Context.Secrets.Plugin = map[string]string{secretRegistrationCode: placeholder}
	cfg := plugintest.Check(t, plugintest.Native(node.New(OS())), req)
	if got := plugintest.File(t, cfg, regcodePath); got != placeholder {
		t.Errorf("%s = %q, want the placeholder verbatim", regcodePath, got)
	}
	if f := cfg.File(regcodePath); f == nil || mode(f) != 0o600 {
		t.Errorf("%s must be readable by root only", regcodePath)
	}
	script := plugintest.File(t, cfg, node.SetupScriptPath)
	register, zypper := strings.Index(script, `SUSEConnect --regcode "$(cat `+regcodePath+`)"`), strings.Index(script, "zypper --non-interactive install")
	if register < 0 || zypper < register {
		t.Errorf("osm-setup must register before installing packages:\n%s", script)
	}
	if strings.Contains(script, placeholder) {
		t.Error("the placeholder is in the script; it belongs in the file only")
	}

	leap := plugintest.Request("opensuse", "15.6", abi.UtilityCloudInit, "aws", abi.StageProvisioning)
	cfg = plugintest.Render(t, node.New(OS()), leap)
	if cfg.File(regcodePath) != nil || strings.Contains(plugintest.File(t, cfg, node.SetupScriptPath), "SUSEConnect") {
		t.Error("without the secret the node must not register")
	}
	resp, err := node.New(OS()).Validate(&abi.ValidateRequest{OSName: "opensuse", OSVersion: "15-SP6",
		Config: map[string]string{secretRegistrationCode: "plain-text-code"}})
	if err != nil || len(resp.Errors) != 1 || !strings.Contains(resp.Errors[0].Message, "spec.plugin.secrets") {
		t.Errorf("validate = %+v, %v; want the plain-text code refused", resp, err)
	}
}

func mode(f *abi.File) fs.FileMode {
	m, _ := f.Mode()
	return m
}
