package main

import (
	"testing"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/guest"
	"github.com/osmhq/osm/sdk/node"
	"github.com/osmhq/osm/sdk/plugintest"
)

func TestMetadata(t *testing.T) {
	md, err := guest.CallMetadata(node.New(OS()))
	if err != nil {
		t.Fatal(err)
	}
	if md.Name != "ubuntu" || !md.SupportsOS("ubuntu", "22.04") || !md.SupportsOS("ubuntu", "24.04") || md.SupportsOS("ubuntu", "20.04") ||
		!md.SupportsUtility(abi.UtilityCloudInit) || md.SupportsUtility(abi.UtilityIgnition) || !md.Implements(abi.ExportValidate) {
		t.Errorf("metadata %+v", md)
	}
}

func TestProvisioning(t *testing.T) {
	tests := []struct {
		name, provider string
		config         map[string]string
		want, not      []string
	}{
		{name: "docker's containerd by default", provider: "aws",
			want: []string{`"$repo/$ID/gpg"`, "'containerd.io=2.2*'", "apt-mark hold containerd.io", "--force-confold",
				"apt_get install -y --no-install-recommends ca-certificates conntrack curl ebtables ethtool iptables ipvsadm kmod nfs-common socat\n",
				"systemctl mask swap.target ufw.service"},
			not: []string{"open-vm-tools"}},
		{name: "mirrored docker repository and pinned version", provider: "aws",
			config: map[string]string{"dockerRepoURL": "https://mirror.example.com/docker/", "containerdVersion": "2.2.1-1"},
			want:   []string{"repo='https://mirror.example.com/docker'", "'containerd.io=2.2.1-1'"}},
		{name: "distribution containerd", provider: "aws", config: map[string]string{"containerdSource": "distro"},
			want: []string{"apt_get install -y -o Dpkg::Options::=--force-confold containerd\n", "apt-mark hold containerd\n"},
			not:  []string{"containerd.io"}},
		{name: "preinstalled containerd", provider: "aws", config: map[string]string{"containerdSource": "preinstalled"},
			not: []string{"containerd.io", "install -y -o Dpkg::Options::=--force-confold containerd"}},
		{name: "vsphere guest tools and extra packages", provider: "vsphere", config: map[string]string{"extraPackages": "multipath-tools,lvm2"},
			want: []string{"socat open-vm-tools multipath-tools lvm2\n"}},
		{name: "nutanix iSCSI", provider: "nutanix", want: []string{"open-iscsi", "systemctl enable --now iscsid.service"}},
		{name: "kubevirt guest agent", provider: "kubevirt", want: []string{"qemu-guest-agent", "systemctl enable --now qemu-guest-agent.service"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := plugintest.Request("ubuntu", "24.04", abi.UtilityCloudInit, tt.provider, abi.StageProvisioning)
			req.Config = tt.config
			cfg := plugintest.Render(t, node.New(OS()), req)
			plugintest.Contains(t, "osm-setup", plugintest.File(t, cfg, node.SetupScriptPath), tt.want, tt.not)
			if !plugintest.Masked(cfg, "ufw.service") {
				t.Errorf("ufw is not masked")
			}
			if got := plugintest.File(t, cfg, "/etc/containerd/config.toml"); got != plugintest.ContainerdConfig {
				t.Errorf("config.toml = %q, want the host's verbatim", got)
			}
		})
	}
}

func TestBootstrapProviderQuirks(t *testing.T) {
	for provider, want := range map[string][]string{
		"hetzner": {"FallbackDNS=1.1.1.1", "systemctl restart systemd-resolved"},
		"azure":   {"cloud-init clean\ncloud-init init --local"},
		"aws":     nil,
	} {
		script := plugintest.File(t, plugintest.Render(t, node.New(OS()), plugintest.Request("ubuntu", "24.04", abi.UtilityCloudInit, provider, abi.StageBootstrap)),
			node.BootstrapScriptPath)
		var not []string
		if provider == "aws" {
			not = []string{"FallbackDNS", "init --local"}
		}
		plugintest.Contains(t, provider+" bootstrap", script, want, not)
	}
}

func TestValidate(t *testing.T) {
	resp, err := guest.CallValidate(node.New(OS()), &abi.ValidateRequest{OSVersion: "24.04", Config: map[string]string{"selinux": "keep"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Errors) != 1 || resp.Errors[0].Field != "spec.plugin.config.selinux" {
		t.Errorf("errors = %+v, want selinux refused as unknown on Ubuntu", resp.Errors)
	}
}

// BenchmarkProvisioningNative is the provisioning render compiled natively: the plugin's own work, without the
// sandbox (compare with plugins' BenchmarkPluginCallDefaultUbuntu).
func BenchmarkProvisioningNative(b *testing.B) {
	p := node.New(OS())
	req := plugintest.Request("ubuntu", "24.04", abi.UtilityCloudInit, "aws", abi.StageProvisioning)
	for b.Loop() {
		if _, err := guest.Call(p, req); err != nil {
			b.Fatal(err)
		}
	}
}
