package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLintWarnsAndRefusesHostileProfiles: osmctl lint warns about upstream's curl -k without failing the
// profile, and refuses a template that would exhaust the controller's memory, naming the field and the limit.
func TestLintWarnsAndRefusesHostileProfiles(t *testing.T) {
	r := mustSucceed(t, osmctl(t, "lint", "-f", "../../crds/testdata/upstream/osp-amzn2.yaml"))
	if !strings.Contains(r.stderr, "osp-amzn2.yaml: warning: spec.bootstrapConfig.files[1].content.inline.data: curl -k turns off TLS certificate verification") {
		t.Errorf("no curl -k warning: %s", r)
	}

	data, err := os.ReadFile("../../crds/testdata/osp-minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	hostile := strings.Replace(string(data), `data: '{{ template "greeting" . }}'`, `data: '{{ repeat 3000000000 "x" }}'`, 1)
	hostile = strings.Replace(hostile, "- name: bootstrap.service", `- name: "bootstrap.service; reboot"`, 1)
	path := filepath.Join(t.TempDir(), "osp.yaml")
	if err := os.WriteFile(path, []byte(hostile), 0o600); err != nil {
		t.Fatal(err)
	}
	r = osmctl(t, "lint", "-f", path)
	if r.code != 1 || !strings.Contains(r.stderr, "spec.bootstrapConfig.units[0].name: Invalid value") {
		t.Errorf("unit name with a command passed: %s", r)
	}
	hostile = strings.Replace(hostile, `- name: "bootstrap.service; reboot"`, "- name: bootstrap.service", 1)
	if err := os.WriteFile(path, []byte(hostile), 0o600); err != nil {
		t.Fatal(err)
	}
	r = osmctl(t, "lint", "-f", path)
	if r.code != 1 || !strings.Contains(r.stderr, "spec.provisioningConfig.files[0].content.inline.data") || !strings.Contains(r.stderr, "over the ValueBytes limit") {
		t.Errorf("repeat 3000000000 passed: %s", r)
	}
}
