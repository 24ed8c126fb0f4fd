package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	openSUSEMD = `apiVersion: cluster.k8s.io/v1alpha1
kind: MachineDeployment
metadata:
  name: sles
  namespace: kube-system
  annotations:
    k8c.io/operating-system-profile: osp-sles
    machinedeployment.clusters.k8s.io/revision: "1"
spec:
  template:
    spec:
      providerSpec:
        value:
          cloudProvider: aws
          cloudProviderSpec: {region: eu-central-1}
          operatingSystem: opensuse
          operatingSystemSpec: {}
      versions:
        kubelet: 1.33.2
`
	openSUSEOSP = `apiVersion: operatingsystemmanager.k8c.io/v1alpha1
kind: OperatingSystemProfile
metadata:
  name: osp-sles
  namespace: kube-system
spec:
  osName: opensuse
  osVersion: 15-SP6
  version: v1.0.0
  supportedCloudProviders: [{name: aws}]
  bootstrapConfig: {}
  provisioningConfig: {}
  plugin:
    image: registry.invalid/osm/opensuse@sha256:0000000000000000000000000000000000000000000000000000000000000000
    secrets:
      - name: SECRET_NAME
        secretRef: {name: sles-registration, key: code}
`
)

// TestRenderPluginSecrets renders the openSUSE example (built from sdk/examples/opensuse) for a SLES profile that
// hands it the registration code: --plugin-secret NAME=@FILE substitutes the value, without it the placeholder
// stays, a flag for a secret the profile lacks is an error, and lint refuses a secret the plugin does not declare.
func TestRenderPluginSecrets(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	md := write("md.yaml", openSUSEMD)
	osp := write("osp.yaml", strings.Replace(openSUSEOSP, "SECRET_NAME", "registration-code", 1))
	code := write("code.txt", "SLES-REG-0123456789")
	wasm := buildPlugin(t, "../../sdk/examples/opensuse", "opensuse.wasm")
	args := []string{"render", "-f", md, "--osp", osp, "--plugin-file", wasm, "--stage", "provisioning"}

	r := mustSucceed(t, osmctl(t, append(args, "--plugin-secret", "registration-code=@"+code)...))
	if !strings.Contains(r.stdout, "SLES-REG-0123456789") || strings.Contains(r.stdout, "__OSM_SECRET_PLUGIN_REGISTRATION_CODE__") {
		t.Errorf("render --plugin-secret did not substitute the code:\n%s", r.stdout)
	}
	r = mustSucceed(t, osmctl(t, args...))
	if !strings.Contains(r.stdout, "__OSM_SECRET_PLUGIN_REGISTRATION_CODE__") {
		t.Errorf("render without --plugin-secret lost the placeholder:\n%s", r.stdout)
	}
	r = osmctl(t, append(args, "--plugin-secret", "mirror-password=x")...)
	if r.code == 0 || !strings.Contains(r.stderr, `has no secret "mirror-password" (it has registration-code)`) {
		t.Errorf("render with a secret the profile lacks: %s", r)
	}
	bogus := write("bogus.yaml", strings.Replace(openSUSEOSP, "SECRET_NAME", "regcode", 1))
	r = osmctl(t, "lint", "-f", bogus, "--plugin-file", wasm)
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "regcode is not a secret of plugin opensuse (known: registration-code)") {
		t.Errorf("lint of a profile naming an undeclared secret: %s", r)
	}
}
