package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osmhq/osm/host/encode/cloudinit/cloudinittest"
)

const siteExtension = "../../deploy/examples/extension-site.yaml"

// TestExtensionsOffline shows an extension's effect before it is applied: render applies it, diff lists exactly
// what it adds, and lint accepts it but rejects one that collides with the profile, naming the field.
func TestExtensionsOffline(t *testing.T) {
	requireBuiltin(t, "ubuntu")
	r := mustSucceed(t, osmctl(t, "render", "-f", ubuntuMD, "--extension", siteExtension))
	for _, want := range []string{"/etc/sysctl.d/90-site.conf", "NTP=ntp.site.example", "apt-get install -y --no-install-recommends nfs-common"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("render with the extension lacks %q", want)
		}
	}
	if !strings.Contains(r.stderr, "extensions applied: [site-baseline]") {
		t.Errorf("render does not say which extensions applied:\n%s", r.stderr)
	}

	d := osmctl(t, "diff", "-f", ubuntuMD, "--from", "../../plugins/osps/osp-ubuntu.yaml", "--to-extension", siteExtension, "--stage", "provisioning")
	if d.code != 1 {
		t.Fatalf("diff of an extension that changes something: %s", d)
	}
	for _, want := range []string{
		"extension site-baseline",
		"provisioning: file /etc/sysctl.d/90-site.conf added (mode 0644)",
		"provisioning: unit containerd.service drop-in 10-site-ca.conf added",
	} {
		if !strings.Contains(d.stdout, want) {
			t.Errorf("diff lacks %q:\n%s", want, d.stdout)
		}
	}
	if strings.Contains(d.stdout, "/etc/containerd/config.toml") {
		t.Errorf("diff shows a file the extension does not touch:\n%s", d.stdout)
	}

	mustSucceed(t, osmctl(t, "lint", "-f", siteExtension))
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte(`apiVersion: operatingsystemmanager.k8c.io/v1alpha1
kind: OperatingSystemProfileExtension
metadata: {name: replaces-containerd}
spec:
  selector: {names: [osp-ubuntu]}
  provisioningConfig:
    files:
      - path: /etc/containerd/config.toml
        content: {inline: {data: "version = 3\n"}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	l := osmctl(t, "lint", "-f", bad)
	if l.code != 1 || !strings.Contains(l.stderr, "spec.provisioningConfig.overrides") || !strings.Contains(l.stderr, "/etc/containerd/config.toml") {
		t.Errorf("lint of a colliding extension: %s", l)
	}
}

// TestSitePluginExtension is the second way to extend the defaults: the site plugin of sdk/examples/site,
// pushed to an in-process registry and referenced by digest from an extension, adds a CA, NTP servers, a sysctl
// and a package to the default Ubuntu profile's user-data, which cloud-init's schema accepts.
func TestSitePluginExtension(t *testing.T) {
	requireBuiltin(t, "ubuntu")
	reg := newRegistry(t, nil)
	wasm := buildPlugin(t, "../../sdk/examples/site", "site.wasm")
	ref := strings.TrimSpace(mustSucceed(t, osmctl(t, "plugin", "push", "--plain-http", "-q", wasm, reg.host+"/osm/site")).stdout)
	ext := filepath.Join(t.TempDir(), "site-plugin.yaml")
	if err := os.WriteFile(ext, []byte(`apiVersion: operatingsystemmanager.k8c.io/v1alpha1
kind: OperatingSystemProfileExtension
metadata: {name: site-plugin, namespace: kube-system}
spec:
  selector: {osNames: [ubuntu, debian]}
  plugins:
    - image: `+ref+`
      config:
        caBundle: "-----BEGIN CERTIFICATE-----\nMIIBJDCB16ADAgECAgEBMAUGAytlcDAaMRgwFgYDVQQDEw9FeGFtcGxlIFNpdGUg\n-----END CERTIFICATE-----"
        ntpServers: ntp1.site.example ntp2.site.example
        sysctls: vm.max_map_count=262144
        packages: nfs-common
`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := mustSucceed(t, osmctl(t, "render", "-f", ubuntuMD, "--extension", ext))
	for _, want := range []string{
		"/usr/local/share/ca-certificates/osm-site-ca.crt", "NTP=ntp1.site.example ntp2.site.example",
		"vm.max_map_count = 262144", "apt-get install -y --no-install-recommends nfs-common", "10-osm-site-ca.conf",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("user-data lacks %q", want)
		}
	}
	cloudinittest.Validate(t, "ubuntu with the site plugin", []byte(r.stdout))
	mustSucceed(t, osmctl(t, "lint", "-f", ext))
}
