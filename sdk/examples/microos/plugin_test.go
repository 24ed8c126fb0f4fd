package main

import (
	"strings"
	"testing"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/node"
	"github.com/osmhq/osm/sdk/plugintest"
)

// TestBootContract: both stages, on each provider, with a static address, pass plugintest.Check against the
// fetch-then-apply contract (the bootstrap runs in a sandbox: the config lands on the "ignition" file system,
// firstboot_happened is removed, the machine reboots) and Ignition's own parser.
func TestBootContract(t *testing.T) {
	for _, provider := range OS().CloudProviders {
		for _, stage := range []abi.Stage{abi.StageBootstrap, abi.StageProvisioning} {
			t.Run(provider+"/"+string(stage), func(t *testing.T) {
				req := plugintest.Request("microos", "tumbleweed", abi.UtilityIgnition, provider, stage)
				if provider == "vsphere" {
					req.Context.Network = abi.Network{CIDR: "192.168.1.10/24", Gateway: "192.168.1.1", DNSServers: []string{"192.168.1.2"}}
				}
				cfg := plugintest.Check(t, plugintest.Native(node.New(OS())), req)
				plugintest.ValidateUserData(t, req, cfg)
				if stage == abi.StageBootstrap {
					sb, run := plugintest.RunBootstrap(t, req, cfg)
					if sb.ReadFile("/run/osm/ignition-label/ignition/config.ign") != plugintest.SampleProvisioningConfig || !run.Called("mount /dev/disk/by-label/ignition") {
						t.Errorf("the config is not stored on the ignition file system: %q", run.Calls)
					}
				}
			})
		}
	}
}

// TestInstall runs the package step in a sandbox: on an image without the packages transactional-update
// installs what is missing and applies the snapshot; on one that has them (a re-run) nothing is installed.
func TestInstall(t *testing.T) {
	req := plugintest.Request("microos", "tumbleweed", abi.UtilityIgnition, "openstack", abi.StageProvisioning)
	req.Config = map[string]string{node.KeyExtraPackages: "open-iscsi"}
	r, err := node.NewRequest(OS(), req)
	if err != nil {
		t.Fatal(err)
	}
	s := node.NewScript("osm-setup", "test")
	if err := install(r, s); err != nil {
		t.Fatal(err)
	}
	for name, present := range map[string][]string{"new image": nil, "re-run": {"containerd", "conntrack", "socat", "ethtool", "iptables", "rpm"}} {
		sb := plugintest.NewSandbox(t)
		sb.Stubs["rpm"] = "exit 1" // rpm -q: not installed
		for _, c := range present {
			sb.Stubs[c] = ":"
		}
		run := sb.Run(t, s.String())
		if run.Err != nil {
			t.Fatalf("%s: %v\n%s", name, run.Err, run.Output)
		}
		installed := run.Called("transactional-update --non-interactive pkg install --no-recommends containerd conntrack-tools socat ethtool iptables open-iscsi")
		if installed != (present == nil) || installed != run.Called("transactional-update --non-interactive apply") {
			t.Errorf("%s: calls %q", name, run.Calls)
		}
	}
}

func TestMetadata(t *testing.T) {
	md := node.New(OS()).Metadata()
	if md.SSHUser != "root" || strings.Join(md.ProvisioningUtilities, ",") != abi.UtilityIgnition {
		t.Errorf("metadata = %+v", md)
	}
}
