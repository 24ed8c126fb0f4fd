package main

import (
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
	if md.Name != "rockylinux" || !md.SupportsOS("rockylinux", "9.5") || md.SupportsOS("rockylinux", "8.9") || !md.SupportsCloudProvider("hetzner") {
		t.Errorf("metadata %+v", md)
	}
}

func TestProvisioning(t *testing.T) {
	cfg := plugintest.Render(t, node.New(OS()), plugintest.Request("rockylinux", "9.5", abi.UtilityCloudInit, "vsphere", abi.StageProvisioning))
	plugintest.Contains(t, "osm-setup", plugintest.File(t, cfg, node.SetupScriptPath),
		[]string{"open-vm-tools", "systemctl enable --now vmtoolsd.service", "dnf_install 'containerd.io-2.2*'", "SELINUX=permissive"}, nil)
	if cfg.File(dnf.DockerRepoPath) == nil || !plugintest.Masked(cfg, "firewalld.service") {
		t.Errorf("docker repository or firewalld mask missing")
	}
}
