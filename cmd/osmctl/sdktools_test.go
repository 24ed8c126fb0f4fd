package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLocalRegistryNeedsNoFlag: a registry on 127.0.0.1 (as `docker run registry` gives) is reached over
// plain HTTP without a flag by push, pull and render; and the --plugin-registry-* names work on every command.
func TestLocalRegistryNeedsNoFlag(t *testing.T) {
	reg := newRegistry(t, nil)
	if !strings.HasPrefix(reg.host, "127.0.0.1:") {
		t.Fatalf("test registry at %s, want 127.0.0.1", reg.host)
	}
	wasm := buildPlugin(t, templatePluginDir, "template.wasm")
	ref := strings.TrimSpace(mustSucceed(t, osmctl(t, "plugin", "push", "-q", wasm, reg.host+"/osm/template:0.1.0")).stdout)
	mustSucceed(t, osmctl(t, "plugin", "pull", ref, "-o", filepath.Join(t.TempDir(), "p.wasm")))
	mustSucceed(t, osmctl(t, "plugin", "inspect", "--plugin-registry-plain-http", ref))
	r := mustSucceed(t, osmctl(t, "render", "-f", "testdata/md-exampleos.yaml", "--osp", profileWithImage(t, ref), "--stage", "bootstrap"))
	if !strings.Contains(r.stdout, "#cloud-config") {
		t.Errorf("render printed no user-data:\n%s", r)
	}
	mustSucceed(t, osmctl(t, "lint", "-f", profileWithImage(t, ref)))
	// An explicit CA says the local registry speaks TLS: no silent downgrade to plain HTTP then.
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := (&registryFlags{caFile: ca}).forReference(reg.host + "/x"); got.plainHTTP {
		t.Error("a registry with a CA file was switched to plain HTTP")
	}
	for host, local := range map[string]bool{"localhost:5000": true, "127.0.0.1": true, "[::1]:5000": true, "registry.example.com": false, "localhost.example.com:5000": false} {
		if localRegistry(host) != local {
			t.Errorf("localRegistry(%q) = %v, want %v", host, !local, local)
		}
	}
}

// TestRenderAndLintPluginFile renders and lints with a local module that no registry has.
func TestRenderAndLintPluginFile(t *testing.T) {
	wasm := buildPlugin(t, templatePluginDir, "template.wasm")
	osp := profileWithImage(t, "registry.invalid/osm/template:0.1.0")
	r := mustSucceed(t, osmctl(t, "render", "-f", "testdata/md-exampleos.yaml", "--osp", osp, "--plugin-file", wasm, "--stage", "bootstrap"))
	for _, want := range []string{"#cloud-config", "/opt/bin/osm-bootstrap", "/etc/motd"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("render --plugin-file lacks %q:\n%s", want, r)
		}
	}
	if !strings.Contains(r.stderr, "plugin template 0.1.0 from file:"+wasm) {
		t.Errorf("render does not say it used the plugin file:\n%s", r.stderr)
	}
	mustSucceed(t, osmctl(t, "lint", "-f", osp, "--plugin-file", wasm))

	noPlugin := filepath.Join(t.TempDir(), "osp.yaml")
	data, err := os.ReadFile(osp)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(data), "  plugin:\n    image: registry.invalid/osm/template:0.1.0\n    config:\n      ntpServer: time.example.com\n", "", 1)
	if err := os.WriteFile(noPlugin, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	r = osmctl(t, "render", "-f", "testdata/md-exampleos.yaml", "--osp", noPlugin, "--plugin-file", wasm)
	if r.code == 0 || !strings.Contains(r.stderr, "has no spec.plugin for the file to stand in for") {
		t.Errorf("render --plugin-file with a profile without plugin: %s", r)
	}
	r = osmctl(t, "render", "-f", "testdata/md-exampleos.yaml", "--osp", osp, "--plugin-file", "testdata/md-exampleos.yaml")
	if r.code == 0 || !strings.Contains(r.stderr, "is not a WebAssembly module") {
		t.Errorf("render --plugin-file with a YAML file: %s", r)
	}
}

// TestPluginInit scaffolds a module, then builds, tests and renders it offline, as its README promises.
func TestPluginInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mylinux")
	r := osmctl(t, "plugin", "init", "mylinux", "--dir", dir)
	if r.code == 0 || !strings.Contains(r.stderr, "pass --sdk-dir") {
		t.Fatalf("init without an SDK version from a source-tree osmctl: %s", r)
	}
	mustSucceed(t, osmctl(t, "plugin", "init", "mylinux", "--dir", dir, "--sdk-dir", "../../sdk", "--os-version", "2.0", "--cloud-providers", "hetzner,aws"))
	if r := osmctl(t, "plugin", "init", "mylinux", "--dir", dir, "--sdk-dir", "../../sdk"); r.code == 0 || !strings.Contains(r.stderr, "exists") {
		t.Errorf("init over an existing directory: %s", r)
	}
	for _, f := range []string{"go.mod", "go.sum", "main.go", "plugin.go", "plugin_test.go", "Makefile", ".github/workflows/plugin.yaml", "osp.yaml", "machinedeployment.yaml", "README.md"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("scaffold lacks %s", f)
		}
	}
	goCmd := goIn(t, dir)
	goCmd(nil, "vet", ".")
	goCmd(nil, "test", "-count=1", "-run", "TestGolden", "-update", ".")
	goCmd(nil, "test", "-count=1", "-run", "TestGolden|TestStages/hetzner/", ".")
	wasm := filepath.Join(dir, "mylinux.wasm")
	goCmd([]string{"GOOS=wasip1", "GOARCH=wasm"}, "build", "-buildmode=c-shared", "-trimpath", "-ldflags=-s -w", "-o", wasm, ".")
	r = mustSucceed(t, osmctl(t, "render", "-f", filepath.Join(dir, "machinedeployment.yaml"), "--osp", filepath.Join(dir, "osp.yaml"),
		"--plugin-file", wasm, "--stage", "both"))
	for _, want := range []string{`hostname: "<MACHINE_NAME>"`, "/opt/bin/osm-bootstrap", "/opt/bin/osm-setup"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("rendered scaffold lacks %q", want)
		}
	}
	mustSucceed(t, osmctl(t, "lint", "-f", filepath.Join(dir, "osp.yaml"), "--plugin-file", wasm))
}

func TestPluginInitInputs(t *testing.T) {
	mod, err := scaffoldGoMod("example.com/p", "v1.2.3", "", t.TempDir())
	if err != nil || !strings.Contains(string(mod), "require github.com/osmhq/osm/sdk v1.2.3\n") || strings.Contains(string(mod), "replace") ||
		!strings.Contains(string(mod), "github.com/tetratelabs/wazero ") {
		t.Errorf("go.mod with a released SDK:\n%s (%v)", mod, err)
	}
	for _, tt := range []struct{ args, want []string }{
		{[]string{"My_OS"}, []string{"lower case letters, digits and dashes"}},
		{[]string{"myos", "--family", "pacman"}, []string{`--family "pacman": want apt or dnf`}},
		{[]string{"myos", "--cloud-providers", "aws,Bad Provider"}, []string{"is not a provider name"}},
		{[]string{"myos", "--sdk-dir", t.TempDir()}, []string{"no go.mod there"}},
	} {
		dir := filepath.Join(t.TempDir(), "out")
		r := osmctl(t, append(append([]string{"plugin", "init"}, tt.args...), "--dir", dir)...)
		if r.code == 0 || !strings.Contains(r.stderr, tt.want[0]) {
			t.Errorf("plugin init %v: %s", tt.args, r)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("plugin init %v failed but wrote %s", tt.args, dir)
		}
	}
}
