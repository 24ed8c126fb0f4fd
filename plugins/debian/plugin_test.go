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
	if md.Name != "debian" || !md.SupportsOS("debian", "12") || !md.SupportsOS("debian", "13") || md.SupportsOS("debian", "11") {
		t.Errorf("metadata %+v", md)
	}
}

func TestStages(t *testing.T) {
	p := node.New(OS())
	boot := plugintest.File(t, plugintest.Render(t, p, plugintest.Request("debian", "12", abi.UtilityCloudInit, "gce", abi.StageBootstrap)), node.BootstrapScriptPath)
	// Debian 12 ships cloud-init 22.4, which takes --file before the subcommand.
	plugintest.Contains(t, "bootstrap", boot, []string{"set -- --file $f init", "cloud-init status --wait"}, []string{"FallbackDNS"})
	cfg := plugintest.Render(t, p, plugintest.Request("debian", "13", abi.UtilityCloudInit, "gce", abi.StageProvisioning))
	plugintest.Contains(t, "osm-setup", plugintest.File(t, cfg, node.SetupScriptPath), []string{"'containerd.io=2.2*'"}, nil)
}

func TestStaticNetworkRefused(t *testing.T) {
	req := plugintest.Request("debian", "13", abi.UtilityCloudInit, "vsphere", abi.StageBootstrap)
	req.Context.Network.CIDR = "192.168.1.10/24"
	if _, err := guest.Call(node.New(OS()), req); err == nil {
		t.Fatal("a static network configuration was accepted, but the debian plugin cannot apply it")
	}
}
