package plugintest

import (
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/node"
)

// CheckScripts fails the test for a file of cfg that starts with a #! line naming bash or sh and that the shell
// cannot parse (`bash -n`; `sh -n` runs bash in POSIX mode): a syntax error a hook put into a script fails here
// rather than on the node.
func CheckScripts(t testing.TB, cfg *abi.NodeConfig) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash is needed to check the generated scripts: %v", err)
	}
	for _, f := range cfg.Files {
		if f.Content.Inline == nil {
			continue
		}
		data := f.Content.Inline.Data
		first, _, _ := strings.Cut(data, "\n")
		if !strings.HasPrefix(first, "#!") || !strings.HasSuffix(first, "bash") && !strings.HasSuffix(first, "/sh") {
			continue
		}
		args := []string{"-n"}
		if strings.HasSuffix(first, "/sh") {
			args = append(args, "--posix")
		}
		p := filepath.Join(t.TempDir(), "script")
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(bash, append(args, p)...).CombinedOutput(); err != nil {
			t.Errorf("%s does not parse (%s %s): %v\n%s", f.Path, first, strings.Join(args, " "), err, out)
		}
	}
}

// NodeEnvStubs are the commands osm-node-env needs in a Sandbox: a default route through eth0 with source
// 10.0.0.5 (2001:db8::5 for IPv6) and a host name node-1.example.
var NodeEnvStubs = map[string]string{
	"ip":       `case "$*" in *-6*) echo "2001:4860:4860::8888 from :: via fe80::1 dev eth0 src 2001:db8::5 metric 100" ;; *) echo "1.1.1.1 via 10.0.0.1 dev eth0 src 10.0.0.5 uid 0" ;; esac`,
	"hostname": `echo node-1.example`,
}

// CheckNodeEnv runs the provisioning stage's osm-node-env (node.NodeEnvScriptPath, with the plugin's
// OS.Hostname hook in it) in a Sandbox with NodeEnvStubs, the way kubelet.service runs it before every start:
// once with /etc/machine-name holding the machine's name (the kubelet's host name must be that name) and once
// without (a host name, from the hook or the kit's `hostname -f`). It fails the test when the script fails
// either way, which the kubelet would see as a failed ExecStartPre and never start. A provisioning stage
// without osm-node-env (a plugin that does not use the kit's kubelet) passes.
func CheckNodeEnv(t testing.TB, cfg *abi.NodeConfig) {
	t.Helper()
	f := cfg.File(node.NodeEnvScriptPath)
	if f == nil || f.Content.Inline == nil {
		return
	}
	for _, machine := range []string{"machine-a", ""} {
		sb := NewSandbox(t)
		sb.Stubs = NodeEnvStubs
		if machine != "" {
			sb.Files[node.MachineNamePath] = machine + "\n"
		}
		run := sb.Run(t, f.Content.Inline.Data)
		env := sb.ReadFile(node.NodeEnvPath)
		switch {
		case run.Err != nil:
			t.Errorf("%s fails (/etc/machine-name %q), so kubelet.service would never start: %v\n%s", node.NodeEnvScriptPath, machine, run.Err, run.Output)
		case machine != "" && !strings.Contains(env, "KUBELET_HOSTNAME="+machine+"\n"):
			t.Errorf("%s: with /etc/machine-name %q the kubelet's host name is not the machine's name:\n%s", node.NodeEnvScriptPath, machine, env)
		case !strings.Contains(env, "KUBELET_HOSTNAME=") || strings.Contains(env, "KUBELET_HOSTNAME=\n"):
			t.Errorf("%s: no host name for the kubelet without /etc/machine-name:\n%s", node.NodeEnvScriptPath, env)
		}
	}
}

// SampleProvisioningConfig is what the stubbed API server of RunBootstrap returns as the provisioning Secret's
// key.
const SampleProvisioningConfig = "#osm sample provisioning configuration\n"

// RunBootstrap runs the bootstrap stage of a fetch-then-apply plugin in a Sandbox: it writes the stage's files
// (placeholders replaced with SampleSecrets) under the sandbox's root, stubs curl as an API server that returns
// the provisioning Secret with SampleProvisioningConfig under its key (HTTP 200), and runs the script that
// fetches it. Every other command the handoff calls (cloud-init, systemctl, mount, reboot) is recorded in the
// run's Calls.
func RunBootstrap(t testing.TB, req *abi.RenderRequest, cfg *abi.NodeConfig) (*Sandbox, SandboxRun) {
	t.Helper()
	sb := NewSandbox(t)
	return sb, sb.RunBootstrap(t, req, cfg)
}

// RunBootstrap is RunBootstrap in sb, whose Files, Dirs and Stubs (but curl) are kept.
func (sb *Sandbox) RunBootstrap(t testing.TB, req *abi.RenderRequest, cfg *abi.NodeConfig) SandboxRun {
	t.Helper()
	sec := req.Context.Cluster.ProvisioningSecret
	url := "/api/v1/namespaces/" + sec.Namespace + "/secrets/" + sec.Name
	sb.AddConfig(cfg)
	var script string
	for _, f := range substitute(cfg, SampleSecrets).Files {
		if f.Content.Inline != nil && strings.Contains(f.Content.Inline.Data, url) {
			script = f.Content.Inline.Data
		}
	}
	if script == "" {
		t.Fatalf("bootstrap: no file fetches the provisioning Secret (%s)", url)
	}
	secret := `{"kind": "Secret", "data": {"` + sec.Key + `": "` + base64.StdEncoding.EncodeToString([]byte(SampleProvisioningConfig)) + `"}}`
	sb.Stubs["curl"] = `out=/dev/null; while [ $# -gt 0 ]; do if [ "$1" = -o ]; then out=$2; fi; shift; done
printf '%s' ` + shellQuote(secret) + ` >"$out"; printf 200`
	return sb.Run(t, script)
}

// CheckBootstrapRun fails the test unless the bootstrap of a fetch-then-apply plugin, run by RunBootstrap,
// exits 0, stores the fetched configuration where its handoff puts it (some file of the sandbox holds
// SampleProvisioningConfig) and creates its done markers (each ConditionPathExists=!<marker> of its units).
func CheckBootstrapRun(t testing.TB, req *abi.RenderRequest, cfg *abi.NodeConfig) {
	t.Helper()
	sb, run := RunBootstrap(t, req, cfg)
	if run.Err != nil {
		t.Errorf("bootstrap: the script fails in a sandbox with a reachable API server: %v\n%s", run.Err, run.Output)
		return
	}
	stored := false
	_ = filepath.Walk(sb.Root, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() && !strings.Contains(p, "/.osm-test/") {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), SampleProvisioningConfig) {
				stored = true
			}
		}
		return nil
	})
	if !stored {
		t.Errorf("bootstrap: the fetched configuration is stored nowhere after the handoff (calls: %q)", run.Calls)
	}
	for _, u := range cfg.Units {
		if u.Content == nil {
			continue
		}
		for _, line := range strings.Split(*u.Content, "\n") {
			if m, ok := strings.CutPrefix(strings.TrimSpace(line), "ConditionPathExists=!"); ok && !sb.Exists(m) {
				t.Errorf("bootstrap: after a successful run %s does not exist, so unit %s would run again at the next boot", m, u.Name)
			}
		}
	}
}
