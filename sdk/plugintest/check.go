package plugintest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"path"
	"strings"
	"testing"

	"github.com/osmhq/osm/sdk/abi"
)

// Check runs every check of this file that applies to the request's stage on the plugin's response:
// CheckFiles, CheckPlaceholders, CheckDeterministic, CheckScripts (every script parses), for the bootstrap
// stage the boot contract the plugin declares (abi.Metadata.BootContract, sdk/SPEC.md §9): fetch-then-apply
// with CheckBootstrap (for the request's provisioning utility) and CheckBootstrapRun (the bootstrap script
// run in a Sandbox), join-from-settings with CheckJoinFromSettings; for the provisioning stage CheckNodeEnv
// (osm-node-env, with the OS.Hostname hook, run in a Sandbox) and, for Ignition, the final config through
// Ignition's own parser (IgnitionConfig, IgnitionValidate; cloud-init's needs the cloud-init tool:
// ValidateUserData). It is what a plugin's tests should call for each stage, provisioning utility and
// provider it supports. A Renderer without metadata (one of the caller's own) is held to fetch-then-apply.
func Check(t testing.TB, r Renderer, req *abi.RenderRequest) *abi.NodeConfig {
	t.Helper()
	resp, err := r.Render(req)
	if err != nil {
		t.Fatalf("render %s: %v", req.Stage, err)
	}
	cfg := &resp.Config
	contract := ContractOf(r)
	CheckFiles(t, cfg)
	CheckPlaceholders(t, req, cfg, contract)
	CheckDeterministic(t, r, req)
	CheckScripts(t, cfg)
	switch {
	case req.Stage == abi.StageBootstrap && contract == abi.BootContractJoinFromSettings:
		CheckJoinFromSettings(t, req, cfg)
	case req.Stage == abi.StageBootstrap:
		CheckBootstrap(t, req, cfg)
		if !t.Failed() {
			CheckBootstrapRun(t, req, cfg)
		}
	case req.Stage == abi.StageProvisioning:
		CheckNodeEnv(t, cfg)
	}
	if req.ProvisioningUtility == abi.UtilityIgnition {
		data, err := IgnitionConfig(req.Stage, req.Context.CloudProvider.Name, cfg, nil)
		if err != nil {
			t.Errorf("%s stage: the host could not encode it as Ignition: %v", req.Stage, err)
		} else {
			IgnitionValidate(t, string(req.Stage), data)
		}
	}
	return cfg
}

// ContractOf is the boot contract r's plugin declares (abi.Metadata.BootContract), fetch-then-apply when it
// declares none or r has no metadata.
func ContractOf(r Renderer) string {
	if m, ok := r.(interface{ Metadata() abi.Metadata }); ok && m.Metadata().BootContract != "" {
		return m.Metadata().BootContract
	}
	return abi.BootContractFetchThenApply
}

// CheckFiles fails the test for a file whose path is not absolute and clean or whose permissions are not a
// mode (see abi.File.Mode), and for a file or unit that repeats.
func CheckFiles(t testing.TB, cfg *abi.NodeConfig) {
	t.Helper()
	seen := map[string]bool{}
	for _, f := range cfg.Files {
		if !strings.HasPrefix(f.Path, "/") || path.Clean(f.Path) != f.Path {
			t.Errorf("file %q: path must be absolute and clean", f.Path)
		}
		if seen[f.Path] {
			t.Errorf("file %s appears more than once", f.Path)
		}
		seen[f.Path] = true
		if _, err := f.Mode(); err != nil {
			t.Error(err)
		}
		if f.Content.Inline == nil {
			t.Errorf("file %s has no content.inline", f.Path)
		}
	}
	units := map[string]bool{}
	for _, u := range cfg.Units {
		if units[u.Name] {
			t.Errorf("unit %s appears more than once", u.Name)
		}
		units[u.Name] = true
	}
}

// CheckPlaceholders fails the test unless the credential placeholder the stage needs under the boot contract
// (abi.Metadata.BootContract; fetch-then-apply when contract is omitted or empty) reaches the output verbatim
// in a file's plain content: the bootstrap token in the provisioning stage (the kubelet joins with it), and in
// the bootstrap stage the provisioning token (fetch-then-apply: it fetches the provisioning configuration
// with it) or the bootstrap token (join-from-settings: the settings carry the kubelet's credential). The host
// substitutes real values only where it finds the placeholder unchanged.
func CheckPlaceholders(t testing.TB, req *abi.RenderRequest, cfg *abi.NodeConfig, contract ...string) {
	t.Helper()
	want := map[abi.Stage]struct{ name, value string }{
		abi.StageBootstrap:    {"provisioning token", req.Context.Secrets.ProvisioningToken},
		abi.StageProvisioning: {"bootstrap token", req.Context.Secrets.BootstrapToken},
	}[req.Stage]
	if len(contract) > 0 && contract[0] == abi.BootContractJoinFromSettings {
		want.name, want.value = "bootstrap token", req.Context.Secrets.BootstrapToken
	}
	if want.value == "" {
		t.Fatalf("the request has no %s placeholder to check", want.name)
	}
	for _, f := range cfg.Files {
		if f.Content.Inline != nil && strings.Contains(f.Content.Inline.Data, want.value) {
			return
		}
	}
	t.Errorf("%s stage: no file holds the %s placeholder %q verbatim; the host could not substitute the credential", req.Stage, want.name, want.value)
}

// CheckJoinFromSettings fails the test unless the bootstrap stage of a join-from-settings plugin carries what
// the node joins with (sdk/SPEC.md §9, join-from-settings), each verbatim in a file's plain content: the API server URL, the
// cluster CA (or its base64), and the kubelet's bootstrap token placeholder, the same least-privilege credential a
// fetch-then-apply node's kubelet joins with; and that it carries no other credential placeholder (the
// provisioning token, the cloud-config), turns no TLS verification off and stays within the bootstrap
// user-data limit (16 KiB).
func CheckJoinFromSettings(t testing.TB, req *abi.RenderRequest, cfg *abi.NodeConfig) {
	t.Helper()
	ctx := req.Context
	var all strings.Builder
	for _, f := range cfg.Files {
		if f.Content.Inline != nil {
			all.WriteString(f.Content.Inline.Data + "\n")
		}
	}
	text := all.String()
	// The CA is public: a format may carry it base64-encoded (Bottlerocket's cluster-certificate).
	ca := ctx.Cluster.CACert
	if ca == "" || !containsAny(text, strings.TrimSpace(ca), base64.StdEncoding.EncodeToString([]byte(ca)), base64.StdEncoding.EncodeToString([]byte(strings.TrimSpace(ca)))) {
		t.Errorf("bootstrap (join-from-settings): no file holds the cluster CA (context.cluster.caCert, verbatim or base64); the node could not verify the API server")
	}
	for _, must := range []struct{ what, value string }{
		{"the API server URL (context.cluster.serverURL)", ctx.Cluster.ServerURL},
		{"the bootstrap token placeholder (context.secrets.bootstrapToken)", ctx.Secrets.BootstrapToken},
	} {
		if must.value == "" || !strings.Contains(text, must.value) {
			t.Errorf("bootstrap (join-from-settings): no file holds %s; the node could not join", must.what)
		}
	}
	for _, never := range []struct{ what, value string }{
		{"provisioning token", ctx.Secrets.ProvisioningToken},
		{"cloud-config", ctx.Secrets.CloudConfig},
	} {
		if never.value != "" && strings.Contains(text, never.value) {
			t.Errorf("bootstrap (join-from-settings): the %s placeholder is in the bootstrap stage; only the kubelet's bootstrap token belongs there", never.what)
		}
	}
	for _, insecure := range []string{"insecure-skip-tls-verify", "insecure = true", "insecure=true", " --insecure", " -k "} {
		if strings.Contains(text, insecure) {
			t.Errorf("bootstrap (join-from-settings): TLS verification is turned off (%q); the node must verify the API server with the cluster CA", strings.TrimSpace(insecure))
		}
	}
	if n := len(text); n > 16*1024 {
		t.Errorf("bootstrap (join-from-settings): %d bytes of files, more than the 16 KiB of bootstrap user-data the host allows", n)
	}
}

// CheckDeterministic renders req three times and fails the test unless the outputs are byte-identical.
func CheckDeterministic(t testing.TB, r Renderer, req *abi.RenderRequest) {
	t.Helper()
	var first []byte
	for i := range 3 {
		resp, err := r.Render(req)
		if err != nil {
			t.Fatalf("render %d: %v", i, err)
		}
		b, err := json.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = b
		} else if !bytes.Equal(first, b) {
			t.Fatalf("%s stage: render %d differs from the first; output must be a function of the input (sort map keys, no clock, no randomness)", req.Stage, i)
		}
	}
}

// CheckBootstrap fails the test unless the bootstrap stage does what the boot contract (sdk/SPEC.md §9) asks,
// for the request's provisioning utility:
//
//   - a file holds the cluster CA, and a script fetches the provisioning Secret from the API server
//     (/api/v1/namespaces/<ns>/secrets/<name>) with the provisioning token placeholder, verifying TLS with
//     that CA file (§9.1, §9.2);
//   - something starts that script at the first boot: an enabled unit whose ExecStart runs it, or a bootcmd or
//     runcmd line;
//   - it hands the configuration off (§9.3). cloud-init: runs `cloud-init … --file …` and then starts the
//     provisioning itself (`systemctl start`, or a config stage), because cloud-init's init stage does not run
//     runcmd. Ignition: stores it as an Ignition config (a .ign file), flags a first boot (first_boot,
//     firstboot) and reboots, and either resets /etc/machine-id or enables the units of the second Ignition
//     run itself (node.IgnitionPresetPath), since Ignition only presets them;
//   - it is not run twice (§9.4): the unit that starts it has a ConditionPathExists=!<marker> and the script
//     creates that marker.
//
// It catches a bootstrap that passes every schema but never provisions the node, such as a no-op handoff.
func CheckBootstrap(t testing.TB, req *abi.RenderRequest, cfg *abi.NodeConfig) {
	t.Helper()
	ctx := req.Context
	var caPath string
	for _, f := range cfg.Files {
		if f.Content.Inline != nil && ctx.Cluster.CACert != "" && strings.Contains(f.Content.Inline.Data, strings.TrimSpace(ctx.Cluster.CACert)) {
			caPath = f.Path
		}
	}
	if caPath == "" {
		t.Errorf("bootstrap: no file holds the cluster CA (context.cluster.caCert); the fetch cannot verify the API server")
	}
	sec := ctx.Cluster.ProvisioningSecret
	url := "/api/v1/namespaces/" + sec.Namespace + "/secrets/" + sec.Name
	var fetch string
	for _, f := range cfg.Files {
		if f.Content.Inline != nil && strings.Contains(f.Content.Inline.Data, url) {
			fetch = f.Content.Inline.Data
		}
	}
	if fetch == "" {
		t.Fatalf("bootstrap: no file fetches the provisioning Secret (%s%s); the node would never be provisioned", ctx.Cluster.ServerURL, url)
	}
	if !strings.Contains(fetch, ctx.Secrets.ProvisioningToken) {
		t.Errorf("bootstrap: the script fetching %s does not use the provisioning token placeholder %q", url, ctx.Secrets.ProvisioningToken)
	}
	if caPath != "" && !strings.Contains(fetch, caPath) {
		t.Errorf("bootstrap: the script fetching %s does not verify TLS with the cluster CA file %s", url, caPath)
	}
	for _, insecure := range []string{" -k ", " --insecure", "--no-check-certificate"} {
		if strings.Contains(fetch, insecure) {
			t.Errorf("bootstrap: the fetch skips TLS verification (%q)", strings.TrimSpace(insecure))
		}
	}
	var fetchPath string
	for _, f := range cfg.Files {
		if f.Content.Inline != nil && f.Content.Inline.Data == fetch {
			fetchPath = f.Path
		}
	}
	checkStarted(t, cfg, fetchPath, fetch)
	switch req.ProvisioningUtility {
	case abi.UtilityCloudInit, "":
		if !strings.Contains(fetch, "cloud-init") || !strings.Contains(fetch, "--file") {
			t.Errorf("bootstrap: the script fetching %s does not hand the configuration to cloud-init (cloud-init … --file …)", url)
		} else if !containsAny(fetch, "systemctl start", "systemctl --no-block start", "--mode config", "--mode=config") {
			t.Errorf("bootstrap: after cloud-init's init stage the script starts nothing; that stage does not run runcmd, so the node is never set up (the kit: systemctl start --no-block osm-setup.service)")
		}
	case abi.UtilityIgnition:
		code := codeLines(fetch)
		if !strings.Contains(fetch, ".ign") {
			t.Errorf("bootstrap: the script fetching %s does not store the configuration where Ignition reads it (a .ign file: Flatcar /oem/config.ign, Fedora CoreOS /boot/ignition/config.ign)", url)
		}
		if !containsAny(code, "first_boot", "firstboot", "editenv") {
			t.Errorf("bootstrap: the script does not flag a first boot (node.IgnitionBoot.Trigger: Flatcar creates /boot/flatcar/first_boot, Fedora CoreOS /boot/ignition.firstboot, MicroOS removes /boot/writable/firstboot_happened); Ignition would not run again")
		}
		if !strings.Contains(fetch, "reboot") {
			t.Errorf("bootstrap: the script does not reboot; Ignition applies the configuration only at the next boot")
		}
		if !containsAny(fetch, "/etc/machine-id", "20-ignition.preset") {
			t.Errorf("bootstrap: the units of the second Ignition run stay disabled: Ignition only presets them and systemd applies presets on a first boot only; reset /etc/machine-id (Flatcar) or enable them after the reboot (node.IgnitionBoot.EnableUnits)")
		}
	}
}

// checkStarted fails the test unless the bootstrap script at path is started at the first boot (an enabled
// unit running it, or a bootcmd or runcmd line) and, when a unit starts it, marks its completion for the
// unit's condition.
func checkStarted(t testing.TB, cfg *abi.NodeConfig, path, script string) {
	t.Helper()
	if path == "" {
		return
	}
	if m := cfg.Modules; m != nil {
		for _, c := range append(append([]string(nil), m.BootCMD...), m.RunCMD...) {
			if strings.Contains(c, path) {
				return
			}
		}
	}
	for _, u := range cfg.Units {
		if u.Content == nil || !strings.Contains(*u.Content, "ExecStart="+path) {
			continue
		}
		if u.Enable == nil || !*u.Enable {
			t.Errorf("bootstrap: unit %s runs %s but is not enabled; nothing starts the bootstrap", u.Name, path)
		}
		var markers []string
		for _, line := range strings.Split(*u.Content, "\n") {
			if m, ok := strings.CutPrefix(strings.TrimSpace(line), "ConditionPathExists=!"); ok {
				markers = append(markers, m)
			}
		}
		if len(markers) == 0 {
			t.Errorf("bootstrap: unit %s has no ConditionPathExists=!<done marker>; a reboot would fetch and apply the configuration again (sdk/SPEC.md §9.4)", u.Name)
		}
		for _, m := range markers {
			if !writesFile(script, m) {
				t.Errorf("bootstrap: %s never creates %s, the done marker of unit %s; a reboot would fetch and apply the configuration again (sdk/SPEC.md §9.4)", path, m, u.Name)
			}
		}
		return
	}
	t.Errorf("bootstrap: nothing starts %s: no enabled unit runs it (ExecStart=%s) and no bootcmd or runcmd line names it", path, path)
}

// writesFile reports whether a line of script creates path (touch, a redirection, install, cp).
func writesFile(script, path string) bool {
	for _, line := range strings.Split(script, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") || !strings.Contains(line, path) {
			continue
		}
		if containsAny(line, "touch ", ">"+path, "> "+path, "install ", "cp ") {
			return true
		}
	}
	return false
}

// codeLines is script without its comments and log lines, which name what the code should do.
func codeLines(script string) string {
	var b strings.Builder
	for _, line := range strings.Split(script, "\n") {
		l := strings.TrimSpace(line)
		if strings.HasPrefix(l, "#") || strings.HasPrefix(l, "log ") {
			continue
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
