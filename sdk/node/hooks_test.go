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
