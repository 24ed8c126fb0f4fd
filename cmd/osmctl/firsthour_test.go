package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
)

const exampleMD = "../../deploy/examples/machinedeployment-ubuntu.yaml"

// TestBothStagesAreSeparated: --stage both prints each stage's user-data after a YAML document separator that
// names it, so the stream splits into the two documents, cloud-config or Ignition alike.
func TestBothStagesAreSeparated(t *testing.T) {
	md, err := os.ReadFile(exampleMD)
	if err != nil {
		t.Fatal(err)
	}
	flatcar := filepath.Join(t.TempDir(), "md-flatcar.yaml")
	if err := os.WriteFile(flatcar, []byte(strings.NewReplacer("osp-ubuntu", "osp-flatcar", "operatingSystem: ubuntu", "operatingSystem: flatcar").Replace(string(md))), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ md, start string }{
		{exampleMD, "#cloud-config\n"},
		{flatcar, `{"ignition":`},
	} {
		r := osmctl(t, "render", "-f", tc.md, "--stage", "both")
		if r.code != 0 {
			t.Fatal(r)
		}
		docs := strings.Split(r.stdout, "--- # ")
		if len(docs) != 3 || docs[0] != "" || !strings.HasPrefix(docs[1], "bootstrap user-data\n"+tc.start) ||
			!strings.HasPrefix(docs[2], "provisioning user-data\n"+tc.start) {
			t.Errorf("%s: want two documents, bootstrap then provisioning, each after its separator:\n%.400s", tc.md, r.stdout)
			continue
		}
		// What a YAML reader makes of the stream: two documents, Ignition's JSON being YAML too.
		dec := yamlv3.NewDecoder(strings.NewReader(r.stdout))
		var n int
		for ; ; n++ {
			var doc map[string]any
			if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: document %d: %v", tc.md, n, err)
			}
			if _, ok := doc["ignition"]; ok != (tc.md == flatcar) || len(doc) == 0 {
				t.Errorf("%s: document %d is not the stage's user-data: %.200v", tc.md, n, doc)
			}
		}
		if n != 2 {
			t.Errorf("%s: a YAML reader finds %d documents, want 2", tc.md, n)
		}
	}
}

// TestExportedProfileIsADiffBase: what profile export prints is the --from of a diff: against itself nothing
// differs (exit 0), and a file added to a copy shows (exit 1).
func TestExportedProfileIsADiffBase(t *testing.T) {
	exported := mustSucceed(t, osmctl(t, "profile", "export", "osp-ubuntu")).stdout
	dir := t.TempDir()
	from, to := filepath.Join(dir, "osp-ubuntu.yaml"), filepath.Join(dir, "osp-ubuntu-site.yaml")
	site := strings.NewReplacer("version: v2.0.0", "version: v2.0.1", "  provisioningConfig: {}\n", `  provisioningConfig:
    files:
      - path: /etc/site.conf
        permissions: 644
        content:
          inline:
            data: "site=1\n"
`).Replace(exported)
	if site == exported {
		t.Fatal("the exported profile no longer has the version and the empty provisioningConfig this test changes")
	}
	for p, content := range map[string]string{from: exported, to: site} {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if r := osmctl(t, "diff", "-f", exampleMD, "--from", from); r.code != 0 {
		t.Errorf("the exported profile against itself: %s", r)
	}
	r := osmctl(t, "diff", "-f", exampleMD, "--from", from, "--to", to)
	if r.code != 1 || !strings.Contains(r.stdout, "provisioning: file /etc/site.conf added (mode 0644)\n") || !strings.Contains(r.stdout, "+site=1\n") {
		t.Errorf("want the added file, exit 1: %s", r)
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
