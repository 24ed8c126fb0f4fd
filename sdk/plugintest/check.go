package plugintest

import (
	"bytes"
	"encoding/json"
	"path"
	"strings"
	"testing"

	"github.com/osmhq/osm/sdk/abi"
)

// Check runs every check of this file that applies to the request's stage on the plugin's response:
// CheckFiles, CheckPlaceholders, CheckDeterministic and, for the bootstrap stage, CheckBootstrap. It is what a
// plugin's tests should call for each stage and provider it supports.
func Check(t *testing.T, r Renderer, req *abi.RenderRequest) *abi.NodeConfig {
	t.Helper()
	resp, err := r.Render(req)
	if err != nil {
		t.Fatalf("render %s: %v", req.Stage, err)
	}
	cfg := &resp.Config
	CheckFiles(t, cfg)
	CheckPlaceholders(t, req, cfg)
	CheckDeterministic(t, r, req)
	if req.Stage == abi.StageBootstrap {
		CheckBootstrap(t, req, cfg)
	}
	return cfg
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

// CheckPlaceholders fails the test unless the credential placeholder the stage needs reaches the output
// verbatim in a file's plain content: the provisioning token in the bootstrap stage (it fetches the
// provisioning configuration with it), the bootstrap token in the provisioning stage (the kubelet joins with
// it). The host substitutes real values only where it finds the placeholder unchanged.
func CheckPlaceholders(t testing.TB, req *abi.RenderRequest, cfg *abi.NodeConfig) {
	t.Helper()
	want := map[abi.Stage]struct{ name, value string }{
		abi.StageBootstrap:    {"provisioning token", req.Context.Secrets.ProvisioningToken},
		abi.StageProvisioning: {"bootstrap token", req.Context.Secrets.BootstrapToken},
	}[req.Stage]
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

// CheckBootstrap fails the test unless the bootstrap stage does what the boot contract (sdk/SPEC.md) asks: a
// file holds the cluster CA, and a script fetches the provisioning Secret from the API server
// (/api/v1/namespaces/<ns>/secrets/<name>) with the provisioning token placeholder, verifying TLS with that
// CA file, and hands the result to the provisioning utility (for cloud-init: runs `cloud-init` with the
// fetched file). It catches a bootstrap that passes every schema but never provisions the node.
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
	if req.ProvisioningUtility == abi.UtilityCloudInit || req.ProvisioningUtility == "" {
		if !strings.Contains(fetch, "cloud-init") || !strings.Contains(fetch, "--file") {
			t.Errorf("bootstrap: the script fetching %s does not hand the configuration to cloud-init (cloud-init … --file …)", url)
		}
	}
}
