package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDiffPluginFile: --plugin-file stands in for the new side's plugin only. The old side renders the
// template plugin pinned in a registry; the new side names an image no registry has, which only the file can
// answer, with another plugin config: the diff shows the config's change and exits 1.
func TestDiffPluginFile(t *testing.T) {
	reg := newRegistry(t, nil)
	ref := pushTemplate(t, reg, "osm/template")
	wasm := buildPlugin(t, templatePluginDir, "template.wasm")
	from := profileWithImage(t, ref)
	data, err := os.ReadFile(profileWithImage(t, "registry.invalid/osm/template:0.2.0"))
	if err != nil {
		t.Fatal(err)
	}
	next := strings.Replace(string(data), "ntpServer: time.example.com", "ntpServer: ntp.example.org", 1)
	if next == string(data) {
		t.Fatal("testdata/osp-exampleos.yaml no longer sets ntpServer: time.example.com")
	}
	to := filepath.Join(t.TempDir(), "osp-next.yaml")
	if err := os.WriteFile(to, []byte(next), 0o644); err != nil {
		t.Fatal(err)
	}
	r := osmctl(t, "diff", "-f", "testdata/md-exampleos.yaml", "--from", from, "--to", to, "--plugin-file", wasm, "--stage", "provisioning")
	if r.code != 1 || !strings.Contains(r.stdout, "ntp.example.org") || !strings.Contains(r.stdout, "time.example.com") {
		t.Errorf("diff --plugin-file: want the NTP change and exit 1:\n%s", r)
	}
	if r := osmctl(t, "diff", "-f", "testdata/md-exampleos.yaml", "--from", from, "--to", to, "--stage", "provisioning"); r.code != 2 || !strings.Contains(r.stderr, "registry.invalid") {
		t.Errorf("without --plugin-file the new side's image must be pulled (and fail here):\n%s", r)
	}
}
