package node_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/guest"
	"github.com/osmhq/osm/sdk/node"
	"github.com/osmhq/osm/sdk/node/apt"
	"github.com/osmhq/osm/sdk/node/ignition"
	"github.com/osmhq/osm/sdk/plugintest"
)

// The tests of this file run each OS hook's shell the way the node runs it: the generated script, in a
// plugintest.Sandbox with stubbed commands, so that what each hook's doc comment says (when it runs, under
// which shell options, what it replaces) is what the script does.

func renderOS(t *testing.T, os *node.OS, stage abi.Stage, utility, provider string, edit func(*abi.RenderRequest)) (*abi.RenderRequest, *abi.NodeConfig) {
	t.Helper()
	os.Name, os.PluginVersion, os.Versions, os.CloudProviders = "hookos", "v0.1.0", []string{"1"}, []string{"*"}
	if len(os.Utilities) == 0 {
		os.Utilities = []string{utility}
	}
	req := plugintest.Request("hookos", "1", utility, provider, stage)
	if edit != nil {
		edit(req)
	}
	resp, err := guest.Call(node.New(os), req)
	if err != nil {
		t.Fatal(err)
	}
	return req, &resp.Config
}

// TestHostnameHook: osm-node-env sets the kit's name (`hostname -f`, else `hostname`) first; the hook runs
// only when /etc/machine-name is empty or missing, under `set -euo pipefail`, and may change $name; the
// machine's name wins whenever there is one, and an empty name fails the script.
func TestHostnameHook(t *testing.T) {
	failing := func(_ *node.Request, s *node.Script) { s.Line(`name=$(cat /etc/hostname)`) }
	empty := func(_ *node.Request, s *node.Script) { s.Line(`name=`) }
	fcos := ignition.OS(ignition.FedoraCoreOS).Hostname
	tests := []struct {
		name     string
		hook     func(*node.Request, *node.Script)
		machine  string
		files    map[string]string
		want     string // KUBELET_HOSTNAME; empty: the script fails
		provider string
	}{
		{"kit default", nil, "", nil, "node-1.example", "openstack"},
		{"kit default, machine name", nil, "Machine-A", nil, "machine-a", "openstack"},
		{"failing hook, machine name: the hook does not run", failing, "machine-a", nil, "machine-a", "openstack"},
		{"failing hook, no machine name: osm-node-env fails", failing, "", nil, "", "openstack"},
		{"hook reading its file", failing, "", map[string]string{"/etc/hostname": "from-file\n"}, "from-file", "openstack"},
		{"hook emptying the name", empty, "", nil, "", "openstack"},
		{"Fedora CoreOS on AWS, agent wrote the name", fcos, "", map[string]string{"/run/metadata/afterburn": "AFTERBURN_AWS_HOSTNAME=ip-10-0-0-5.ec2.internal\n"}, "ip-10-0-0-5.ec2.internal", "aws"},
		{"Fedora CoreOS on AWS, no agent file: the kit's name", fcos, "", nil, "node-1.example", "aws"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os := apt.OS()
			os.Hostname = tt.hook
			_, cfg := renderOS(t, os, abi.StageProvisioning, abi.UtilityCloudInit, tt.provider, nil)
			sb := plugintest.NewSandbox(t)
			sb.Stubs = plugintest.NodeEnvStubs
			for p, c := range tt.files {
				sb.Files[p] = c
			}
			if tt.machine != "" {
				sb.Files[node.MachineNamePath] = tt.machine + "\n"
			}
			run := sb.Run(t, file(t, cfg, node.NodeEnvScriptPath))
			if tt.want == "" {
				if run.Err == nil {
					t.Fatalf("osm-node-env succeeded:\n%s", sb.ReadFile(node.NodeEnvPath))
				}
				return
			}
			if run.Err != nil {
				t.Fatalf("osm-node-env: %v\n%s", run.Err, run.Output)
			}
			if env := sb.ReadFile(node.NodeEnvPath); !strings.Contains(env, "KUBELET_NODE_IP=10.0.0.5\nKUBELET_HOSTNAME="+tt.want+"\n") {
				t.Errorf("kubelet.env = %q, want host name %s", env, tt.want)
			}
		})
	}
}

// TestCheckCatchesAFailingHostnameHook is the day-one failure of a plugin written from the old doc: a hook that
// reads a file the image does not have passes every other check and fails plugintest.Check.
func TestCheckCatchesAFailingHostnameHook(t *testing.T) {
	os := apt.OS()
	os.Name, os.PluginVersion, os.Versions, os.CloudProviders = "hookos", "v0.1.0", []string{"1"}, []string{"*"}
	os.Hostname = func(_ *node.Request, s *node.Script) { s.Line(`name=$(cat /etc/hostname)`) }
	req := plugintest.Request("hookos", "1", abi.UtilityCloudInit, "openstack", abi.StageProvisioning)
	cfg := plugintest.Render(t, node.New(os), req)
	rec := &recorder{TB: t}
	plugintest.CheckNodeEnv(rec, cfg)
	if !strings.Contains(rec.String(), "kubelet.service would never start") {
		t.Errorf("CheckNodeEnv passed a hook that fails on the node: %q", rec.String())
	}
}

// TestBootstrapHooks: Network (static address) and BootstrapPrepare run in osm-bootstrap before the fetch,
// under `set -euo pipefail` and umask 077, and Handoff after it with the configuration in $cfg.
func TestBootstrapHooks(t *testing.T) {
	os := apt.OS()
	os.Network = ignition.Networkd
	os.BootstrapPrepare = func(_ *node.Request, _ *abi.NodeConfig, s *node.Script) {
		s.Line(`echo "$cfg"`) // $cfg is unset before the fetch: `set -u` stops the script here
		s.Line(`echo prepared >/run/osm/prepared`)
	}
	req, cfg := renderOS(t, os, abi.StageBootstrap, abi.UtilityCloudInit, "vsphere", func(r *abi.RenderRequest) {
		r.Context.Network = abi.Network{CIDR: "192.168.1.10/24", Gateway: "192.168.1.1"}
	})
	_, run := plugintest.RunBootstrap(t, req, cfg)
	if run.Err == nil {
		t.Fatalf("a BootstrapPrepare reading $cfg before the fetch ran (set -u must stop it):\n%s", run.Output)
	}

	os.BootstrapPrepare = func(_ *node.Request, _ *abi.NodeConfig, s *node.Script) { s.Line(`echo prepared >/run/osm/prepared`) }
	req, cfg = renderOS(t, os, abi.StageBootstrap, abi.UtilityCloudInit, "vsphere", func(r *abi.RenderRequest) {
		r.Context.Network = abi.Network{CIDR: "192.168.1.10/24", Gateway: "192.168.1.1"}
	})
	sb, run := plugintest.RunBootstrap(t, req, cfg)
	if run.Err != nil {
		t.Fatalf("bootstrap: %v\n%s", run.Err, run.Output)
	}
	if sb.ReadFile("/run/osm/prepared") != "prepared\n" {
		t.Error("BootstrapPrepare did not run")
	}
	if !run.Called("systemctl restart systemd-networkd") {
		t.Errorf("Network did not restart networkd for cloud-init: %q", run.Calls)
	}
	plugintest.CheckBootstrapRun(t, req, cfg)
	if !sb.Exists(node.BootstrapDone) || !run.Called("cloud-init clean") {
		t.Errorf("Handoff did not hand over to cloud-init and mark the bootstrap done: %q", run.Calls)
	}
}

// TestPrepareHook: Prepare runs in osm-setup after the machine's name is set and before anything else, under
// `set -euo pipefail`; the Fedora CoreOS image's Prepare makes SELinux permissive in its config file.
func TestPrepareHook(t *testing.T) {
	img := ignition.FedoraCoreOS
	s := node.NewScript("osm-setup", "test")
	img.Prepare(nil, s)
	sb := plugintest.NewSandbox(t)
	sb.Files["/etc/selinux/config"] = "SELINUX=enforcing\nSELINUXTYPE=targeted\n"
	run := sb.Run(t, s.String())
	if run.Err != nil {
		t.Fatalf("Prepare: %v\n%s", run.Err, run.Output)
	}
	if got := sb.ReadFile("/etc/selinux/config"); !strings.HasPrefix(got, "SELINUX=permissive\n") {
		t.Errorf("/etc/selinux/config = %q", got)
	}
	if !run.Called("systemctl disable --now docker.socket docker.service") {
		t.Errorf("Docker not disabled: %q", run.Calls)
	}
}

// TestInstallHook: Install runs in osm-setup after DownloadHelper ($arch, $tmp, download) under
// `set -euo pipefail`; the apt family's Install reads /etc/os-release and installs with apt-get.
func TestInstallHook(t *testing.T) {
	os := apt.OS()
	r, err := node.NewRequest(os, plugintest.Request("ubuntu", "24.04", abi.UtilityCloudInit, "aws", abi.StageProvisioning))
	if err != nil {
		t.Fatal(err)
	}
	s := node.NewScript("osm-setup", "test")
	node.DownloadHelper(s)
	if err := os.Install(r, s); err != nil {
		t.Fatal(err)
	}
	sb := plugintest.NewSandbox(t)
	sb.Dirs = append(sb.Dirs, "/etc/apt/sources.list.d")
	sb.Files["/etc/os-release"] = "ID=ubuntu\nVERSION_CODENAME=noble\n"
	sb.Stubs["dpkg"] = `echo amd64`
	run := sb.Run(t, s.String())
	if run.Err != nil {
		t.Fatalf("Install: %v\n%s", run.Err, run.Output)
	}
	if !run.Called("apt-get ") {
		t.Errorf("no apt-get run: %q", run.Calls)
	}
	if got := sb.ReadFile("/etc/apt/sources.list.d/osm-docker.list"); !strings.Contains(got, "arch=amd64") || !strings.Contains(got, " noble stable") {
		t.Errorf("osm-docker.list = %q", got)
	}
}

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recorder) String() string { return strings.Join(r.errors, "\n") }

// TestIgnitionHandoffShapes runs the Ignition handoff of each image shape in a sandbox: the fetched config is
// stored where that image's Ignition reads it, the next boot is made a first boot the image's way (a flag
// created, a flag removed, a kernel argument in the GRUB environment), read-only mounts are remounted first,
// the done marker is written and the machine reboots.
func TestIgnitionHandoffShapes(t *testing.T) {
	karg := node.FedoraCoreOSIgnition
	karg.Trigger = node.KernelArgument("/boot/grub2/grubenv", "ignition_firstboot", "ignition.firstboot")
	legacy := node.FedoraCoreOSIgnition
	legacy.Trigger, legacy.FirstBootFlag = node.FirstBootTrigger{}, "/boot/ignition.firstboot"
	tests := []struct {
		name      string
		boot      node.IgnitionBoot
		dirs      []string
		files     map[string]string
		stored    string   // where the config must be
		present   []string // files that must exist afterwards
		absent    []string // files that must not
		calls     []string // commands that must have run
		noCalls   []string
		machineID bool // /etc/machine-id is kept
	}{
		{name: "Fedora CoreOS", boot: node.FedoraCoreOSIgnition, stored: "/boot/ignition/config.ign",
			present: []string{"/boot/ignition.firstboot", "/etc/systemd/system/" + node.IgnitionEnableUnit}, calls: []string{"mount -o remount,rw /boot", "systemctl enable " + node.IgnitionEnableUnit}, machineID: true},
		{name: "Flatcar before 2023", boot: node.FlatcarIgnition, stored: "/usr/share/oem/config.ign",
			present: []string{"/boot/flatcar/first_boot"}, noCalls: []string{"mount"}},
		{name: "Flatcar with /oem", boot: node.FlatcarIgnition, dirs: []string{"/oem"}, stored: "/oem/config.ign",
			present: []string{"/boot/flatcar/first_boot"}},
		{name: "MicroOS", boot: node.MicroOSIgnition, files: map[string]string{"/boot/writable/firstboot_happened": ""},
			stored: "/run/osm/ignition-label/ignition/config.ign", absent: []string{"/boot/writable/firstboot_happened"},
			calls: []string{"mountpoint -q /boot/writable", "mount /dev/disk/by-label/ignition", "umount"}, machineID: true},
		{name: "kernel argument", boot: karg, stored: "/boot/ignition/config.ign", absent: []string{"/boot/ignition.firstboot"},
			calls: []string{"grub2-editenv /boot/grub2/grubenv set ignition_firstboot=ignition.firstboot"}, machineID: true},
		{name: "FirstBootFlag, the older spelling", boot: legacy, stored: "/boot/ignition/config.ign", present: []string{"/boot/ignition.firstboot"}, machineID: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os := &node.OS{Utilities: []string{abi.UtilityIgnition}, Handoff: node.IgnitionHandoff(tt.boot)}
			req, cfg := renderOS(t, os, abi.StageBootstrap, abi.UtilityIgnition, "openstack", nil)
			sb := plugintest.NewSandbox(t)
			sb.Dirs = append(sb.Dirs, tt.dirs...)
			sb.Files["/etc/machine-id"] = "0123456789abcdef0123456789abcdef\n"
			for p, c := range tt.files {
				sb.Files[p] = c
			}
			if tt.name == "kernel argument" {
				sb.Stubs["grub2-editenv"] = `:`
			}
			run := sb.RunBootstrap(t, req, cfg)
			if run.Err != nil {
				t.Fatalf("handoff: %v\n%s", run.Err, run.Output)
			}
			if got := sb.ReadFile(tt.stored); got != plugintest.SampleProvisioningConfig {
				t.Errorf("%s = %q, want the fetched config", tt.stored, got)
			}
			for _, p := range append(tt.present, node.BootstrapDone) {
				if !sb.Exists(p) {
					t.Errorf("%s does not exist", p)
				}
			}
			for _, p := range append(tt.absent, node.FetchedConfigPath) {
				if sb.Exists(p) {
					t.Errorf("%s still exists", p)
				}
			}
			if sb.Exists("/etc/machine-id") != tt.machineID {
				t.Errorf("/etc/machine-id kept: %v, want %v", sb.Exists("/etc/machine-id"), tt.machineID)
			}
			calls := run.Calls
			for _, c := range append(tt.calls, "systemctl --no-block reboot") {
				if !called(calls, c) {
					t.Errorf("%q was not run: %q", c, calls)
				}
			}
			for _, c := range tt.noCalls {
				if called(calls, c) {
					t.Errorf("%q was run: %q", c, calls)
				}
			}
		})
	}
}

func called(calls []string, prefix string) bool {
	for _, c := range calls {
		if strings.HasPrefix(c, prefix) {
			return true
		}
	}
	return false
}

// TestIgnitionAlternativesLastWins: of several Alternatives whose directories exist, the last one listed wins,
// as IgnitionBoot.Alternatives says; without any, ConfigPath.
func TestIgnitionAlternativesLastWins(t *testing.T) {
	boot := node.IgnitionBoot{ConfigPath: "/usr/share/oem/config.ign", Alternatives: [][2]string{{"/oem", "/oem/config.ign"}, {"/oem2", "/oem2/config.ign"}},
		Trigger: node.TouchFlag("/boot/flatcar/first_boot"), ResetMachineID: true}
	for _, tt := range []struct {
		dirs []string
		want string
	}{{nil, "/usr/share/oem/config.ign"}, {[]string{"/oem"}, "/oem/config.ign"}, {[]string{"/oem", "/oem2"}, "/oem2/config.ign"}} {
		req, cfg := renderOS(t, &node.OS{Utilities: []string{abi.UtilityIgnition}, Handoff: node.IgnitionHandoff(boot)}, abi.StageBootstrap, abi.UtilityIgnition, "openstack", nil)
		sb := plugintest.NewSandbox(t)
		sb.Dirs = append(sb.Dirs, tt.dirs...)
		if run := sb.RunBootstrap(t, req, cfg); run.Err != nil || sb.ReadFile(tt.want) != plugintest.SampleProvisioningConfig {
			t.Errorf("directories %v: the config is not at %s (%v)\n%s", tt.dirs, tt.want, run.Err, run.Output)
		}
	}
}
