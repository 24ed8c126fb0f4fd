package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/osmhq/osm/host/encode/ignition"
	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/guest"
	"github.com/osmhq/osm/sdk/node"
	"github.com/osmhq/osm/sdk/plugintest"
)

func request(utility, provider string, stage abi.Stage, spec string) *abi.RenderRequest {
	req := plugintest.Request("flatcar", "4230.2.0", utility, provider, stage)
	req.Context.OperatingSystem.Spec = json.RawMessage(spec)
	return req
}

func TestMetadata(t *testing.T) {
	md, err := guest.CallMetadata(node.New(OS()))
	if err != nil {
		t.Fatal(err)
	}
	if md.Name != "flatcar" || !md.SupportsOS("flatcar", "4230.2.0") || !md.SupportsUtility(abi.UtilityIgnition) ||
		!md.SupportsUtility(abi.UtilityCloudInit) || !md.SupportsCloudProvider("anexia") {
		t.Errorf("metadata %+v", md)
	}
}

func TestIgnitionBootstrap(t *testing.T) {
	req := request(abi.UtilityIgnition, "vsphere", abi.StageBootstrap, `{}`)
	req.Context.Network = abi.Network{CIDR: "192.168.1.10/24", Gateway: "192.168.1.1", DNSServers: []string{"192.168.1.2", "192.168.1.3"}}
	cfg := plugintest.Render(t, node.New(OS()), req)
	plugintest.Contains(t, "bootstrap", plugintest.File(t, cfg, node.BootstrapScriptPath),
		[]string{"t=/usr/share/oem/config.ign", "if [ -d /oem ]; then t=/oem/config.ign; fi", "touch /boot/flatcar/first_boot",
			"rm -f /etc/machine-id", "systemctl --no-block reboot"},
		[]string{"cloud-init clean", "coreos-cloudinit", "systemctl restart systemd-networkd"})
	if got := plugintest.File(t, cfg, staticNetworkPath); got != "[Match]\nName=en* eth*\n\n[Network]\nDHCP=no\nAddress=192.168.1.10/24\nGateway=192.168.1.1\nDNS=192.168.1.2\nDNS=192.168.1.3\n" {
		t.Errorf("static network:\n%s", got)
	}
	if _, err := ignition.Encode(cfg, ignition.Options{Hostname: "<MACHINE_NAME>"}); err != nil {
		t.Errorf("Ignition rejects the bootstrap: %v", err)
	}
	req.Context.Network.Gateway = "192.168.1.1\n[Network]"
	if _, err := guest.Call(node.New(OS()), req); err == nil {
		t.Errorf("a network value with a newline was accepted")
	}
}

func TestCloudInitBootstrap(t *testing.T) {
	cfg := plugintest.Render(t, node.New(OS()), request(abi.UtilityCloudInit, "anexia", abi.StageBootstrap, `{}`))
	plugintest.Contains(t, "bootstrap", plugintest.File(t, cfg, node.BootstrapScriptPath),
		[]string{"coreos-cloudinit --from-file=/var/lib/osm/provisioning.cfg", "systemctl start --no-block osm-setup.service"},
		[]string{"reboot", "cloud-init clean"})
}

func TestProvisioning(t *testing.T) {
	tests := []struct {
		name, spec, provider string
		masked, notMasked    []string
		updateProxy          bool
	}{
		{name: "updates on", spec: `{}`, provider: "openstack", notMasked: []string{"update-engine.service", "locksmithd.service"}, updateProxy: true},
		{name: "auto updates off", spec: `{"disableAutoUpdate": true}`, provider: "openstack", masked: []string{"update-engine.service", "locksmithd.service"}},
		{name: "update engine off", spec: `{"disableUpdateEngine": true}`, provider: "aws", masked: []string{"update-engine.service"}, notMasked: []string{"locksmithd.service"}},
		{name: "locksmithd off", spec: `{"disableLocksmithD": true}`, provider: "aws", masked: []string{"locksmithd.service"}, notMasked: []string{"update-engine.service"}, updateProxy: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := request(abi.UtilityIgnition, tt.provider, abi.StageProvisioning, tt.spec)
			req.Context.Proxy.HTTPProxy = "http://proxy:3128"
			cfg := plugintest.Render(t, node.New(OS()), req)
			for _, u := range tt.masked {
				if !plugintest.Masked(cfg, u) {
					t.Errorf("%s not masked", u)
				}
			}
			for _, u := range tt.notMasked {
				if plugintest.Masked(cfg, u) {
					t.Errorf("%s masked", u)
				}
			}
			if ue := cfg.Unit("update-engine.service"); (ue != nil && len(ue.DropIns) == 1 && strings.Contains(ue.DropIns[0].Content, "ALL_PROXY=http://proxy:3128")) != tt.updateProxy {
				t.Errorf("update-engine proxy drop-in = %+v, want %v", ue, tt.updateProxy)
			}
			containerd := cfg.Unit(node.ContainerdUnit)
			if containerd == nil || len(containerd.DropIns) != 2 || !strings.Contains(containerd.DropIns[1].Content, "--config ${CONTAINERD_CONFIG}") {
				t.Errorf("containerd is not pointed at /etc/containerd/config.toml: %+v", containerd)
			}
			setup := plugintest.File(t, cfg, node.SetupScriptPath)
			plugintest.Contains(t, "osm-setup", setup, []string{"systemctl disable --now docker.socket docker.service"},
				[]string{"apt-get", "dnf install"})
			nodeEnv := plugintest.File(t, cfg, node.NodeEnvScriptPath)
			if aws := strings.Contains(nodeEnv, "COREOS_EC2_HOSTNAME"); aws != (tt.provider == "aws") {
				t.Errorf("EC2 host name used = %v on %s", aws, tt.provider)
			}
			if k := cfg.Unit(node.KubeletUnit); (len(k.DropIns) == 1) != (tt.provider == "aws") {
				t.Errorf("kubelet drop-ins %+v on %s", k.DropIns, tt.provider)
			}
			if cfg.File(node.ProvisioningCommandsPath) != nil {
				t.Errorf("with Ignition the host runs the commands itself")
			}
			if _, err := ignition.Encode(cfg, ignition.Options{}); err != nil {
				t.Errorf("Ignition rejects the provisioning configuration: %v", err)
			}
		})
	}
}

// TestCloudInitCommands: coreos-cloudinit runs neither bootcmd nor runcmd, so osm-setup runs both.
func TestCloudInitCommands(t *testing.T) {
	req := request(abi.UtilityCloudInit, "anexia", abi.StageProvisioning, `{}`)
	req.Input.Modules = &abi.Modules{BootCMD: []string{"echo boot"}, RunCMD: []string{"echo run"}}
	cfg := plugintest.Render(t, node.New(OS()), req)
	if got := plugintest.File(t, cfg, node.ProvisioningCommandsPath); !strings.HasSuffix(got, "echo boot\necho run\n") {
		t.Errorf("provisioning commands:\n%s", got)
	}
}
