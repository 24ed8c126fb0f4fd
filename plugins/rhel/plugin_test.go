package main

import (
	"strings"
	"testing"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/guest"
	"github.com/osmhq/osm/sdk/node"
	"github.com/osmhq/osm/sdk/node/dnf"
	"github.com/osmhq/osm/sdk/plugintest"
)

func TestMetadata(t *testing.T) {
	md, err := guest.CallMetadata(node.New(OS()))
	if err != nil {
		t.Fatal(err)
	}
	if md.Name != "rhel" || !md.SupportsOS("rhel", "9") || !md.SupportsOS("rhel", "9.6") || md.SupportsOS("rhel", "8.10") {
		t.Errorf("metadata %+v", md)
	}
}

func TestProvisioning(t *testing.T) {
	tests := []struct {
		name      string
		config    map[string]string
		want, not []string
	}{
		{name: "defaults", want: []string{"setenforce 0", "SELINUX=permissive", "dnf_install 'dnf-command(versionlock)'",
			"dnf_install 'containerd.io-2.2*'", "dnf versionlock add containerd.io", "dnf_install conntrack-tools ethtool iptables-nft ipvsadm nfs-utils socat tar\n",
			"systemctl mask swap.target firewalld.service"}},
		{name: "SELinux kept", config: map[string]string{"selinux": "keep"}, not: []string{"setenforce", "SELINUX=permissive"}},
		{name: "preinstalled containerd", config: map[string]string{"containerdSource": "preinstalled"}, not: []string{"containerd.io"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := plugintest.Request("rhel", "9.6", abi.UtilityCloudInit, "aws", abi.StageProvisioning)
			req.Config = tt.config
			cfg := plugintest.Render(t, node.New(OS()), req)
			plugintest.Contains(t, "osm-setup", plugintest.File(t, cfg, node.SetupScriptPath), tt.want, tt.not)
			repo := cfg.File(dnf.DockerRepoPath)
			if docker := tt.config["containerdSource"] != "preinstalled"; (repo != nil) != docker {
				t.Fatalf("docker repository file present = %v, want %v", repo != nil, docker)
			}
			if repo != nil && !strings.Contains(repo.Content.Inline.Data, "baseurl=https://download.docker.com/linux/rhel/$releasever/$basearch/stable\n") {
				t.Errorf("repository file:\n%s", repo.Content.Inline.Data)
			}
			if !plugintest.Masked(cfg, "firewalld.service") {
				t.Errorf("firewalld is not masked")
			}
		})
	}
}

// TestSubscriptionKept: the host injects the rh_subscription module into both stages; the plugin keeps it.
func TestSubscriptionKept(t *testing.T) {
	for _, stage := range []abi.Stage{abi.StageBootstrap, abi.StageProvisioning} {
		req := plugintest.Request("rhel", "9.6", abi.UtilityCloudInit, "azure", stage)
		req.Input.Modules = &abi.Modules{RHSubscription: map[string]string{"username": "u", "password": "__OSM_SECRET_RH_SUBSCRIPTION_PASSWORD__", "auto-attach": "true"}}
		cfg := plugintest.Render(t, node.New(OS()), req)
		if cfg.Modules == nil || cfg.Modules.RHSubscription["password"] != "__OSM_SECRET_RH_SUBSCRIPTION_PASSWORD__" {
			t.Errorf("%s: rh_subscription lost: %+v", stage, cfg.Modules)
		}
		if stage == abi.StageBootstrap {
			plugintest.Contains(t, "azure bootstrap", plugintest.File(t, cfg, node.BootstrapScriptPath),
				[]string{"systemctl stop NetworkManager", "cloud-init init --local", "systemctl start NetworkManager"}, nil)
		}
	}
}

func TestValidate(t *testing.T) {
	resp, err := guest.CallValidate(node.New(OS()), &abi.ValidateRequest{OSVersion: "9.6", Config: map[string]string{"containerdSource": "distro"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Errors) != 1 || resp.Errors[0].Field != "spec.plugin.config.containerdSource" {
		t.Errorf("errors = %+v, want distro refused (RHEL ships no containerd)", resp.Errors)
	}
}
