package plugintest

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osmhq/osm/sdk/abi"
)

// SampleSecrets are stand-in credential values UserData substitutes for the sample Placeholders, the way the
// host substitutes the real ones when it writes the user-data Secret.
var SampleSecrets = map[string]string{
	Placeholders.BootstrapToken:    "abcdef.0123456789abcdef",
	Placeholders.ProvisioningToken: "sample-provisioning-token",
}

// MachineNamePlaceholder is what the host writes for the machine's name; machine-controller replaces it.
const MachineNamePlaceholder = "<MACHINE_NAME>"

// UserData returns a stage as the final cloud-config user-data a machine receives: the plugin's output with
// what the host adds to every plugin's output (sdk/SPEC.md §10) and the placeholders of
// secrets replaced by the values in secrets (SampleSecrets when nil). It is the host's cloud-init encoding
// written as JSON, which is YAML, so `cloud-init schema` judges what a node would get. Flatcar's
// coreos-cloudinit dialect is not covered.
func UserData(stage abi.Stage, provider string, cfg *abi.NodeConfig, secrets map[string]string) ([]byte, error) {
	if secrets == nil {
		secrets = SampleSecrets
	}
	final := substitute(cfg, secrets)
	doc := map[string]any{"ssh_pwauth": false}
	if stage == abi.StageBootstrap && provider != "aws" {
		doc["hostname"] = MachineNamePlaceholder
		final.Files = append(final.Files, abi.PlainFile("/etc/machine-name", 0o600, MachineNamePlaceholder))
	}
	if len(final.UserSSHKeys) > 0 {
		doc["ssh_authorized_keys"] = final.UserSSHKeys
	}
	var files []map[string]string
	for _, f := range final.Files {
		wf, err := writeFile(f)
		if err != nil {
			return nil, err
		}
		files = append(files, wf)
	}
	var runcmd []string
	if len(final.Units) > 0 {
		runcmd = append(runcmd, "systemctl daemon-reload")
	}
	for _, u := range final.Units {
		if u.Content != nil && *u.Content != "" {
			files = append(files, map[string]string{"path": "/etc/systemd/system/" + u.Name, "permissions": "0644", "content": *u.Content})
		}
		for _, d := range u.DropIns {
			files = append(files, map[string]string{"path": "/etc/systemd/system/" + u.Name + ".d/" + d.Name, "permissions": "0644", "content": d.Content})
		}
		switch {
		case u.Mask != nil && *u.Mask:
			runcmd = append(runcmd, "systemctl mask --now "+u.Name)
		case u.Enable != nil && *u.Enable:
			runcmd = append(runcmd, "systemctl enable --now "+u.Name)
		}
	}
	if m := final.Modules; m != nil {
		if len(m.BootCMD) > 0 {
			doc["bootcmd"] = m.BootCMD
		}
		runcmd = append(runcmd, m.RunCMD...)
		if m.YumRepoDir != "" {
			doc["yum_repo_dir"] = m.YumRepoDir
		}
		if len(m.YumRepos) > 0 {
			doc["yum_repos"] = m.YumRepos
		}
	}
	if len(files) > 0 {
		doc["write_files"] = files
	}
	if len(runcmd) > 0 {
		doc["runcmd"] = runcmd
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append([]byte("#cloud-config\n"), append(b, '\n')...), nil
}

func substitute(cfg *abi.NodeConfig, secrets map[string]string) *abi.NodeConfig {
	var pairs []string
	for _, k := range abi.SortedKeys(secrets) {
		pairs = append(pairs, k, secrets[k])
	}
	r := strings.NewReplacer(pairs...)
	out := *cfg
	out.Files = nil
	for _, f := range cfg.Files {
		if f.Content.Inline != nil {
			in := *f.Content.Inline
			in.Data = r.Replace(in.Data)
			f.Content.Inline = &in
		}
		out.Files = append(out.Files, f)
	}
	out.Units = nil
	for _, u := range cfg.Units {
		if u.Content != nil {
			c := r.Replace(*u.Content)
			u.Content = &c
		}
		var dropIns []abi.DropIn
		for _, d := range u.DropIns {
			dropIns = append(dropIns, abi.DropIn{Name: d.Name, Content: r.Replace(d.Content)})
		}
		u.DropIns = dropIns
		out.Units = append(out.Units, u)
	}
	return &out
}

func writeFile(f abi.File) (map[string]string, error) {
	mode, err := f.Mode()
	if err != nil {
		return nil, err
	}
	if f.Permissions == nil {
		mode = 0o644
	}
	if f.Content.Inline == nil {
		return nil, fmt.Errorf("file %s: content.inline is missing", f.Path)
	}
	wf := map[string]string{"path": f.Path, "permissions": fmt.Sprintf("%#04o", uint32(mode))}
	data := f.Content.Inline.Data
	switch strings.ToLower(f.Content.Inline.Encoding) {
	case "":
		wf["content"] = data
	case "b64", "base64":
		wf["encoding"], wf["content"] = "b64", base64.StdEncoding.EncodeToString([]byte(data))
	case "gzip", "gz", "gzip+base64", "gz+base64", "gzip+b64", "gz+b64":
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write([]byte(data))
		_ = zw.Close()
		wf["encoding"], wf["content"] = "gz+b64", base64.StdEncoding.EncodeToString(buf.Bytes())
	default:
		return nil, fmt.Errorf("file %s: unknown encoding %q", f.Path, f.Content.Inline.Encoding)
	}
	return wf, nil
}

// CloudInitSchema fails the test unless `cloud-init schema` accepts userData as valid cloud-config without
// deprecations. A test that calls it needs cloud-init: without it the test fails, it does not skip
// (install it with your distribution's cloud-init package, or `pip install cloud-init`).
func CloudInitSchema(t testing.TB, name string, userData []byte) {
	t.Helper()
	bin, err := exec.LookPath("cloud-init")
	if err != nil {
		t.Fatalf("%s: cloud-init is needed to validate the user-data (install the cloud-init package): %v", name, err)
	}
	path := filepath.Join(t.TempDir(), "user-data")
	if err := os.WriteFile(path, userData, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "schema", "-c", path).CombinedOutput()
	text := strings.TrimSpace(string(out))
	if err != nil || !strings.Contains(text, "Valid cloud-config") || strings.Contains(strings.ToLower(text), "deprecat") {
		t.Errorf("%s: cloud-init schema rejects the user-data: %s\n--- user-data ---\n%s", name, text, userData)
	}
}
