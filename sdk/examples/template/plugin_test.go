package main

import (
	"strings"
	"testing"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/guest"
	"github.com/osmhq/osm/sdk/plugintest"
)

// TestFixtures runs testdata/*.request.json natively; `go test -update` rewrites the expected responses.
func TestFixtures(t *testing.T) {
	plugintest.RunFixtures(t, "testdata", plugintest.Native(Plugin{}))
}

// TestFixturesWasm runs the same fixtures through the module the controller would run, built from this
// package with the production flags and loaded with the production limits.
func TestFixturesWasm(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin to wasm")
	}
	m := plugintest.Load(t, plugintest.Build(t, "."))
	if got := m.Metadata(); got.Name != "template" || !m.Implements(abi.ExportValidate) {
		t.Errorf("metadata %+v, validate implemented: %v", got, m.Implements(abi.ExportValidate))
	}
	plugintest.RunFixtures(t, "testdata", plugintest.Wasm(m))
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name       string
		req        abi.ValidateRequest
		wantFields []string
	}{
		{name: "valid", req: abi.ValidateRequest{OSVersion: "1.2", Config: map[string]string{"ntpServer": "time.example.com"}}},
		{name: "bad ntp server", req: abi.ValidateRequest{OSVersion: "1.2", Config: map[string]string{"ntpServer": "a b"}},
			wantFields: []string{"spec.plugin.config.ntpServer"}},
		{name: "unsupported version", req: abi.ValidateRequest{OSVersion: "2.0"}, wantFields: []string{"spec.osVersion"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := guest.CallValidate(Plugin{}, &tt.req)
			if err != nil {
				t.Fatal(err)
			}
			var fields []string
			for _, e := range resp.Errors {
				fields = append(fields, e.Field)
			}
			if strings.Join(fields, ",") != strings.Join(tt.wantFields, ",") {
				t.Errorf("error fields = %v, want %v", fields, tt.wantFields)
			}
		})
	}
}

// TestStages runs the harness's checks on both stages: the bootstrap really fetches the provisioning
// configuration and hands it to cloud-init, placeholders survive, paths and modes are valid, the output is
// deterministic; then the final user-data, with what the host adds, must pass `cloud-init schema`.
func TestStages(t *testing.T) {
	for _, stage := range []abi.Stage{abi.StageBootstrap, abi.StageProvisioning} {
		t.Run(string(stage), func(t *testing.T) {
			req := plugintest.Request("exampleos", "1.4", abi.UtilityCloudInit, "hetzner", stage)
			cfg := plugintest.Check(t, plugintest.Native(Plugin{}), req)
			data, err := plugintest.UserData(stage, "hetzner", cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			plugintest.CloudInitSchema(t, string(stage), data)
		})
	}
}

func TestMetadataIsValid(t *testing.T) {
	if _, err := guest.CallMetadata(Plugin{}); err != nil {
		t.Fatal(err)
	}
}
