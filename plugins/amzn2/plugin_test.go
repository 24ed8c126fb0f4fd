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
	if md.Name != "amzn2" || !md.SupportsOS("amzn2", "2023") || md.SupportsOS("amzn2", "2") || !md.SupportsCloudProvider("aws") || md.SupportsCloudProvider("azure") {
		t.Errorf("metadata %+v", md)
	}
}

func TestProvisioning(t *testing.T) {
	cfg := plugintest.Render(t, node.New(OS()), plugintest.Request("amzn2", "2023", abi.UtilityCloudInit, "aws", abi.StageProvisioning))
	plugintest.Contains(t, "osm-setup", plugintest.File(t, cfg, node.SetupScriptPath),
		[]string{"dnf_install 'dnf-command(versionlock)' containerd\n", "dnf versionlock add containerd\n"}, []string{"containerd.io"})
	if cfg.File(dnf.DockerRepoPath) != nil {
		t.Errorf("Docker publishes no Amazon Linux packages; no repository file expected")
	}
}

func TestValidate(t *testing.T) {
	resp, err := guest.CallValidate(node.New(OS()), &abi.ValidateRequest{OSVersion: "2023", CloudProviders: []string{"aws", "gce"},
		Config: map[string]string{"containerdSource": "docker", "dockerRepoURL": "https://download.docker.com/linux"}})
	if err != nil {
		t.Fatal(err)
	}
	var fields []string
	for _, e := range resp.Errors {
		fields = append(fields, e.Field)
	}
	want := []string{"spec.plugin.config.containerdSource", "spec.plugin.config.dockerRepoURL", "spec.supportedCloudProviders[1].name"}
	if len(fields) != len(want) || fields[0] != want[0] || fields[1] != want[1] || fields[2] != want[2] {
		t.Errorf("fields = %v, want %v", fields, want)
	}
}
