package node_test

import (
	"strings"
	"testing"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/guest"
	"github.com/osmhq/osm/sdk/node"
	"github.com/osmhq/osm/sdk/node/apt"
	"github.com/osmhq/osm/sdk/node/dnf"
	"github.com/osmhq/osm/sdk/node/ignition"
	"github.com/osmhq/osm/sdk/plugintest"
)

// TestFamilyConstructorsTakeEmptyInput: every family constructor accepts empty and nil input without a panic,
// and what it returns renders both stages for its utility (a zero Family means RHEL's assumptions; an Image
// needs its Boot, everything else zero means "none").
func TestFamilyConstructorsTakeEmptyInput(t *testing.T) {
	for name, os := range map[string]func() *node.OS{
		"apt.OS()":                 apt.OS,
		"dnf.OS(nil, \"\")":        func() *node.OS { return dnf.OS(nil, "") },
		"dnf.OS([]string{}, \"\")": func() *node.OS { return dnf.OS([]string{}, "") },
		"dnf.New(Family{})":        func() *node.OS { return dnf.New(dnf.Family{}) },
		"dnf docker, no version":   func() *node.OS { return dnf.OS([]string{node.ContainerdDocker}, "") },
		"ignition.OS(Image{Boot})": func() *node.OS { return ignition.OS(ignition.Image{Boot: node.MicroOSIgnition}) },
		"IgnitionHandoff(zero)": func() *node.OS {
			return &node.OS{Utilities: []string{abi.UtilityIgnition}, Handoff: node.IgnitionHandoff(node.IgnitionBoot{})}
		},
		"ContainerdOptions(nil, \"\")": func() *node.OS {
			return &node.OS{Utilities: []string{abi.UtilityCloudInit}, Handoff: node.CloudInitHandoff(nil), Options: node.ContainerdOptions(nil, "")}
		},
	} {
		t.Run(name, func(t *testing.T) {
			os := os()
			os.Name, os.PluginVersion, os.CloudProviders = "exampleos", "v0.1.0", []string{"*"}
			for _, stage := range []abi.Stage{abi.StageBootstrap, abi.StageProvisioning} {
				req := plugintest.Request("exampleos", "1", os.Utilities[0], "azure", stage)
				if _, err := guest.Call(node.New(os), req); err != nil {
					t.Errorf("%s: %v", stage, err)
				}
			}
		})
	}
}

// TestDnfAssumptionsAreFields: Azure Linux 3.0 (tdnf, no versionlock, systemd-networkd, Docker's Fedora
// repository) is a Family value, not a copy of the family; RHEL's output keeps NetworkManager.
func TestDnfAssumptionsAreFields(t *testing.T) {
	azl := dnf.New(dnf.Family{ContainerdSources: []string{node.ContainerdDocker, node.ContainerdDistro}, InstallCommand: "tdnf install -y",
		NoVersionLock: true, Network: dnf.NetworkSystemdNetworkd, DockerRepoDistro: "fedora", Firewall: dnf.NoFirewall})
	azl.Name, azl.PluginVersion, azl.CloudProviders = "azurelinux", "v0.1.0", []string{"azure"}
	boot := plugintest.Render(t, node.New(azl), plugintest.Request("azurelinux", "3.0", abi.UtilityCloudInit, "azure", abi.StageBootstrap))
	plugintest.Contains(t, "Azure Linux bootstrap", plugintest.File(t, boot, node.BootstrapScriptPath),
		[]string{"systemctl stop systemd-networkd.socket systemd-networkd || true", "systemctl start systemd-networkd"}, []string{"NetworkManager", "nm-online"})
	prov := plugintest.Render(t, node.New(azl), plugintest.Request("azurelinux", "3.0", abi.UtilityCloudInit, "azure", abi.StageProvisioning))
	plugintest.Contains(t, "Azure Linux osm-setup", plugintest.File(t, prov, node.SetupScriptPath),
		[]string{`dnf_install() { tdnf install -y "$@"; }`, "dnf_install 'containerd.io-2.2*'"}, []string{"versionlock", "firewalld"})
	if repo := plugintest.File(t, prov, dnf.DockerRepoPath); !strings.Contains(repo, "/linux/fedora/$releasever") {
		t.Errorf("Docker repository:\n%s", repo)
	}

	rhel := dnf.OS([]string{node.ContainerdDocker}, "2.2*")
	rhel.Name, rhel.PluginVersion, rhel.CloudProviders = "rhel", "v0.1.0", []string{"azure"}
	boot = plugintest.Render(t, node.New(rhel), plugintest.Request("rhel", "9", abi.UtilityCloudInit, "azure", abi.StageBootstrap))
	plugintest.Contains(t, "RHEL bootstrap", plugintest.File(t, boot, node.BootstrapScriptPath), []string{"systemctl stop NetworkManager", "nm-online"}, nil)
}

// TestIgnitionEnableUnitIsReadable: the bootstrap script runs under umask 077, so the unit it writes for the
// second Ignition run's units must be made readable, or systemd warns that it is world-inaccessible.
func TestIgnitionEnableUnitIsReadable(t *testing.T) {
	os := ignition.OS(ignition.FedoraCoreOS)
	os.Name, os.PluginVersion, os.CloudProviders = "exampleos", "v0.1.0", []string{"*"}
	boot := plugintest.Render(t, node.New(os), plugintest.Request("exampleos", "1", abi.UtilityIgnition, "azure", abi.StageBootstrap))
	script := plugintest.File(t, boot, node.BootstrapScriptPath)
	unit := "/etc/systemd/system/" + node.IgnitionEnableUnit
	written, chmod := strings.Index(script, "cat >"+unit), strings.Index(script, "chmod 644 "+unit)
	if written < 0 || chmod < written || !strings.Contains(script[chmod:], "systemctl daemon-reload") {
		t.Errorf("the bootstrap script does not write %s, make it mode 644, then reload systemd, in that order:\n%s", unit, script)
	}
}
