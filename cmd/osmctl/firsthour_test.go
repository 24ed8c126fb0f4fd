package main

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
)

const exampleMD = "../../deploy/examples/machinedeployment-ubuntu.yaml"

// TestBothStagesAreSeparated: --stage both prints each stage's user-data after a YAML document separator that
// names it, so the stream splits into the two documents, cloud-config or Ignition alike.
func TestBothStagesAreSeparated(t *testing.T) {
	r := osmctl(t, "render", "-f", exampleMD, "--stage", "both")
	if r.code != 0 {
		t.Fatal(r)
	}
	docs := strings.Split(r.stdout, "--- # ")
	if len(docs) != 3 || docs[0] != "" || !strings.HasPrefix(docs[1], "bootstrap user-data\n#cloud-config\n") ||
		!strings.HasPrefix(docs[2], "provisioning user-data\n#cloud-config\n") {
		t.Errorf("want two documents, bootstrap then provisioning, each after its separator:\n%.400s", r.stdout)
	}
}

// TestStageNarrowsTheOSC: -o osc prints the whole OperatingSystemConfig, or one stage's configuration when
// --stage names one.
func TestStageNarrowsTheOSC(t *testing.T) {
	for _, tc := range []struct {
		args                    []string
		bootstrap, provisioning bool
	}{
		{nil, true, true},
		{[]string{"--stage", "bootstrap"}, true, false},
		{[]string{"--stage", "provisioning"}, false, true},
		{[]string{"--stage", "both"}, true, true},
	} {
		r := osmctl(t, append([]string{"render", "-f", exampleMD, "-o", "osc"}, tc.args...)...)
		if r.code != 0 {
			t.Fatalf("%v: %s", tc.args, r)
		}
		var osc osmv1alpha1.OperatingSystemConfig
		if err := yaml.Unmarshal([]byte(r.stdout), &osc); err != nil {
			t.Fatal(err)
		}
		if got := len(osc.Spec.BootstrapConfig.Files) > 0; got != tc.bootstrap {
			t.Errorf("%v: bootstrap configuration present = %v", tc.args, got)
		}
		if got := len(osc.Spec.ProvisioningConfig.Files) > 0; got != tc.provisioning {
			t.Errorf("%v: provisioning configuration present = %v", tc.args, got)
		}
	}
}

// TestInspectABuiltinByName: plugin inspect takes a built-in plugin's name, and a name that is none says which
// exist.
func TestInspectABuiltinByName(t *testing.T) {
	r := osmctl(t, "plugin", "inspect", "flatcar")
	if r.code != 0 || !strings.Contains(r.stdout, "flatcar") || !strings.Contains(r.stdout, "ignition") {
		t.Errorf("inspect flatcar: %s", r)
	}
	r = osmctl(t, "plugin", "inspect", "ubuntuu")
	if r.code == 0 || !strings.Contains(r.stderr, "built-in: amzn2, debian, flatcar") {
		t.Errorf("inspect ubuntuu: %s", r)
	}
}
