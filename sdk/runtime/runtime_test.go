package runtime_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/runtime"
)

func renderRequest() *abi.RenderRequest {
	return &abi.RenderRequest{
		Stage:               abi.StageProvisioning,
		ProvisioningUtility: abi.UtilityCloudInit,
		Config:              map[string]string{"b": "2", "a": "1"},
		Context: abi.RenderContext{
			MachineDeployment: abi.ObjectRef{Name: "md-1", Namespace: "kube-system"},
			Secrets:           abi.SecretPlaceholders{BootstrapToken: "__OSM_SECRET_bootstrapToken__"},
		},
		Input: abi.NodeConfig{Files: []abi.File{abi.PlainFile("/etc/motd", 0o644, "hi")}},
	}
}

func TestRenderHealthy(t *testing.T) {
	var outputs []runtime.OutputEvent
	rt := newRuntime(t, runtime.Config{Hooks: runtime.Hooks{Output: func(e runtime.OutputEvent) { outputs = append(outputs, e) }}})
	m := load(t, rt, "healthy")

	md := m.Metadata()
	if md.Name != "healthy" || md.ABIVersion != abi.Version {
		t.Errorf("metadata = %+v", md)
	}
	if !m.Implements(abi.ExportValidate) || m.Implements(abi.ExportEncode) {
		t.Errorf("Implements: validate=%v encode=%v, want true, false", m.Implements(abi.ExportValidate), m.Implements(abi.ExportEncode))
	}
	resp, err := m.Render(context.Background(), renderRequest())
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Config.File("/etc/osm/config"); got == nil || got.Content.Inline.Data != "a=1\nb=2\n" {
		t.Errorf("config file = %+v", got)
	}
	if got := resp.Config.File("/etc/osm/token"); got == nil || got.Content.Inline.Data != "__OSM_SECRET_bootstrapToken__" {
		t.Errorf("placeholder not copied verbatim: %+v", got)
	}
	if len(outputs) != 1 || outputs[0].Stream != "stderr" || outputs[0].Text != "rendering provisioning for md-1\n" || outputs[0].Export != abi.ExportRender {
		t.Errorf("captured output = %+v", outputs)
	}
}

func TestValidate(t *testing.T) {
	m := load(t, newRuntime(t, runtime.Config{}), "healthy")
	resp, err := m.Validate(context.Background(), &abi.ValidateRequest{OSName: "testos", OSVersion: "2.0"})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Errors) != 1 || resp.Errors[0].Field != "spec.osVersion" {
		t.Errorf("validate errors = %+v", resp.Errors)
	}
	_, err = m.Encode(context.Background(), &abi.EncodeRequest{})
	if !errors.Is(err, runtime.ErrMissingExport) {
		t.Errorf("Encode on a plugin without an encoder: err = %v, want MissingExport", err)
	}
}

func TestPluginErrors(t *testing.T) {
	m := load(t, newRuntime(t, runtime.Config{}), "healthy")
	tests := []struct {
		name       string
		config     map[string]string
		wantReason runtime.Reason
		wantMsg    string
	}{
		{name: "error", config: map[string]string{"fail": "mirror must be a URL"}, wantReason: runtime.ReasonPluginError,
			wantMsg: `plugin "healthy" (sha256:`},
		{name: "error text", config: map[string]string{"fail": "mirror must be a URL"}, wantReason: runtime.ReasonPluginError,
			wantMsg: `) osm_render: mirror must be a URL`},
		{name: "recovered panic", config: map[string]string{"panic": "nil map"}, wantReason: runtime.ReasonPluginError,
			wantMsg: "osm_render: plugin panicked: nil map"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := renderRequest()
			req.Config = tt.config
			_, err := m.Render(context.Background(), req)
			if runtime.ReasonOf(err) != tt.wantReason || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("Render() error = %v (reason %q), want reason %s and message containing %q", err, runtime.ReasonOf(err), tt.wantReason, tt.wantMsg)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error message spans lines: %q", err)
			}
		})
	}
	// The module keeps working after plugin errors.
	if _, err := m.Render(context.Background(), renderRequest()); err != nil {
		t.Fatalf("render after errors: %v", err)
	}
}

// TestConcurrentRendersShareARequest: callers may render one request from several goroutines (run with -race).
func TestConcurrentRendersShareARequest(t *testing.T) {
	m := load(t, newRuntime(t, runtime.Config{}), "healthy")
	req := renderRequest()
	errs := make(chan error)
	for range 4 {
		go func() {
			_, err := m.Render(context.Background(), req)
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if req.ABIVersion != "" {
		t.Errorf("Render changed the caller's request: abiVersion %q", req.ABIVersion)
	}
}
