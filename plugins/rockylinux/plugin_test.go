package main

import (
	"testing"

	"github.com/osmhq/osm/plugins/internal/dnf"
	"github.com/osmhq/osm/plugins/internal/node"
	"github.com/osmhq/osm/plugins/internal/sample"
	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/guest"
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
	cfg := sample.Render(t, node.New(OS()), sample.Request("rockylinux", "9.5", abi.UtilityCloudInit, "vsphere", abi.StageProvisioning))
	sample.Contains(t, "osm-setup", sample.File(t, cfg, node.SetupScriptPath),
		[]string{"open-vm-tools", "systemctl enable --now vmtoolsd.service", "dnf_install 'containerd.io-2.2*'", "SELINUX=permissive"}, nil)
	if cfg.File(dnf.DockerRepoPath) == nil || !sample.Masked(cfg, "firewalld.service") {
		t.Errorf("docker repository or firewalld mask missing")
	}
}
