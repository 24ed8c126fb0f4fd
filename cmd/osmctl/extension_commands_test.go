package main

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestExtensionCommandsRunWhereTheProfilesDo renders the default Ubuntu profile with an extension that has a
// runcmd and a bootcmd, and reads the provisioning user-data the way the node gets it: cloud-init's init stage,
// which applies it, runs bootcmd but no runcmd, so the extension's runcmd must be in the provisioning commands
// script that osm-setup runs (after the profile's own), and its bootcmd must stay in cloud-config bootcmd.
// Before, the extension's runcmd was only appended to cloud-config runcmd, which nothing on the node ran.
func TestExtensionCommandsRunWhereTheProfilesDo(t *testing.T) {
	requireBuiltin(t, "ubuntu")
	ext := filepath.Join(t.TempDir(), "commands.yaml")
	if err := os.WriteFile(ext, []byte(`apiVersion: operatingsystemmanager.k8c.io/v1alpha1
kind: OperatingSystemProfileExtension
metadata: {name: commands, namespace: kube-system}
spec:
  selector: {osNames: [ubuntu]}
  provisioningConfig:
    modules:
      bootcmd: [echo extension-boot >/run/ext-boot]
      runcmd: [echo extension-run >/run/ext-run, sysctl --system]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := mustSucceed(t, osmctl(t, "render", "-f", ubuntuMD, "--extension", ext))
	var cc struct {
		BootCMD    []any `json:"bootcmd"`
		WriteFiles []struct {
			Path, Content, Encoding, Permissions string
		} `json:"write_files"`
	}
	if err := yaml.Unmarshal([]byte(r.stdout), &cc); err != nil {
		t.Fatalf("the provisioning user-data is not YAML: %v", err)
	}
	files := map[string]string{}
	for _, f := range cc.WriteFiles {
		files[f.Path] = decodeWriteFile(t, f.Content, f.Encoding)
		if f.Path == "/etc/osm/provisioning-commands.sh" && f.Permissions != "0700" {
			t.Errorf("%s has mode %s, want 0700", f.Path, f.Permissions)
		}
	}
	commands, ok := files["/etc/osm/provisioning-commands.sh"]
	if !ok {
		t.Fatalf("the provisioning user-data has no /etc/osm/provisioning-commands.sh; files: %v", keys(files))
	}
	if !strings.HasPrefix(commands, "#!/bin/sh\n") || !strings.HasSuffix(commands, "echo extension-run >/run/ext-run\nsysctl --system\n") {
		t.Errorf("the extension's runcmd is not at the end of the provisioning commands script:\n%s", commands)
	}
	if strings.Contains(commands, "extension-boot") {
		t.Errorf("the extension's bootcmd, which cloud-init's init stage runs, is also in the commands script:\n%s", commands)
	}
	if setup := files["/opt/bin/osm-setup"]; !strings.Contains(setup, "then /etc/osm/provisioning-commands.sh ||") {
		t.Errorf("osm-setup does not run the provisioning commands script")
	}
	boot := false
	for _, c := range cc.BootCMD {
		if s, ok := c.(string); ok && strings.Contains(s, "extension-boot") {
			boot = true
		}
	}
	if !boot {
		t.Errorf("the extension's bootcmd is not in cloud-config bootcmd: %v", cc.BootCMD)
	}
}

func decodeWriteFile(t *testing.T, content, encoding string) string {
	t.Helper()
	switch encoding {
	case "":
		return content
	case "b64":
		b, err := base64.StdEncoding.DecodeString(content)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	case "gz+b64":
		b, err := base64.StdEncoding.DecodeString(content)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		out, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	t.Fatalf("unknown write_files encoding %q", encoding)
	return ""
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
