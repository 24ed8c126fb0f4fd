package plugins_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/plugins"
	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/plugintest"
)

// TestPlugintestUserDataMatchesTheHost keeps plugintest.UserData, which plugin authors validate with
// `cloud-init schema` in their go test, equal to what the controller writes to the user-data Secret: the same
// stages rendered by the controller's pipeline are encoded both ways and compared as data. Profiles whose
// output uses what UserData leaves out (Flatcar's coreos-cloudinit dialect, RHEL's rh_subscription) are not
// compared.
func TestPlugintestUserDataMatchesTheHost(t *testing.T) {
	profiles, err := plugins.DefaultProfiles()
	if err != nil {
		t.Fatal(err)
	}
	r := &render.Renderer{Plugins: newSource(t, dist(t))}
	values := map[string]string{
		render.Placeholders.BootstrapToken:    secrets.BootstrapToken,
		render.Placeholders.ProvisioningToken: secrets.ProvisioningToken,
		render.Placeholders.RegistryAuth:      secrets.RegistryAuth,
	}
	compared := 0
	for _, osp := range profiles {
		if osp.Name != "osp-ubuntu" && osp.Name != "osp-debian-12" && osp.Name != "osp-rockylinux" {
			continue
		}
		for _, provider := range []string{"aws", "hetzner", "azure"} {
			out, err := r.Render(context.Background(), render.Input{
				MachineDeployment: machineDeployment(t, osp, provider), Profile: osp, Settings: settings(),
				Cluster: render.ClusterInfo{ServerURL: "https://api.cluster.example.com:6443", CACert: plugintest.CACert},
			})
			if err != nil {
				t.Fatalf("%s/%s: %v", osp.Name, provider, err)
			}
			for _, stage := range []abi.Stage{abi.StageBootstrap, abi.StageProvisioning} {
				host, err := out.UserData(context.Background(), stage, secrets)
				if err != nil {
					t.Fatal(err)
				}
				sdk, err := plugintest.UserData(stage, provider, out.Stage(stage), values)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(cloudConfig(t, host), cloudConfig(t, sdk)); diff != "" {
					t.Errorf("%s/%s %s: plugintest.UserData differs from the controller's user-data (-host +plugintest):\n%s", osp.Name, provider, stage, diff)
				}
				compared++
			}
		}
	}
	if compared != 18 {
		t.Fatalf("compared %d stages, want 18 (3 profiles x 3 providers x 2 stages)", compared)
	}
}

// cloudConfig parses user-data into data, with every file's content decoded, so that the transport (and gzip's
// compression level) does not count as a difference.
func cloudConfig(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := yaml.Unmarshal(bytes.TrimPrefix(data, []byte("#cloud-config\n")), &doc); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	files, _ := doc["write_files"].([]any)
	for _, f := range files {
		wf := f.(map[string]any)
		content, _ := wf["content"].(string)
		switch wf["encoding"] {
		case "b64", "gz+b64":
			raw, err := base64.StdEncoding.DecodeString(content)
			if err != nil {
				t.Fatal(err)
			}
			if wf["encoding"] == "gz+b64" {
				zr, err := gzip.NewReader(bytes.NewReader(raw))
				if err != nil {
					t.Fatal(err)
				}
				if raw, err = io.ReadAll(zr); err != nil {
					t.Fatal(err)
				}
			}
			wf["content"] = string(raw)
			delete(wf, "encoding")
		}
	}
	return doc
}
